"""Helpers for the pipeline toolkit tests: a source → decode → infer pipeline on any backend,
and a backend proxy that cancels the caller at a chosen contract call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from videoflow_aio.contracts.messaging import Delivery, MessagingBackend
from videoflow_aio.contracts.payload import PayloadStore
from videoflow_aio.pipeline import Node, Pipeline, Publisher, ensure_pipeline

THREE = (
    Node(name="cams"),
    Node(name="decode", inputs=("cams",)),
    Node(name="infer", inputs=("decode",)),
)


async def three_stage(backend: MessagingBackend, run_id: str = "r1", **kw: Any) -> Pipeline:
    nodes = [n if not n.inputs else Node(name=n.name, inputs=n.inputs, **kw) for n in THREE]
    return await ensure_pipeline(backend, "flow", run_id, nodes)


async def feed(
    backend: MessagingBackend,
    pipe: Pipeline,
    n: int,
    *,
    every: float = 0.01,
    data: bytes | None = None,
    payload: PayloadStore | None = None,
    eos: bool = True,
) -> list[str]:
    """Publish ``n`` frames ``f0..`` into ``cams`` (``event_ts`` = send time), then eos."""
    pub = Publisher(backend, pipe.channels["cams"], payload=payload, readers=pipe.readers["cams"])
    ids = []
    for i in range(n):
        await pub.send(f"f{i}", b"frame", event_ts=anyio.current_time(), data=data)
        ids.append(f"f{i}")
        await anyio.sleep(every)
    if eos:
        await pub.send("eos@cams", kind="eos")
    return ids


def sleeper(seconds: float, out: Sequence[Any] | None = (b"out",)) -> Callable[..., Awaitable[Any]]:
    async def handle(d: Delivery, data: bytes | None) -> Any:
        await anyio.sleep(seconds)
        return None if out is None else list(out)

    return handle


class Trigger:
    """Cancels ``scope`` at the ``at``-th contract call seen by the proxies sharing it —
    before the call runs (``when='before'``) or after it returned (``when='after'``, its
    effect applied). ``calls`` counts every call."""

    def __init__(self, scope: anyio.CancelScope | None, at: int, when: str) -> None:
        self.scope = scope
        self.at = at
        self.when = when
        self.calls = 0
        self.fired = False


class CancelAt:
    """Wraps a backend (messaging or payload): every contract method call goes through
    ``trigger``."""

    def __init__(self, inner: Any, trigger: Trigger) -> None:
        self._inner = inner
        self._trigger = trigger

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        t = self._trigger

        async def call(*args: Any, **kwargs: Any) -> Any:
            t.calls += 1
            hit = t.calls == t.at and t.scope is not None
            if hit and t.when == "before":
                t.fired = True
                t.scope.cancel()  # type: ignore[union-attr]
                await anyio.lowlevel.checkpoint()
            result = await attr(*args, **kwargs)
            if hit and t.when == "after":
                t.fired = True
                t.scope.cancel()  # type: ignore[union-attr]
                await anyio.lowlevel.checkpoint()
            return result

        return call
