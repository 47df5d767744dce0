"""Test helpers: the pytest plugin that puts anyio tests on virtual time; real servers."""

from .servers import EtcdServer, NatsServer, RedisServer, ServerProcess

__all__ = ["EtcdServer", "NatsServer", "RedisServer", "ServerProcess"]
