"""Batched stages: a replica collects up to ``max_items`` messages — waiting at most
``max_wait_seconds`` after the first for a fuller batch — and calls a batch handler once
with all of them (batched GPU inference: a batch of n costs far less than n singles).

The handler returns one result per item, in order: ``None`` or a sequence of
:class:`~videoflow_aio.pipeline.Output`/``bytes`` (forwarded as that item's outputs, under
its event id), or an ``Exception`` instance (that item is settled as the exception policy
says: :class:`~videoflow_aio.pipeline.RetryLater`, :class:`~videoflow_aio.pipeline.GiveUp`,
…). Returning ``None`` completes every item with no outputs. A handler that raises (or
overruns ``handler_timeout_seconds``) settles every item per the policy.

Guarantees are :class:`~videoflow_aio.pipeline.StageWorker`'s: items are leased from their
receive until their own settle (renewed meanwhile, while the batch fills and while the
handler runs), so a replica cancelled or crashed at any await settles nothing undone and
the whole batch redelivers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Unpack

from ..contracts.errors import BackendUnavailable, ValidationError
from ..contracts.messaging import (
    Delivery,
    MessagingBackend,
    SettleOutcome,
    SubscriptionId,
)
from ..contracts.payload import ImmutablePayloadRef
from ._errors import BadHandler
from ._publish import PAYLOAD_HEADER
from ._time import check_seconds
from ._topology import Pipeline
from ._worker import (
    _COMPLETED,
    MAX_BATCH,
    Output,
    StageOptions,
    StageWorker,
    WorkerOptions,
    _Replica,
    stage_wiring,
)

Inputs = SubscriptionId | Sequence[SubscriptionId]
"""The data subscription(s) a worker serves."""
ItemResult = Sequence[Output | bytes] | Exception | None
"""One item's result from a batch handler: its outputs (or None), or the exception to settle
it by."""
BatchHandler = Callable[
    [Sequence[Delivery], Sequence[bytes | None]], Awaitable[Sequence[ItemResult] | None]
]
"""``await handler(deliveries, payloads)`` → one :data:`ItemResult` per item (or None)."""


class BatchWorker(StageWorker):
    """A stage whose handler serves batches (see the module docstring).

    ``max_items``: the most messages per batch; ``max_wait_seconds``: how long after the
    first message of a batch a replica may wait for more (0: take what one receive gives).
    The other arguments are :class:`StageWorker`'s (its ``batch`` is ``max_items`` here).
    """

    def __init__(
        self,
        backend: MessagingBackend,
        subscription: Inputs,
        handler: BatchHandler,
        *,
        max_items: int = 8,
        max_wait_seconds: float = 0.005,
        **options: Unpack[WorkerOptions],
    ) -> None:
        if "batch" in options:
            raise ValidationError(
                "a BatchWorker takes max_items, not batch", field="batch", value=options["batch"]
            )
        if (
            isinstance(max_items, bool)
            or not isinstance(max_items, int)
            or not 1 <= max_items <= MAX_BATCH
        ):
            raise ValidationError(
                f"max_items must be an int in [1, {MAX_BATCH}]",
                field="max_items",
                value=max_items if isinstance(max_items, int) else type(max_items),
            )
        self.max_wait = check_seconds(max_wait_seconds, "max_wait_seconds")
        options["batch"] = max_items
        super().__init__(
            backend,
            subscription,
            handler,  # type: ignore[arg-type]  # called by _batch with the whole batch
            **options,
        )
        self.batch_handler = handler
        self.batches = 0
        """Batches handed to the handler."""

    async def _serve(self, r: _Replica) -> None:
        now = self._now
        poll = self.poll_seconds
        most = self.batch
        while True:
            got = await self._receive(r, most, now() + poll)
            if not got:
                continue
            started = now()
            self._take(r, got, started)
            deadline = started + self.max_wait
            while len(got) < most and now() < deadline:
                more = await self._receive(r, most - len(got), deadline)
                if not more:
                    break
                self._take(r, more, started)
                got += more
            await self._batch(r, got)
            r.busy = False
            self.counters.busy_seconds[r.index] += now() - started

    async def _receive(self, r: _Replica, most: int, deadline: float) -> list[Delivery]:
        try:
            return list(await self.backend.receive(r.sub, most, self.byte_credit, deadline))
        except BackendUnavailable:
            self.counters.receive_errors += 1
            await self._sleep(self.poll_seconds)
            return []

    async def _batch(self, r: _Replica, got: list[Delivery]) -> None:
        """Handle one batch and settle each item with its own outcome."""
        refs: list[ImmutablePayloadRef | None] = []
        outcomes: list[SettleOutcome] = []
        datas: list[bytes | None] = []
        for d in got:
            headers = d.envelope.headers
            raw = headers.get(PAYLOAD_HEADER) if headers else None
            if raw is not None and self.payload is not None:
                data, ref, outcome = await self._read_payload(raw)
            else:
                data, ref, outcome = None, None, _COMPLETED
            datas.append(data)
            refs.append(ref)
            outcomes.append(outcome)
        ready = [i for i, o in enumerate(outcomes) if o is _COMPLETED]
        if ready:
            items = [got[i] for i in ready]
            self.batches += 1
            result, outcome = await self._invoke(
                self.batch_handler, (items, [datas[i] for i in ready]), items[0], None
            )
            per_item = self._per_item(result, len(items)) if outcome is _COMPLETED else None
            for k, i in enumerate(ready):
                outcomes[i] = (
                    outcome if per_item is None else await self._finish(got[i], per_item[k])
                )
        for d, outcome, ref in zip(got, outcomes, refs, strict=True):
            await self._settle(r, d, outcome, ref)

    def _per_item(self, result: object, n: int) -> Sequence[ItemResult]:
        if result is None:
            return [None] * n
        if not isinstance(result, list | tuple) or len(result) != n:
            raise BadHandler(
                f"batch handler of {self.name!r} returned "
                f"{len(result) if isinstance(result, list | tuple) else type(result).__name__}"
                f" results for {n} items: expected None or one result per item",
                stage=self.name,
            )
        return result

    async def _finish(self, d: Delivery, item: ItemResult) -> SettleOutcome:
        """Forward one item's outputs; the outcome to settle it with."""
        if isinstance(item, Exception):
            return self.policy.outcome(item, d)
        if item is None:
            return _COMPLETED
        if not isinstance(item, list | tuple):
            self._check_result(item)
        try:
            if item:
                await self._forward(d.envelope, item)
        except BadHandler:
            raise
        except Exception as exc:
            return self.policy.outcome(exc, d)
        return _COMPLETED


class BatchOptions(StageOptions, total=False):
    """:class:`StageOptions` with a :class:`BatchWorker`'s own (``max_items``,
    ``max_wait_seconds``)."""

    max_items: int
    max_wait_seconds: float


def batch_worker(
    backend: MessagingBackend,
    pipeline: Pipeline,
    stage: str,
    handler: BatchHandler,
    **options: Unpack[BatchOptions],
) -> BatchWorker:
    """A :class:`BatchWorker` for ``stage`` of ``pipeline``, wired as
    :func:`~videoflow_aio.pipeline.stage_worker` wires one."""
    subs, wiring = stage_wiring(pipeline, stage)
    return BatchWorker(backend, subs, handler, **wiring, **options)


__all__ = ["BatchHandler", "BatchOptions", "BatchWorker", "ItemResult", "batch_worker"]
