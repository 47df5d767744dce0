"""Where the repository is, for tests in any folder of ``tests/``."""

from pathlib import Path

#: the repository's root (the folder with ``pyproject.toml``)
ROOT = Path(__file__).resolve().parent.parent
