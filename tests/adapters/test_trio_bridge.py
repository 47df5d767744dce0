"""The trio bridge: the asyncio-only Redis and etcd adapters used from trio code.

Real servers and real time, so each test drives ``trio.run`` itself (the virtual-time plugin
does not apply). The asyncio-only test proxy runs on the bridge's asyncio side too. The RTS-…
and PAY-… conformance cases run on both backends in tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from _servers_fixtures import need_binary
from _store_proxy import HoldingProxy
from videoflow_aio.adapters import _trio_bridge
from videoflow_aio.adapters._trio_bridge import Affinity, bridged, bridged_names, run_on_asyncio
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.adapters.redis._payload_controls import RedisPayloadControls
from videoflow_aio.conformance import REGISTRY, get_provider, run_case
from videoflow_aio.conformance._case import load_all
from videoflow_aio.contracts._base import Known
from videoflow_aio.contracts.errors import BackendUnavailable, Unsupported, ValidationError
from videoflow_aio.contracts.payload import Corrupt, PayloadBytes, PayloadStore, RetentionContract
from videoflow_aio.contracts.runtime_store import RuntimeStore
from videoflow_aio.testing.servers import ServerProcess, free_port

pytestmark = pytest.mark.server


def _ns() -> str:
    return f"tb-{uuid.uuid4().hex[:8]}"


async def _aio(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync asyncio-side function (the proxy's gates) on the bridge's loop."""

    async def call() -> Any:
        return fn(*args)

    return await run_on_asyncio(call)


def _run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return trio.run(fn)  # real clock: the servers do not follow a virtual one


# -- redis ---------------------------------------------------------------------------------------


def test_runtime_store_from_trio(redis_srv: ServerProcess) -> None:
    async def main() -> None:
        async with RedisRuntimeStore(redis_srv.url, namespace=_ns()) as store:
            assert await store.cas("a", None, b"1")
            value, version = await store.get("a")
            assert value == b"1"
            assert not await store.cas("a", None, b"again")
            assert await store.cas("a", version, b"2")
            assert [k for k, _, _ in await store.scan("")] == ["a"]
            assert await store.append("log", b"x") < await store.append("log", b"y")
            assert await store.log_entries("log") == [b"x", b"y"]
            with pytest.raises(ValidationError):  # refused on the caller's side, as on asyncio
                await store.cas("", None, b"v")

            async def create(i: int) -> None:  # many trio tasks share the pool and the loop
                assert await store.cas(f"c/{i:02d}", None, b"%d" % i)

            async with trio.open_nursery() as nursery:
                for i in range(30):
                    nursery.start_soon(create, i)
            assert len(await store.scan("c/")) == 30
            assert store._side.bridged and not store._side.direct

    _run(main)


def test_payload_store_and_its_controls_from_trio(
    redis_durable_srv: ServerProcess,
) -> None:
    async def main() -> None:
        async with RedisPayloadStore(redis_durable_srv.url, namespace=_ns()) as store:
            ref = await store.put(b"frame", "k", RetentionContract(ttl_seconds=60))
            got = await store.read(ref)
            assert isinstance(got, PayloadBytes) and got.data == b"frame"
            receipt = await store.acquire_obligation(ref, "ob-1", trio.current_time() + 30)
            assert receipt is not None
            inv = await store.inventory()
            assert isinstance(inv, Known) and [r.key for r in inv.value] == ["k"]
            controls = RedisPayloadControls(store)
            assert await controls.object_count() == 1
            assert list(await controls.obligations("k")) == ["ob-1"]
            await controls.corrupt("k")
            assert isinstance(await store.read(ref), Corrupt)

    _run(main)


async def _proxied_store(proxy: HoldingProxy, deadline: float) -> RedisRuntimeStore:
    await run_on_asyncio(proxy.__aenter__)
    store = RedisRuntimeStore(
        f"redis://127.0.0.1:{proxy.port}/0", namespace=_ns(), timeout=deadline
    )
    assert await store.cas("warm", None, b"up")  # one pooled connection now exists
    return store


def test_cancelled_cas_from_trio_is_settled_before_cancellation_returns(
    redis_srv: ServerProcess,
) -> None:
    """The trio caller's cancellation cancels the asyncio task, whose shielded resolution (an
    anyio scope on the asyncio side) runs to the end before ``trio.Cancelled`` propagates."""

    async def main() -> None:
        proxy = HoldingProxy(redis_srv.port)
        store = await _proxied_store(proxy, deadline=1.0)
        await _aio(proxy.hold, "down")
        await _aio(proxy.release_later, 0.3)
        with trio.move_on_after(0.05) as scope:
            await store.cas("k", None, b"v")
        assert scope.cancelled_caught
        # settled: the CAS applied (its marker says so), and a repeat loses
        assert (await store.get("k"))[0] == b"v"
        assert await store.cas("k", None, b"again") is False
        await store.aclose()
        await run_on_asyncio(proxy.__aexit__, None, None, None)

    _run(main)


def test_lost_request_from_trio_is_fenced(redis_srv: ServerProcess) -> None:
    """The deadline (kept on the asyncio side) fires and the resolution fences the request."""

    async def main() -> None:
        proxy = HoldingProxy(redis_srv.port)
        store = await _proxied_store(proxy, deadline=0.4)
        await _aio(proxy.hold, "up")
        with pytest.raises(BackendUnavailable) as info:
            await store.cas("k", None, b"late")
        assert info.value.fields.get("applied") is False
        await _aio(proxy.release)  # the held request reaches the server: the fence refuses it
        await trio.sleep(0.2)
        assert await store.get("k") == (None, None)
        await store.aclose()
        await run_on_asyncio(proxy.__aexit__, None, None, None)

    _run(main)


def test_unreachable_servers_map_the_same_under_trio() -> None:
    async def main() -> None:
        port = free_port()
        redis = RedisRuntimeStore(f"redis://127.0.0.1:{port}/0", timeout=0.5)
        with pytest.raises(BackendUnavailable):
            await redis.get("k")
        with pytest.raises(BackendUnavailable) as info:
            await redis.cas("k", None, b"v")
        assert info.value.fields["applied"] is False  # never sent
        await redis.aclose()
        etcd = EtcdRuntimeStore(f"http://127.0.0.1:{port}", timeout=0.5)
        with pytest.raises(BackendUnavailable):
            await etcd.get("k")
        await etcd.aclose()

    _run(main)


# -- etcd ----------------------------------------------------------------------------------------


def test_etcd_runtime_store_from_trio(etcd_srv: ServerProcess) -> None:
    async def main() -> None:
        async with EtcdRuntimeStore(etcd_srv.url, namespace=_ns()) as store:
            assert await store.cas("a", None, b"1")
            value, version = await store.get("a")
            assert value == b"1"
            assert await store.cas("a", version, b"2")
            assert not await store.cas("a", version, b"stale")
            assert await store.append("log", b"x") < await store.append("log", b"y")
            assert await store.log_entries("log") == [b"x", b"y"]
            assert [k for k, _, _ in await store.scan("")] == ["a"]
            assert await store.delete("a", None)
            await store.drop_namespace()

    _run(main)


def test_etcd_cancelled_cas_from_trio_is_settled(etcd_srv: ServerProcess) -> None:
    async def main() -> None:
        proxy = HoldingProxy(etcd_srv.port)
        await run_on_asyncio(proxy.__aenter__)
        store = EtcdRuntimeStore(f"http://127.0.0.1:{proxy.port}", namespace=_ns(), timeout=1.0)
        assert await store.cas("warm", None, b"up")
        await _aio(proxy.hold, "down")
        await _aio(proxy.release_later, 0.3)
        with trio.move_on_after(0.05) as scope:
            await store.cas("k", None, b"v")
        assert scope.cancelled_caught
        assert (await store.get("k"))[0] == b"v"
        assert await store.cas("k", None, b"again") is False
        await store.drop_namespace()
        await store.aclose()
        await run_on_asyncio(proxy.__aexit__, None, None, None)

    _run(main)


# -- the bridge itself ---------------------------------------------------------------------------


def _contract_methods(contract: type) -> set[str]:
    return {n for n in bridged_names(contract) if not n.startswith("_")}


@pytest.mark.parametrize(
    ("cls", "contract", "own"),
    [
        (RedisRuntimeStore, RuntimeStore, {"aclose", "drop_namespace"}),
        (EtcdRuntimeStore, RuntimeStore, {"aclose", "drop_namespace"}),
        (RedisPayloadStore, PayloadStore, {"aclose", "drop_namespace", "ensure_policy"}),
    ],
)
def test_every_contract_method_and_admin_helper_is_bridged(
    cls: type, contract: type, own: set[str]
) -> None:
    names = set(bridged_names(cls))
    assert _contract_methods(contract) | own | {"__aenter__", "__aexit__"} <= names
    assert not any(n.startswith("_") and n not in ("__aenter__", "__aexit__") for n in names)
    for name in names:
        assert getattr(getattr(cls, name), "__videoflow_bridged__", False), name


def test_controls_are_bridged_with_their_store() -> None:
    assert {"corrupt", "obligations", "object_count"} <= set(bridged_names(RedisPayloadControls))
    assert all(
        getattr(getattr(RedisPayloadControls, n), "__videoflow_bridged__", False)
        for n in bridged_names(RedisPayloadControls)
    )


@bridged
class _Probe:
    """Records which async library each of its methods ran under."""

    def __init__(self) -> None:
        self._side = Affinity()
        self.seen: list[str] = []

    async def outer(self) -> str:
        self.seen.append(sniffio_lib())
        return await self.inner()  # a bridged method calling another: direct on that side

    async def inner(self) -> str:
        self.seen.append(sniffio_lib())
        return "done"

    async def _private(self) -> str:
        return sniffio_lib()


def sniffio_lib() -> str:
    import sniffio

    return sniffio.current_async_library()


def test_the_decorator_runs_a_trio_call_whole_on_the_asyncio_side() -> None:
    async def main() -> None:
        probe = _Probe()
        assert await probe.outer() == "done"
        assert probe.seen == ["asyncio", "asyncio"]
        assert await probe._private() == "trio"  # private methods are not wrapped
        assert probe._side.bridged and not probe._side.direct

    _run(main)


def test_the_decorator_is_a_direct_call_from_asyncio() -> None:
    import asyncio

    async def main() -> None:
        probe = _Probe()
        assert await probe.outer() == "done"
        assert probe.seen == ["asyncio", "asyncio"]
        assert probe._side.direct and not probe._side.bridged

    asyncio.run(main())
    assert "_Probe.outer" in _Probe.outer.__qualname__  # functools.wraps keeps the name


def test_decorating_twice_or_a_subclass_wraps_once() -> None:
    wrapped = _Probe.outer
    assert bridged(_Probe).outer is wrapped

    @bridged
    class Sub(_Probe):
        async def inner(self) -> str:
            return "sub"

    assert Sub.outer is wrapped
    assert getattr(Sub.inner, "__videoflow_bridged__", False)


def _trio_rounds_during(steps: int) -> int:
    """How often a trio task got to run while the bridge's loop ran ``steps`` asyncio
    callbacks in a chain (each ``sleep(0)`` is one callback, queued by the one before)."""

    async def chain() -> None:
        for _ in range(steps):
            await asyncio.sleep(0)

    async def main() -> int:
        await run_on_asyncio(chain)  # the loop is up
        rounds = 0
        done = trio.Event()

        async def count() -> None:
            nonlocal rounds
            while not done.is_set():
                rounds += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as n:
            n.start_soon(count)
            await trio.lowlevel.checkpoint()
            await run_on_asyncio(chain)
            done.set()
        return rounds

    result: int = trio.run(main)
    return result


def test_the_bridge_loop_runs_queued_callbacks_in_batches_without_starving_trio() -> None:
    """trio-asyncio runs one asyncio callback per trio scheduling round (~40 µs of trio
    machinery each: the bridge cost ~0.5 ms of CPU per adapter call); the bridge's loop runs
    what is queued, up to ``BATCH_LIMIT`` callbacks after the first, per round."""
    steps = 20 * _trio_bridge.BATCH_LIMIT
    rounds = _trio_rounds_during(steps)
    assert rounds < steps // 8, f"{rounds} trio rounds for {steps} chained callbacks"
    assert rounds >= steps // (_trio_bridge.BATCH_LIMIT + 1) - 2, "trio kept running meanwhile"


def test_one_loop_per_run_closed_when_the_run_ends(redis_srv: ServerProcess) -> None:
    async def main() -> Any:
        a = RedisRuntimeStore(redis_srv.url, namespace=_ns())
        b = EtcdRuntimeStore("http://127.0.0.1:1")  # never called: opens nothing
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.cas, "x", None, b"1")
            nursery.start_soon(a.cas, "y", None, b"1")
        loop = _trio_bridge._SHARED.get().loop
        assert await a.get("x") == (b"1", (await a.get("x"))[1])
        assert _trio_bridge._SHARED.get().loop is loop  # shared, not one per call or task
        await a.aclose()
        await b.aclose()
        return loop

    first = _run(main)
    assert first.is_closed()
    assert _run(main) is not first  # a new run, a new loop


def test_missing_trio_asyncio_is_unsupported_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "trio_asyncio", None)  # import fails as if not installed

    async def main() -> None:
        store = RedisRuntimeStore("redis://127.0.0.1:1/0")
        with pytest.raises(Unsupported) as info:
            await store.get("k")
        assert "trio-asyncio" in str(info.value)

    _run(main)


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_anyio_on_the_asyncio_side_works_when_anyio_was_loaded_first() -> None:
    """anyio's asyncio backend binds ``get_running_loop`` by name; loaded before trio_asyncio
    patched it, it would not see the bridge's loop ("no running event loop") unless rebound."""
    out = _python(
        """
        import anyio, trio
        anyio.run(anyio.sleep, 0)  # anyio's asyncio backend is imported now, before trio_asyncio
        from videoflow_aio.adapters._trio_bridge import run_on_asyncio

        async def aio_side():
            with anyio.CancelScope(shield=True), anyio.fail_after(1):
                await anyio.sleep(0.01)
            return anyio.current_time()

        async def main():
            return await run_on_asyncio(aio_side) <= trio.current_time()

        print(trio.run(main))
        """
    )
    assert out == "True"


def test_the_asyncio_path_does_not_load_the_bridge(redis_srv: ServerProcess) -> None:
    out = _python(
        f"""
        import asyncio, sys
        from videoflow_aio.adapters.redis import RedisRuntimeStore

        async def main():
            s = RedisRuntimeStore({redis_srv.url!r}, namespace="plain")
            await s.cas("k", None, b"v")
            await s.aclose()
            return s._side.direct

        print(asyncio.run(main()), "trio_asyncio" in sys.modules)
        """
    )
    assert out == "True False"


def test_asyncio_loops_stay_plain_after_the_bridge_was_used() -> None:
    """trio_asyncio would make every later asyncio loop of the process a SyncTrioEventLoop."""
    out = _python(
        """
        import asyncio, anyio, trio
        from videoflow_aio.adapters._trio_bridge import run_on_asyncio

        async def loop_type():
            return type(asyncio.get_running_loop()).__name__

        async def main():
            return await run_on_asyncio(loop_type)

        print(trio.run(main), asyncio.run(loop_type()), anyio.run(loop_type), trio.run(main))
        """
    )
    assert out == "TrioEventLoop _UnixSelectorEventLoop _UnixSelectorEventLoop TrioEventLoop"


@pytest.mark.parametrize("name", ["redis", "etcd"])
def test_providers_run_the_cases_under_trio(name: str) -> None:
    load_all()
    provider = get_provider(name)
    if provider.unavailable():
        need_binary("etcd" if name == "etcd" else "redis-server")
    assert "trio" in provider.backends
    try:
        result = run_case(REGISTRY["RTS-001"], provider, "trio")
    finally:
        provider.close()
    assert result.outcome == "pass", result.reason


def test_inside_a_users_trio_asyncio_loop_either_side_works(
    redis_srv: ServerProcess,
) -> None:
    """A store called from trio tasks uses the bridge's loop; one called from asyncio tasks of
    the user's own ``trio_asyncio.open_loop()`` runs directly on that loop."""
    trio_asyncio = _trio_bridge._import()  # imported as the bridge does (keeps asyncio plain)

    async def main() -> None:
        async with trio_asyncio.open_loop():
            from_trio = RedisRuntimeStore(redis_srv.url, namespace=_ns())
            assert await from_trio.cas("k", None, b"t")
            from_aio = RedisRuntimeStore(redis_srv.url, namespace=from_trio.namespace)

            async def aio_side() -> tuple[bytes | None, str | None]:
                got = await from_aio.get("k")
                await from_aio.aclose()
                return got

            assert (await trio_asyncio.aio_as_trio(aio_side)())[0] == b"t"
            assert from_aio._side.direct and not from_aio._side.bridged
            assert from_trio._side.bridged
            await from_trio.aclose()

    _run(main)
