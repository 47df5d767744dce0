"""Test helpers: the pytest plugin that puts anyio tests on virtual time."""
