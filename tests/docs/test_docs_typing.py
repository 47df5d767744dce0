"""A type checker catches a misspelt enumeration or a wrong argument before anything runs.

The constructors and ``make_*`` helpers take the ``Literal`` types they validate, and
``vtime.run`` types ``*args`` against the function it runs, and ``run_stage`` /
``stage_worker`` type their keyword options (``StageOptions``): mypy, run here over a small
program of mistakes, reports each one on its line.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from _paths import ROOT

mypy_api = pytest.importorskip("mypy.api")


PROGRAM = textwrap.dedent(
    """
    from videoflow_aio import vtime
    from videoflow_aio.conformance import Harness, case
    from videoflow_aio.contracts.messaging import (
        ChannelId, MessagingBackend, make_channel, make_envelope, make_subscription,
    )
    from videoflow_aio.pipeline import Handler, Pipeline, run_stage, stage_worker
    from videoflow_aio.memory.allocation import MemoryAllocationBackend
    from videoflow_aio.memory.payload import MemoryPayloadStore
    from videoflow_aio.adapters.redis import RedisPayloadStore

    cid = ChannelId("f", "r", "n")
    make_channel("f", "r", "n", "work", retention="limitz")  # E:retention
    make_channel("f", "r", "n", "work", "limits", overflow="drop")  # E:overflow
    make_envelope(cid, "p", kind="frame")  # E:kind
    make_subscription(cid, "c", kind="events")  # E:kind
    MemoryPayloadStore(tier="cold")  # E:tier
    RedisPayloadStore(tier="cold")  # E:tier
    MemoryAllocationBackend([], authority="kubelet")  # E:authority


    async def double(n: int) -> int:
        return 2 * n


    vtime.run(double, "one")  # E:run
    vtime.run(double, 1, backend="curio")  # E:backend
    vtime.run(double)  # E:run
    result: str = vtime.run(double, 1)  # E:assignment
    vtime.run(double, 1, backend="trio")


    @case("MYAPP-001", "a typo in the contract", contract="mesaging")  # E:contract
    async def typo(h: Harness) -> None:
        h.check(True)


    async def stages(b: MessagingBackend, pipe: Pipeline, handler: Handler) -> None:
        sub = pipe.subscriptions["decode"]
        stage_worker(b, pipe, "decode", handler, replicas="2")  # E:replicas
        stage_worker(b, pipe, "decode", handler, replica=2)  # E:replica
        stage_worker(b, pipe, "decode", handler, name="other")  # E:name
        await run_stage(b, sub, handler, handler_timeout_seconds="60")  # E:handler_timeout
        await run_stage(b, sub, handler, byte_credits=1)  # E:byte_credits
        stage_worker(b, pipe, "decode", handler, replicas=2, handler_timeout_seconds=None)
        await run_stage(b, sub, handler, eos=(), batch=4, payload=None, observe=None)
    """
)


def test_mypy_reports_each_mistake_on_its_line(tmp_path: Path) -> None:
    path = tmp_path / "mistakes.py"
    path.write_text(PROGRAM)
    out, err, status = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--show-error-codes", str(path)]
    )
    assert status == 1, out + err
    reported = {
        int(m.group(1)) for m in re.finditer(r"^.*mistakes\.py:(\d+): error:", out, re.MULTILINE)
    }
    expected = {
        n: line.split("# E:")[1] for n, line in enumerate(PROGRAM.splitlines(), 1) if "# E:" in line
    }
    assert reported == set(expected), out
    for n, what in expected.items():
        if what not in ("run", "assignment"):
            assert re.search(rf"mistakes\.py:{n}: error: .*{what}", out), (what, out)
