"""Bad input to every public method of every provider: a VideoflowError, and nothing changed.

For each contract, each provider this machine can run (the memory models, the file store, and
the real adapters on their servers) is put in a small state — a channel with a leased
delivery, an object under obligation, records and a log, a claim — and then every public
method (the contract's, and the model's own controls) is called with valid arguments except
one, which hypothesis draws from the wrong values for its type hint (``_boundary_inputs``) or
from well-typed values the provider must refuse (an unknown channel, a version of another
key, a foreign ref). Each call must raise a
:class:`~videoflow_aio.contracts.errors.VideoflowError`, and the provider's observations
must be the same after it as before. The number of inputs tried per contract and the number
of untyped errors met are reported at the end of the module (``-rA`` or the terminal summary).

The models run under asyncio and trio, the adapters under asyncio (their trio path crosses
the same boundary through the bridge). Each provider lives for the module in a blocking
portal, so one server connection serves every call.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import os
import typing
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _alloc_helpers import whole_node
from _boundary_inputs import bad
from _servers_fixtures import need_binary
from videoflow_aio.contracts import (
    AcceleratorAllocationBackend,
    ChannelId,
    Completed,
    ImmutablePayloadRef,
    Known,
    MessagingBackend,
    PayloadStore,
    RetentionContract,
    RuntimeStore,
    SubscriptionId,
    VideoflowError,
    WorkloadRequest,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.allocation import MemoryAllocationBackend
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger
from videoflow_aio.memory.runtime_store import FileRuntimeStore, MemoryRuntimeStore
from videoflow_aio.observe import ObservationLog
from videoflow_aio.testing.servers import start_etcd, start_nats, start_redis

CI = bool(os.environ.get("VIDEOFLOW_REQUIRE_SERVERS") or os.environ.get("CI"))
MODEL_EXAMPLES = 20
SERVER_EXAMPLES = 10

TRIED: collections.Counter[str] = collections.Counter()
UNTYPED: collections.Counter[str] = collections.Counter()
PROVIDERS: dict[str, set[str]] = collections.defaultdict(set)


class _Deadline:
    """A valid deadline, taken from the loop's clock when the call is made."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


@dataclass
class Env:
    contract: str
    provider: str
    backend: Any
    portal: BlockingPortal
    valid: dict[str, Any]
    snapshot: Callable[[], Awaitable[Any]]
    by_method: dict[tuple[str, str], Any] = field(default_factory=dict)
    semantic: dict[str, list[Any]] = field(default_factory=dict)
    """Well-typed values of a parameter that the provider must refuse with an error."""
    answers: set[tuple[str, str]] = field(default_factory=set)
    """(method, parameter) pairs whose semantic values get an answer, not an error."""


CONTRACT_OF: dict[str, type[Any]] = {
    "messaging": MessagingBackend,
    "payload": PayloadStore,
    "runtime_store": RuntimeStore,
    "allocation": AcceleratorAllocationBackend,
}


# -- the providers in their small state ------------------------------------------------------


async def _messaging(b: Any, *, core: bool, model: bool, log: ObservationLog | None) -> Env:
    cid = ChannelId("bf", f"r{uuid.uuid4().hex[:6]}", "n")
    spec = make_channel(
        cid.flow_id, cid.run_id, cid.node, "work", "limits", owner_labels={"generation": "g1"}
    )
    sub = make_subscription(cid, "w", ack_wait_seconds=600.0, max_deliver=-1)
    await b.ensure_channel(spec, "op-ch")
    await b.ensure_subscription(sub, "op-sub")
    now = anyio.current_time()
    await b.publish(make_envelope(cid, "p0"), now + 5)
    (delivery,) = await b.receive(sub.id, 1, 1 << 20, now + 5)
    caps = await b.capabilities()
    if caps.durable_control:
        assert await b.commit_control(cid, "k", None, b"v")

    async def snapshot() -> Any:
        out: list[Any] = [
            await b.channel_ids(),
            await b.subscription_ids(cid),
            await b.observe_channel(cid),
            await b.observe_subscription(sub.id),
        ]
        if not core:
            out.append(await b.observe_ack_floor(sub.id))
        if caps.durable_control:
            out.append(await b.control_state(cid, "k"))
        if model:
            out += [b.stored(cid), len(log.events()) if log is not None else 0]
        return out

    unknown = ChannelId("no", "such", "chan")
    valid = {
        "envelope": make_envelope(cid, "p-new"),
        "deadline": _Deadline(5.0),
        "subscription": sub.id,
        "item_credit": 1,
        "byte_credit": 1 << 20,
        "token": delivery.token,
        "outcome": Completed(),
        "settlement_id": "settle-1",
        "channel_id": cid,
        "operation_id": "op",
        "owned": [cid],
        "expected_generation": "g1",
        "key": "k",
        "expected_version": None,
        "value": b"v",
        "event_id": "p0",
        "publication_id": "p0",
        "reason": "because",
        "sequence": 999,  # delete_message (a model control): no such message, nothing removed
    }
    return Env(
        "messaging",
        "",
        b,
        None,  # type: ignore[arg-type]
        valid,
        snapshot,
        by_method={("ensure_channel", "spec"): spec, ("ensure_subscription", "spec"): sub},
        semantic={
            "channel_id": [unknown],
            "subscription": [SubscriptionId(cid, "nobody"), SubscriptionId(unknown, "w")],
            "envelope": [make_envelope(unknown, "p-lost")],
        },
        answers={("replay", "channel_id")},  # the archive outlives the channel: None
    )


async def _payload(s: Any, *, model: bool, log: ObservationLog | None) -> Env:
    hold = RetentionContract(ttl_seconds=3600.0, obligations=("r/a",), obligation_seconds=3600.0)
    ref = await s.put(b"frame-bytes", "k", hold)

    async def snapshot() -> Any:
        out: list[Any] = [await s.inventory(), await s.ref_for_key("k")]
        if model:
            out += [s.obligations("k"), s.stored_bytes(), len(log.events()) if log else 0]
        return out

    foreign = ImmutablePayloadRef(ref.key, ref.size, ref.digest, ref.generation, "elsewhere")
    valid = {
        "data": b"other",
        "content_id": "k2",
        "contract": RetentionContract(),
        "ref": ref,
        "reader": "reader-1",
        "obligation_id": "r/b",
        "deadline": _Deadline(60.0),
        "completion_receipt": "done",
        "ledger": StaticLedger({"k": ("r/a",)}),
        "operation_id": "op",
        "key": "k",
        "size": 1,
        "reason": "because",
        "reasons": ["because"],
        "ttl_seconds": 60.0,
    }
    return Env(
        "payload",
        "",
        s,
        None,  # type: ignore[arg-type]
        valid,
        snapshot,
        semantic={"ref": [foreign], "deadline": [_Deadline(-1.0)]},
    )


async def _runtime(s: Any) -> Env:
    assert await s.cas("k", None, b"v")
    await s.append("l", b"r")
    _, version = await s.get("k")
    assert await s.cas("other", None, b"o")
    _, other_version = await s.get("other")
    caps = await s.capabilities()

    async def snapshot() -> Any:
        return [await s.scan(""), await s.get("k"), await s.log_entries("l")]

    valid = {
        "key": "k",
        "expected_version": version,
        "value": b"v2",
        "prefix": "",
        "log": "l",
        "record": b"r2",
    }
    return Env(
        "runtime_store",
        "",
        s,
        None,  # type: ignore[arg-type]
        valid,
        snapshot,
        semantic={
            "expected_version": [other_version, "nonsense", "1-zzzzzzzz"],
            "key": ["x" * (caps.max_key_bytes + 1)],
            "value": [b"x" * (caps.max_value_bytes + 1)],
        },
    )


async def _allocation(b: MemoryAllocationBackend) -> Env:
    inv = await b.inventory({})
    assert isinstance(inv, Known)
    plan = await b.plan([WorkloadRequest(workload_id="w1", devices=1)], inv.value)
    claim = await b.reserve(plan, "op1", None)  # type: ignore[arg-type]
    inv2 = await b.inventory({})
    assert isinstance(inv2, Known)
    plan2 = await b.plan([WorkloadRequest(workload_id="w2", devices=1)], inv2.value)

    async def snapshot() -> Any:
        now = await b.inventory({})
        assert isinstance(now, Known)
        return [b.mutations(), await b.observe(claim.claim_id), now.value.nodes]

    valid = {
        "scope": {},
        "requests": [WorkloadRequest(workload_id="w3", devices=1)],
        "snapshot": inv2.value,
        "plan": plan2,
        "operation_id": "op2",
        "expected_generation": claim.generation,
        "claim_id": claim.claim_id,
        "desired": "held",
        "keep_workloads": False,
        "workload_id": "w1",
        "environment": {},
        "node": "n2",
        "node_name": "n2",
        "name": "n2",
        "units": 1,
        "kind": "pods",
        "reason": "timeout",
        "kinds": ["node.owner"],
    }
    return Env(
        "allocation",
        "",
        b,
        None,  # type: ignore[arg-type]
        valid,
        snapshot,
        semantic={"claim_id": ["no-such-claim"]},
    )


@contextlib.contextmanager
def _server(binary: str, start: Callable[[], Any]) -> Iterator[Any]:
    need_binary(binary)
    srv = start()
    try:
        yield srv
    finally:
        srv.stop()


@contextlib.contextmanager
def _open(provider: str, tmp: Path) -> Iterator[Env]:
    """The provider in its small state, served by a blocking portal for the module."""
    backend_name = "trio" if provider.endswith("@trio") else "asyncio"
    name = provider.removesuffix("@trio")
    with contextlib.ExitStack() as stack:
        url = ""
        if name.startswith("nats"):
            url = stack.enter_context(_server("nats-server", start_nats)).url
        elif name.startswith("redis"):
            policy = {"maxmemory": "256mb", "policy": "noeviction"}
            url = stack.enter_context(_server("redis-server", lambda: start_redis(**policy))).url
        elif name.startswith("etcd"):
            url = stack.enter_context(_server("etcd", start_etcd)).url
        portal = stack.enter_context(start_blocking_portal(backend_name))

        async def build() -> Env:
            log = ObservationLog()
            ns = f"b{uuid.uuid4().hex[:8]}"
            b: Any
            if name in ("memory-messaging", "memory-core"):
                b = MemoryMessagingBackend(
                    core_only=name == "memory-core",
                    durable_control=name != "memory-core",
                    archive=name != "memory-core",
                    log=log,
                )
                return await _messaging(b, core=name == "memory-core", model=True, log=log)
            if name == "nats-jetstream":
                from videoflow_aio.adapters.nats import JetStreamMessagingBackend

                b = JetStreamMessagingBackend(
                    url,
                    stream_prefix=ns.upper(),
                    subject_prefix=ns,
                    request_timeout=2.0,
                    durable_control=True,
                    archive=True,
                )
                return await _messaging(b, core=False, model=False, log=None)
            if name == "nats-core":
                from videoflow_aio.adapters.nats import CoreNatsMessagingBackend

                b = CoreNatsMessagingBackend(url, subject_prefix=ns)
                return await _messaging(b, core=True, model=False, log=None)
            if name == "memory-payload":
                return await _payload(MemoryPayloadStore(log=log), model=True, log=log)
            if name == "redis-payload":
                from videoflow_aio.adapters.redis import RedisPayloadStore

                return await _payload(RedisPayloadStore(url, namespace=ns), model=False, log=None)
            if name == "memory-runtime":
                return await _runtime(MemoryRuntimeStore())
            if name == "file-runtime":
                return await _runtime(FileRuntimeStore(str(tmp / ns)))
            if name == "redis-runtime":
                from videoflow_aio.adapters.redis import RedisRuntimeStore

                return await _runtime(RedisRuntimeStore(url, namespace=ns))
            if name == "etcd-runtime":
                from videoflow_aio.adapters.etcd import EtcdRuntimeStore

                return await _runtime(EtcdRuntimeStore(url, namespace=ns))
            assert name == "memory-allocation", name
            nodes = [whole_node("n1", 2), whole_node("n2", 2)]
            return await _allocation(MemoryAllocationBackend(nodes))

        env = portal.call(build)
        env.provider = provider
        env.portal = portal
        try:
            yield env
        finally:
            close = getattr(env.backend, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    portal.call(close)


# -- what to call ----------------------------------------------------------------------------

MODELS: dict[str, type[Any]] = {
    "memory-messaging": MemoryMessagingBackend,
    "memory-core": MemoryMessagingBackend,
    "memory-payload": MemoryPayloadStore,
    "memory-runtime": MemoryRuntimeStore,
    "file-runtime": FileRuntimeStore,
    "memory-allocation": MemoryAllocationBackend,
}
ADAPTERS: dict[str, str] = {
    "nats-jetstream": "videoflow_aio.adapters.nats:JetStreamMessagingBackend",
    "nats-core": "videoflow_aio.adapters.nats:CoreNatsMessagingBackend",
    "redis-payload": "videoflow_aio.adapters.redis:RedisPayloadStore",
    "redis-runtime": "videoflow_aio.adapters.redis:RedisRuntimeStore",
    "etcd-runtime": "videoflow_aio.adapters.etcd:EtcdRuntimeStore",
}


def _class(path: str) -> type[Any]:
    module, _, name = path.partition(":")
    return typing.cast(type[Any], getattr(__import__(module, fromlist=[name]), name))


def _methods(cls: type[Any]) -> list[str]:
    """Every public method taking arguments (the contract's and the provider's own)."""
    out = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if inspect.isfunction(raw) and len(inspect.signature(raw).parameters) > 1:
            out.append(name)
    return out


def _items() -> list[Any]:
    items = []
    for provider, cls in MODELS.items():
        for backend in ("", "@trio"):
            for method in _methods(cls):
                items.append(
                    pytest.param(provider + backend, method, id=f"{provider}{backend}-{method}")
                )
    for provider, path in ADAPTERS.items():
        for method in _methods(_class(path)):
            items.append(
                pytest.param(provider, method, id=f"{provider}-{method}", marks=pytest.mark.server)
            )
    return items


@pytest.fixture(scope="module")
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with _open(request.param, tmp_path_factory.mktemp("boundary")) as opened:
        yield opened


@pytest.fixture(scope="module", autouse=True)
def _report(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if reporter is None or capture is None or not TRIED:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line("boundary campaign: bad inputs tried per contract, untyped errors")
        for contract in sorted(TRIED):
            providers = ", ".join(sorted(PROVIDERS[contract]))
            reporter.write_line(
                f"  {contract:14} {TRIED[contract]:6,} inputs, untyped errors: "
                f"{UNTYPED[contract]}  [{providers}]"
            )


def _parameters(env: Env, method: str) -> list[tuple[str, Any]]:
    fn = getattr(type(env.backend), method)
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    contract = CONTRACT_OF[env.contract]
    own = typing.get_type_hints(fn, include_extras=True)
    if method in contract._vf_methods:  # the contract's hints are the ones that bind
        own = typing.get_type_hints(contract._vf_methods[method], include_extras=True)
    names = list(inspect.signature(fn).parameters)[1:]
    return [(n, own.get(n, Any)) for n in names]


def _valid(env: Env, method: str, name: str) -> Any:
    if (method, name) in env.by_method:
        return env.by_method[(method, name)]
    if name not in env.valid:
        pytest.fail(f"no valid value for {env.provider}.{method}({name}=…): add one to the env")
    return env.valid[name]


async def _call(env: Env, method: str, args: list[Any]) -> tuple[Any, BaseException | None]:
    now = anyio.current_time()
    args = [now + a.seconds if isinstance(a, _Deadline) else a for a in args]
    before = await env.snapshot()
    error: BaseException | None = None
    try:
        result = getattr(env.backend, method)(*args)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # what was raised is the point
        error = exc
    return before, error


@pytest.mark.parametrize(("env", "method"), _items(), indirect=["env"])
def test_bad_input_is_refused_and_changes_nothing(env: Env, method: str) -> None:
    params = _parameters(env, method)
    choices = []
    for i, (name, hint) in enumerate(params):
        base = _valid(env, method, name)
        wrong = bad(hint, base)
        if wrong is not None:
            choices.append((i, wrong))
        if name in env.semantic and (method, name) not in env.answers:
            choices.append((i, st.sampled_from(env.semantic[name])))
    if not choices:
        pytest.skip(f"{method} takes nothing that can be wrong")
    model = env.provider.startswith(("memory", "file"))

    @settings(
        max_examples=MODEL_EXAMPLES if model else SERVER_EXAMPLES,
        deadline=None,
        derandomize=CI,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(data=st.data())
    def attempt(data: Any) -> None:
        index, strategy = data.draw(st.sampled_from(choices), label="parameter")
        value = data.draw(strategy, label=params[index][0])
        args = [_valid(env, method, name) for name, _ in params]
        args[index] = value
        before, error = env.portal.call(_call, env, method, args)
        after = env.portal.call(env.snapshot)
        TRIED[env.contract] += 1
        PROVIDERS[env.contract].add(env.provider)
        call = f"{env.provider}.{method}({params[index][0]}={value!r})"
        if not isinstance(error, VideoflowError):
            UNTYPED[env.contract] += error is not None
            raise AssertionError(
                f"{call} raised {error!r}" if error is not None else f"{call} was accepted"
            )
        assert after == before, f"{call} changed state"

    attempt()
