"""FileRuntimeStore beyond issue 11's own list: strict log lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from videoflow_aio.contracts.runtime_store import CorruptRecord
from videoflow_aio.memory.runtime_store import FileRuntimeStore

pytestmark = pytest.mark.anyio


# -- strict log lines -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: line[:8].upper() + line[8:],  # a flipped 0x20 bit in a hex digit
        lambda line: b"+" + line[1:],  # int() takes a sign
        lambda line: b" " + line[1:],  # ... and surrounding blanks
        lambda line: line[:4] + b"_" + line[5:],  # ... and underscores
    ],
    ids=["upper-case", "plus-sign", "blank", "underscore"],
)
async def test_a_log_line_whose_checksum_field_was_altered_is_corrupt(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    """The checksum is written as 8 lower-case hex digits; anything else in that field is
    damage (int(..., 16) read ``0D0E09B1``, ``+d0e09b1`` and `` d0e09b1`` as the same number)."""
    store = FileRuntimeStore(tmp_path)
    await store.append("log", b"r1")
    path = tmp_path / "logs" / "log.log"
    line = path.read_bytes()
    assert line.startswith(b"0d0e09b1 ")  # CRC32 of b"r1": digits and letters
    path.write_bytes(damage(line))
    with pytest.raises(CorruptRecord):
        await store.log_entries("log")
    with pytest.raises(CorruptRecord):
        await FileRuntimeStore(tmp_path).append("log", b"r2")
