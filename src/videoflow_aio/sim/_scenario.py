"""One pipeline definition for production and simulation: a :class:`Scenario` is the
pipeline's :class:`~videoflow_aio.pipeline.Node` objects — the very ones production code
passes to :func:`~videoflow_aio.pipeline.ensure_pipeline` — plus what only a simulation
needs: a service-time model per stage, an arrival process per source, and per-stage
simulation settings (replicas, batching, join).

    scenario = Scenario.from_pipeline(
        NODES, service={"detect": Exp(mean_ms=20)}, arrival=Periodic(rate_hz=25)
    )
    simulate(scenario)            # or scenario.to_spec(), scenario.to_toml()
    Scenario.from_toml("spec.toml")  # a TOML spec, as `videoflow-aio simulate` reads it

The mapping between nodes and the spec's ``[[stage]]`` tables is the simulator's own
(:func:`~videoflow_aio.sim._run.pipeline_nodes`): a stage's ``ack_wait_seconds`` and
``max_deliver`` are its node's; its ``max_queue``/``overflow`` bound its input channels,
which are its inputs' ``max_msgs``/``overflow`` — so a stage's inputs must agree on them
(:meth:`Scenario.to_doc` raises SpecError naming the node otherwise, rather than simulate
other bounds than production has). Node settings the spec has no key for
(``item_credit``, ``dedup_window_seconds``, the channel settings of a node nothing reads)
are not carried into a spec.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..contracts.errors import ValidationError
from ..pipeline import Node, order_nodes
from . import _limits as L
from ._spec import parse_spec
from ._spec_files import read_capped as _read_capped
from ._spec_types import SimSpec, SpecError
from ._toml import dumps

_SPEC_MAX_DELIVER = 5  # a [[stage]]'s max_deliver when the key is absent
_SPEC_ACK_WAIT = 30.0
_SPEC_QUEUE = 10000
_SPEC_OVERFLOW = "evict_oldest"


# -- service models ------------------------------------------------------------------------


class Const(msgspec.Struct, frozen=True, kw_only=True):
    """Every service takes ``value_ms``; a batch adds ``per_item_ms`` per item."""

    value_ms: float
    per_item_ms: float = 0.0

    def table(self) -> dict[str, Any]:
        return _per_item({"dist": "constant", "value_ms": self.value_ms}, self.per_item_ms)


class Exp(msgspec.Struct, frozen=True, kw_only=True):
    """Exponential service times of mean ``mean_ms``."""

    mean_ms: float
    per_item_ms: float = 0.0

    def table(self) -> dict[str, Any]:
        return _per_item({"dist": "exponential", "mean_ms": self.mean_ms}, self.per_item_ms)


class LogNormal(msgspec.Struct, frozen=True, kw_only=True):
    """Lognormal service times with mean ``mean_ms`` and 99th percentile ``p99_ms``."""

    mean_ms: float
    p99_ms: float
    per_item_ms: float = 0.0

    def table(self) -> dict[str, Any]:
        t = {"dist": "lognormal", "mean_ms": self.mean_ms, "p99_ms": self.p99_ms}
        return _per_item(t, self.per_item_ms)


class Empirical(msgspec.Struct, frozen=True, kw_only=True):
    """Service times drawn from ``samples_ms`` and/or a ``file`` of samples (ms)."""

    samples_ms: tuple[float, ...] = ()
    file: str | None = None
    per_item_ms: float = 0.0

    def table(self) -> dict[str, Any]:
        t: dict[str, Any] = {"dist": "empirical"}
        if self.samples_ms:
            t["samples_ms"] = list(self.samples_ms)
        if self.file is not None:
            t["file"] = self.file
        return _per_item(t, self.per_item_ms)


Service = Const | Exp | LogNormal | Empirical
"""A stage's service-time model (``service = { dist = ... }``)."""


def _per_item(t: dict[str, Any], per_item_ms: float) -> dict[str, Any]:
    if per_item_ms:
        t["per_item_ms"] = per_item_ms
    return t


def _service_of(t: Mapping[str, Any]) -> Service:
    per_item = float(t.get("per_item_ms", 0.0))
    dist = t["dist"]
    if dist == "constant":
        return Const(value_ms=float(t.get("value_ms", t.get("mean_ms", 0.0))), per_item_ms=per_item)
    if dist == "exponential":
        return Exp(mean_ms=float(t["mean_ms"]), per_item_ms=per_item)
    if dist == "lognormal":
        return LogNormal(
            mean_ms=float(t["mean_ms"]), p99_ms=float(t["p99_ms"]), per_item_ms=per_item
        )
    return Empirical(
        samples_ms=tuple(float(x) for x in t.get("samples_ms", ())),
        file=t.get("file"),
        per_item_ms=per_item,
    )


# -- arrival processes ---------------------------------------------------------------------


class Periodic(msgspec.Struct, frozen=True, kw_only=True):
    """``streams`` streams, each sending one frame of ``bytes`` every ``1/rate_hz`` s
    (``jitter_ms``: each send moved by up to that much). ``extra``: further
    ``[[source]]`` keys, written as given."""

    rate_hz: float
    streams: int = 1
    bytes: int = 0
    jitter_ms: float = 0.0
    extra: dict[str, Any] = {}

    def table(self) -> dict[str, Any]:
        t = _common(self.streams, self.bytes, {"rate_hz": self.rate_hz})
        if self.jitter_ms:
            t["jitter_ms"] = self.jitter_ms
        return {**t, **self.extra}


class Poisson(msgspec.Struct, frozen=True, kw_only=True):
    """``streams`` independent Poisson streams of ``rate_hz`` frames per second each."""

    rate_hz: float
    streams: int = 1
    bytes: int = 0
    extra: dict[str, Any] = {}

    def table(self) -> dict[str, Any]:
        t = _common(self.streams, self.bytes, {"rate_hz": self.rate_hz, "arrival": "poisson"})
        return {**t, **self.extra}


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """A piecewise-constant rate: ``steps`` = ``((t0, rate0), (t1, rate1), …)``, seconds
    from the run's start and frames per second per stream (``rate_schedule``)."""

    steps: tuple[tuple[float, float], ...]
    process: Literal["periodic", "poisson"] = "periodic"
    streams: int = 1
    bytes: int = 0
    extra: dict[str, Any] = {}

    def table(self) -> dict[str, Any]:
        t: dict[str, Any] = {"rate_schedule": [[a, r] for a, r in self.steps]}
        if self.process != "periodic":
            t["arrival"] = self.process
        return {**_common(self.streams, self.bytes, t), **self.extra}


class Trace(msgspec.Struct, frozen=True, kw_only=True):
    """Frames at the times (seconds from the run's start) listed in ``file``."""

    file: str
    bytes: int = 0
    extra: dict[str, Any] = {}

    def table(self) -> dict[str, Any]:
        return {**_common(1, self.bytes, {"arrival": "trace", "trace": self.file}), **self.extra}


Arrival = Periodic | Poisson | Schedule | Trace
"""A source's arrival process (its ``[[source]]`` keys)."""


def _common(streams: int, nbytes: int, t: dict[str, Any]) -> dict[str, Any]:
    if streams != 1:
        t["streams"] = streams
    if nbytes:
        t["bytes"] = nbytes
    return t


def _arrival_of(t: Mapping[str, Any]) -> Arrival:
    streams = int(t.get("streams", 1))
    nbytes = int(t.get("bytes", 0))
    kind = t.get("arrival", "periodic")

    def rest(*used: str) -> dict[str, Any]:
        return {k: v for k, v in t.items() if k not in ("name", "streams", "bytes", *used)}

    if kind == "trace":
        return Trace(file=str(t["trace"]), bytes=nbytes, extra=rest("arrival", "trace"))
    if "rate_schedule" in t:
        steps = tuple((float(a), float(r)) for a, r in t["rate_schedule"])
        extra = rest("arrival", "rate_schedule")
        return Schedule(steps=steps, process=kind, streams=streams, bytes=nbytes, extra=extra)
    rate = float(t["rate_hz"])
    if kind == "poisson":
        return Poisson(
            rate_hz=rate, streams=streams, bytes=nbytes, extra=rest("arrival", "rate_hz")
        )
    jitter = float(t.get("jitter_ms", 0.0))
    extra = rest("arrival", "rate_hz", "jitter_ms")
    return Periodic(rate_hz=rate, streams=streams, bytes=nbytes, jitter_ms=jitter, extra=extra)


# -- stage settings ------------------------------------------------------------------------


class Batch(msgspec.Struct, frozen=True, kw_only=True):
    """Batched service: up to ``max_items`` per batch, waiting at most ``max_wait_ms``
    after the first for a fuller one (as the toolkit's
    :class:`~videoflow_aio.pipeline.BatchWorker` does)."""

    max_items: int
    max_wait_ms: float = 0.0


class Stage(msgspec.Struct, frozen=True, kw_only=True):
    """A stage's simulation settings: ``replicas``; ``batch`` (an int: messages per
    receive, each served alone; a :class:`Batch`: batched service); ``join = "all"`` (the
    toolkit's :class:`~videoflow_aio.pipeline.JoinWorker`) and ``join_timeout_ms``;
    ``extra``: further ``[[stage]]`` keys, written as given."""

    replicas: int = 1
    batch: int | Batch = 1
    join: str | None = None
    join_timeout_ms: float | None = None
    extra: dict[str, Any] = {}

    def table(self) -> dict[str, Any]:
        t: dict[str, Any] = {}
        if self.replicas != 1:
            t["replicas"] = self.replicas
        if isinstance(self.batch, Batch):
            t["batch"] = {"max_items": self.batch.max_items, "max_wait_ms": self.batch.max_wait_ms}
        elif self.batch != 1:
            t["batch"] = self.batch
        if self.join is not None:
            t["join"] = self.join
        if self.join_timeout_ms is not None:
            t["join_timeout_ms"] = self.join_timeout_ms
        return {**t, **self.extra}

    @classmethod
    def of_worker(cls, worker: object, **extra: Any) -> Stage:
        """The settings of a running toolkit worker: its replicas per input, a
        :class:`~videoflow_aio.pipeline.BatchWorker`'s batching, a
        :class:`~videoflow_aio.pipeline.JoinWorker`'s join and timeout."""
        from ..pipeline import BatchWorker, JoinWorker, StageWorker

        if not isinstance(worker, StageWorker):
            raise ValidationError("worker must be a StageWorker", field="worker", value=worker)
        batch: int | Batch = worker.batch
        if isinstance(worker, BatchWorker):
            batch = Batch(max_items=worker.batch, max_wait_ms=worker.max_wait * 1000.0)
        join = timeout = None
        if isinstance(worker, JoinWorker):
            join = "all"
            if worker.join_timeout is not None:
                timeout = worker.join_timeout * 1000.0
        return cls(
            replicas=worker.replicas, batch=batch, join=join, join_timeout_ms=timeout, extra=extra
        )


_STAGE_KEYS = (
    "name",
    "inputs",
    "service",
    "replicas",
    "batch",
    "join",
    "join_timeout_ms",
    "ack_wait_seconds",
    "max_deliver",
    "max_queue",
    "overflow",
)


def _stage_of(t: Mapping[str, Any]) -> Stage:
    raw = t.get("batch", 1)
    batch = Batch(**raw) if isinstance(raw, Mapping) else int(raw)
    timeout = t.get("join_timeout_ms")
    return Stage(
        replicas=int(t.get("replicas", 1)),
        batch=batch,
        join=t.get("join"),
        join_timeout_ms=None if timeout is None else float(timeout),
        extra={k: v for k, v in t.items() if k not in _STAGE_KEYS},
    )


# -- the scenario --------------------------------------------------------------------------


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """A pipeline's nodes with a service model per stage and an arrival process per
    source; see the module docstring. Build one with :meth:`from_pipeline` or
    :meth:`from_toml`; :meth:`to_spec` validates it as the simulator does."""

    nodes: tuple[Node, ...]
    service: dict[str, Service]
    arrival: dict[str, Arrival]
    stages: dict[str, Stage] = {}
    run: dict[str, Any] = {}
    extra: dict[str, Any] = {}

    @classmethod
    def from_pipeline(
        cls,
        nodes: Sequence[Node],
        *,
        service: Mapping[str, Service],
        arrival: Arrival | Mapping[str, Arrival],
        stages: Mapping[str, Stage] | None = None,
        duration_seconds: float = 60.0,
        seed: int = 0,
        run: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Scenario:
        """A scenario of ``nodes`` (as given to ``ensure_pipeline``): ``service`` per
        stage, ``arrival`` per source (one arrival: every source), ``stages`` settings
        per stage (default: one replica, no batching), ``run`` further ``[run]`` keys,
        ``extra`` further top-level tables (``fault``, ``failure``, ``node``, ``gpu``,
        ``payload``). SpecError naming the key for a stage without a service model, a
        source without an arrival, or a name that is not a node of that kind."""
        try:
            ordered = order_nodes(list(nodes))
        except ValidationError as exc:
            raise SpecError(f"nodes: {exc}", field="nodes", value=None) from None
        sources = [n.name for n in ordered if not n.inputs]
        stage_names = [n.name for n in ordered if n.inputs]
        if not isinstance(arrival, Mapping):
            arrival = dict.fromkeys(sources, arrival)
        stages = dict(stages or {})
        for key, given, names, need in (
            ("service", service, stage_names, True),
            ("arrival", arrival, sources, True),
            ("stages", stages, stage_names, False),
        ):
            for name in given:
                if name not in names:
                    kind = "stage" if names is stage_names else "source"
                    raise SpecError(
                        f"{key}.{name}: no {kind} {name!r} in the pipeline",
                        field=f"{key}.{name}",
                        value=name,
                    )
            for name in names if need else ():
                if name not in given:
                    raise SpecError(f"{key}.{name}: is required", field=f"{key}.{name}")
        return cls(
            nodes=ordered,
            service=dict(service),
            arrival=dict(arrival),
            stages={name: stages.get(name, Stage()) for name in stage_names},
            run={"duration_seconds": duration_seconds, "seed": seed, **(run or {})},
            extra=dict(extra or {}),
        )

    # -- to a spec -------------------------------------------------------------------------
    def to_doc(self) -> dict[str, Any]:
        """The spec document (what ``tomllib`` gives for :meth:`to_toml`'s text)."""
        by_name = {n.name: n for n in self.nodes}
        sources = [
            {"name": n.name, **self.arrival[n.name].table()} for n in self.nodes if not n.inputs
        ]
        stages = []
        for n in self.nodes:
            if not n.inputs:
                continue
            t: dict[str, Any] = {"name": n.name, "inputs": list(n.inputs)}
            t["service"] = self.service[n.name].table()
            t.update(self.stages.get(n.name, Stage()).table())
            if n.ack_wait_seconds != _SPEC_ACK_WAIT:
                t["ack_wait_seconds"] = n.ack_wait_seconds
            if n.max_deliver != _SPEC_MAX_DELIVER:
                t["max_deliver"] = n.max_deliver
            feeds = [by_name[i] for i in n.inputs]
            queue, overflow = feeds[0].max_msgs, feeds[0].overflow
            for f in feeds[1:]:
                if (f.max_msgs, f.overflow) != (queue, overflow):
                    raise SpecError(
                        f"nodes.{f.name}: a spec bounds a stage's inputs together (max_queue, "
                        f"overflow), and {n.name!r} reads {feeds[0].name!r} ({queue}, "
                        f"{overflow}) and {f.name!r} ({f.max_msgs}, {f.overflow}): give its "
                        "inputs the same max_msgs and overflow",
                        field=f"nodes.{f.name}",
                        value=None,
                    )
            if queue != _SPEC_QUEUE:
                t["max_queue"] = queue
            if overflow != _SPEC_OVERFLOW:
                t["overflow"] = overflow
            stages.append(t)
        return {"run": dict(self.run), "source": sources, "stage": stages, **self.extra}

    def to_toml(self) -> str:
        """The scenario as a TOML spec that ``videoflow-aio simulate`` reads."""
        return dumps(self.to_doc())

    def to_spec(self) -> SimSpec:
        """The validated spec (SpecError naming the key for a value the simulator refuses)."""
        return parse_spec(self.to_doc())

    # -- from a spec -----------------------------------------------------------------------
    @classmethod
    def from_toml(cls, source: str | Path) -> Scenario:
        """The scenario of a TOML spec: a :class:`~pathlib.Path` (or a string naming a
        ``.toml`` file) is read — bounded in size — relative sample files resolved beside
        it; any other string is the TOML text. Validated as ``load_spec`` validates."""
        base: Path | None = None
        if isinstance(source, Path) or (
            isinstance(source, str) and "\n" not in source and source.strip().endswith(".toml")
        ):
            p = Path(source)
            data = _read_capped(p, L.MAX_SPEC_FILE_BYTES)
            if isinstance(data, str):
                raise SpecError(data, field="path", value=str(p))
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise SpecError(f"{p}: not UTF-8 text", field="toml", value=str(p)) from None
            base = p.parent
        elif isinstance(source, str):
            if len(source) > L.MAX_SPEC_FILE_BYTES:
                raise SpecError(
                    f"spec text longer than {L.MAX_SPEC_FILE_BYTES:,} characters",
                    field="toml",
                    value=len(source),
                )
            text = source
        else:
            raise SpecError(
                "a TOML spec is a path or its text", field="toml", value=type(source).__name__
            )
        try:
            doc = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            why = exc if isinstance(exc, tomllib.TOMLDecodeError) else "nested too deeply"
            raise SpecError(f"not valid TOML: {why}", field="toml", value=None) from None
        parse_spec(doc, base=base)  # every key checked before anything is built
        return cls.from_doc(doc)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Scenario:
        """The scenario of a spec document that :func:`parse_spec` accepts."""
        sources = list(doc.get("source", []))
        stages = list(doc.get("stage", []))
        readers: dict[str, list[Mapping[str, Any]]] = {}
        for st in stages:
            for i in st["inputs"]:
                readers.setdefault(i, []).append(st)

        def node(t: Mapping[str, Any], inputs: tuple[str, ...]) -> Node:
            kw: dict[str, Any] = {}
            rs = readers.get(t["name"], [])
            if rs:
                kw["max_msgs"] = min(int(r.get("max_queue", _SPEC_QUEUE)) for r in rs)
                kw["overflow"] = rs[0].get("overflow", _SPEC_OVERFLOW)
            if inputs:
                kw["ack_wait_seconds"] = float(t.get("ack_wait_seconds", _SPEC_ACK_WAIT))
                kw["max_deliver"] = int(t.get("max_deliver", _SPEC_MAX_DELIVER))
            return Node(name=t["name"], inputs=inputs, **kw)

        nodes = [node(s, ()) for s in sources] + [node(s, tuple(s["inputs"])) for s in stages]
        rest = {k: v for k, v in doc.items() if k not in ("run", "source", "stage")}
        return cls(
            nodes=order_nodes(nodes),
            service={s["name"]: _service_of(s["service"]) for s in stages},
            arrival={s["name"]: _arrival_of(s) for s in sources},
            stages={s["name"]: _stage_of(s) for s in stages},
            run=dict(doc.get("run", {})),
            extra=rest,
        )


__all__ = [
    "Arrival",
    "Batch",
    "Const",
    "Empirical",
    "Exp",
    "LogNormal",
    "Periodic",
    "Poisson",
    "Scenario",
    "Schedule",
    "Service",
    "Stage",
    "Trace",
]
