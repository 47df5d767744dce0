"""The pipeline toolkit: stage workers and their set-up over the messaging and payload
contracts, so the same stage code runs on the memory model (virtual time) and on NATS.

* :func:`ensure_pipeline` creates a pipeline's channels and subscriptions (idempotent).
* :class:`StageWorker` / :func:`run_stage` serve a stage: receive, handle, forward (keeping
  ``event_ts``), settle, renew long leases, stop on ``eos``; cancellation-safe.
  :func:`stage_worker` wires one from a :class:`Pipeline`.
* :class:`JoinWorker` / :func:`join_worker`: a fusion stage — one part per input for each
  frame (by event id), handled once, forwarded once; optional join timeout.
* :class:`BatchWorker` / :func:`batch_worker`: a stage whose handler takes batches of up to
  ``max_items``, waiting at most ``max_wait_seconds`` for a fuller one; settled per item.
* :class:`Publisher` publishes with relative timeouts, payload bytes and idempotent retries;
  :func:`deadline_in` turns a relative timeout into the contracts' absolute deadline.
* :class:`LatencyHistogram` keeps latency statistics in constant memory.

See ``docs/pipeline.md``.
"""

from __future__ import annotations

from ._batch import BatchHandler, BatchOptions, BatchWorker, ItemResult, batch_worker
from ._errors import (
    BadHandler,
    HandlerCancelled,
    HandlerTimeout,
    PipelineError,
    PipelineStalled,
    StageStopped,
)
from ._join import JoinCounters, JoinHandler, JoinOptions, JoinWorker, join_worker
from ._policy import ExceptionPolicy, GiveUp, RetryLater
from ._publish import (
    PAYLOAD_HEADER,
    SENT_AT_HEADER,
    PublishCounters,
    Publisher,
    decode_ref,
    encode_ref,
    sent_at,
)
from ._stats import DEFAULT_PRECISION_BITS, LatencyHistogram
from ._time import deadline_in, loop_clock
from ._topology import (
    EOS_SUFFIX,
    NAME_FORBIDDEN,
    Node,
    Pipeline,
    ensure_pipeline,
    order_nodes,
    plan_pipeline,
)
from ._worker import (
    Handler,
    Observer,
    Output,
    StageCounters,
    StageOptions,
    StageWorker,
    WorkerOptions,
    run_stage,
    stage_wiring,
    stage_worker,
)

__all__ = [
    "DEFAULT_PRECISION_BITS",
    "EOS_SUFFIX",
    "NAME_FORBIDDEN",
    "PAYLOAD_HEADER",
    "SENT_AT_HEADER",
    "BadHandler",
    "BatchHandler",
    "BatchOptions",
    "BatchWorker",
    "ExceptionPolicy",
    "GiveUp",
    "Handler",
    "HandlerCancelled",
    "HandlerTimeout",
    "ItemResult",
    "JoinCounters",
    "JoinHandler",
    "JoinOptions",
    "JoinWorker",
    "LatencyHistogram",
    "Node",
    "Observer",
    "Output",
    "Pipeline",
    "PipelineError",
    "PipelineStalled",
    "PublishCounters",
    "Publisher",
    "RetryLater",
    "StageCounters",
    "StageOptions",
    "StageStopped",
    "StageWorker",
    "WorkerOptions",
    "batch_worker",
    "deadline_in",
    "decode_ref",
    "encode_ref",
    "ensure_pipeline",
    "join_worker",
    "loop_clock",
    "order_nodes",
    "plan_pipeline",
    "run_stage",
    "sent_at",
    "stage_wiring",
    "stage_worker",
]
