"""Owned background tasks: ``adapters._tasks.TaskOwner`` and the backends that spawn into it.

No adapter leaves a task running after ``aclose`` (checked with ``asyncio.all_tasks``), and an
error in a background task is seen: counted and logged, and an unexpected one raised by
``aclose``.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from typing import Any

import anyio
import pytest

from _nats_helpers import backend
from videoflow_aio.adapters._tasks import BackgroundTaskFailed, TaskOwner, gather
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.nats import _api
from videoflow_aio.adapters.nats._api import NotSent
from videoflow_aio.contracts.messaging import Accepted, make_channel, make_envelope
from videoflow_aio.testing.servers import ServerProcess

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the adapters' engines are asyncio libraries


def _others() -> set[asyncio.Task[Any]]:
    """Pending tasks other than this test's and the runner's (anyio's pytest plugin runs the
    test in a task of its own runner task)."""
    return {
        t
        for t in asyncio.all_tasks()
        if t is not asyncio.current_task()
        and not t.done()
        and "_call_in_runner_task" not in repr(t.get_coro())
    }


# -- TaskOwner ----------------------------------------------------------------------------------
async def test_aclose_cancels_plain_tasks_and_awaits_kept_ones() -> None:
    owner = TaskOwner("t", timeout=5.0)
    release = asyncio.Event()
    wrote: list[str] = []

    async def write() -> None:
        await release.wait()
        wrote.append("index")

    async def nudge() -> None:
        await asyncio.Event().wait()  # never set: only a cancel ends it

    owner.spawn(write(), name="write", keep=True)
    plain = owner.spawn(nudge(), name="nudge")
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(release.set)
    await owner.aclose()
    assert wrote == ["index"]
    assert plain.cancelled()
    assert len(owner) == 0
    assert not _others()


async def test_a_kept_task_past_the_timeout_is_cancelled() -> None:
    owner = TaskOwner("t", timeout=0.01)
    kept = owner.spawn(asyncio.Event().wait(), name="stuck", keep=True)
    await owner.aclose()
    assert kept.cancelled() and not _others()


async def test_an_unexpected_error_is_counted_logged_and_raised_by_aclose(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = TaskOwner("t", timeout=1.0)

    async def boom() -> None:
        raise RuntimeError("boom")

    owner.spawn(boom(), name="b")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert owner.failures == 1 and "boom" in owner.errors[-1]
    assert "boom" in caplog.text
    with pytest.raises(BackgroundTaskFailed, match="boom"):
        await owner.aclose()
    await owner.aclose()  # raised once


async def test_a_noted_error_is_counted_not_raised() -> None:
    owner = TaskOwner("t", timeout=1.0)
    owner.note("index write", NotSent("gone"))
    assert owner.failures == 1 and owner.errors == ["index write: NotSent: gone"]
    await owner.aclose()


async def test_an_awaited_task_leaves_its_error_to_its_caller() -> None:
    owner = TaskOwner("t", timeout=1.0)

    async def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await owner.spawn(boom(), name="rpc", awaited=True)
    assert owner.failures == 0
    await owner.aclose()


async def test_aclose_is_shielded_from_its_callers_cancel() -> None:
    owner = TaskOwner("t", timeout=5.0)
    release = asyncio.Event()
    kept = owner.spawn(release.wait(), name="w", keep=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        asyncio.get_running_loop().call_soon(release.set)
        await owner.aclose()
    assert kept.done() and not kept.cancelled()


# -- gather: the caller's cancellation survives a child that swallows it ------------------------
async def _swallows(scope: anyio.CancelScope, woke: list[str]) -> str:
    """Cancel the caller's scope, then return when cancelled — as nats-py's request does on
    Python 3.11 when its reply and the cancel arrive together (``asyncio.wait_for``). The
    cancel comes while it waits, as a scope's deadline does."""
    asyncio.get_running_loop().call_soon(scope.cancel)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        woke.append("cancelled")
    return "reply"


async def _parallel(scope: anyio.CancelScope, woke: list[str]) -> None:
    await gather(_swallows(scope, woke), asyncio.sleep(0))


async def _parallel_read_of_kept_deliveries(scope: anyio.CancelScope, woke: list[str]) -> None:
    """``_pull._withhold_removed`` with one kept delivery whose read swallows the cancel."""
    from types import SimpleNamespace

    from videoflow_aio.adapters.nats import _pull

    async def retained(stream: str, seq: int) -> bool:
        return await _swallows(scope, woke) == "reply"

    d = SimpleNamespace(sequence=1, attempt=1, lease_deadline=float("inf"))
    st = SimpleNamespace(late=[d], leases={1: (1, None)}, chan=SimpleNamespace(stream="S"))
    await _pull._withhold_removed(SimpleNamespace(retained=retained), st)  # type: ignore[arg-type]


@pytest.mark.parametrize("run", [_parallel, _parallel_read_of_kept_deliveries])
async def test_a_cancelled_caller_gets_its_own_cancellation_when_a_child_swallows_it(
    run: Any,
) -> None:
    """``asyncio.gather`` raised a fresh ``CancelledError`` here that the scope let escape."""
    woke: list[str] = []
    with anyio.CancelScope() as scope:
        await run(scope, woke)
    assert scope.cancelled_caught and woke == ["cancelled"]
    assert not _others()


async def test_gather_returns_each_result_or_error_in_order() -> None:
    async def fails() -> int:
        raise ValueError("no")

    async def slow() -> int:
        await asyncio.sleep(0.01)
        return 2

    got = await gather(slow(), fails(), asyncio.sleep(0, 3))
    assert got[0] == 2 and isinstance(got[1], ValueError) and got[2] == 3
    assert await gather() == []


async def test_gather_leaves_no_childs_error_unretrieved() -> None:
    """A child cancelled by another hand is raised; the next child's error is retrieved all
    the same (asyncio would log it as never retrieved)."""
    loop = asyncio.get_running_loop()
    logged: list[str] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))

    async def fails() -> None:
        raise ValueError("lost")

    try:
        other = asyncio.ensure_future(asyncio.sleep(10))
        loop.call_soon(other.cancel)
        with pytest.raises(asyncio.CancelledError):
            await gather(other, fails())
        del other
        gc.collect()
    finally:
        loop.set_exception_handler(before)
    assert logged == []


class _Stop(BaseException):
    pass


async def test_gather_raises_an_error_that_is_not_an_exception() -> None:
    async def stopped() -> None:
        raise _Stop

    with pytest.raises(_Stop):
        await gather(stopped(), asyncio.sleep(0))


# -- NATS: the index write the publish path leaves behind ---------------------------------------
async def _publish_one(b: Any) -> None:
    ch = make_channel("f", "r", "n", "work", retention="limits")
    await b.ensure_channel(ch, f"op-{uuid.uuid4().hex}")
    out = await b.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 5)
    assert isinstance(out, Accepted)


@pytest.mark.server
@pytest.mark.vtime(False)
async def test_nats_aclose_awaits_the_index_write_in_flight(
    nats_srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The linger timer's index write (a task) is in flight at ``aclose``: it is awaited (it
    records an acknowledged publication) and no task is left."""
    started, release = anyio.Event(), anyio.Event()
    landed: list[str] = []
    real = _api.publish

    async def held(nc: Any, subject: str, payload: bytes, *a: Any, **kw: Any) -> None:
        started.set()
        await release.wait()
        await real(nc, subject, payload, *a, **kw)
        landed.append(subject)

    b = backend(nats_srv)
    await _publish_one(b)
    monkeypatch.setattr(_api, "publish", held)
    with anyio.fail_after(5):
        await started.wait()  # the 20 ms linger passed: the index write runs in a task
    asyncio.get_running_loop().call_later(0.01, release.set)
    await b.aclose()
    assert len(landed) == 1
    assert not _others()
    await b.drop_namespace()
    await b.aclose()


@pytest.mark.server
@pytest.mark.vtime(False)
async def test_nats_a_failed_index_write_is_surfaced(
    nats_srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost index write is counted (``background_errors``); an unexpected error in the
    task is raised by ``aclose``."""
    calls = 0

    async def failing(*a: Any, **kw: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise NotSent("connection gone")
        raise RuntimeError("bug in the index write")

    b = backend(nats_srv)
    await _publish_one(b)
    monkeypatch.setattr(_api, "publish", failing)
    with anyio.fail_after(5):
        while not b.background_errors:  # noqa: ASYNC110 - the linger timer is real time
            await anyio.sleep(0.005)
    assert "NotSent: connection gone" in b.background_errors[-1]
    ch = make_channel("f", "r", "n", "work", retention="limits")
    out = await b.publish(make_envelope(ch.channel, "p2"), anyio.current_time() + 5)
    assert isinstance(out, Accepted)
    with anyio.fail_after(5):
        while len(b.background_errors) < 2:  # noqa: ASYNC110
            await anyio.sleep(0.005)
    monkeypatch.undo()
    with pytest.raises(BackgroundTaskFailed, match="bug in the index write"):
        await b.aclose()
    assert not _others()
    await b.drop_namespace()
    await b.aclose()


# -- etcd: the RPC a cancelled caller leaves ----------------------------------------------------
@pytest.mark.server
@pytest.mark.vtime(False)
async def test_etcd_aclose_leaves_no_task(etcd_srv: ServerProcess) -> None:
    store = EtcdRuntimeStore(etcd_srv.url, namespace=f"t-{uuid.uuid4().hex[:8]}", timeout=2.0)
    assert await store.cas("a", None, b"1")
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(store.get, "a")
                tg.start_soon(store.cas, "b", None, b"2")
            await anyio.lowlevel.checkpoint()
            scope.cancel()
    await store.drop_namespace()
    await store.aclose()
    assert not _others()
