"""The simulation spec's upper bounds, by name: what a spec may ask for before the simulator
would exhaust memory or run for days. A value past one is a :class:`SpecError` naming the key
and the bound, never an ``OverflowError`` or ``MemoryError`` halfway through a run."""

from __future__ import annotations

MAX_SPEC_FILE_BYTES = 16 << 20
"""The largest spec file read (16 MiB): a spec is a page of TOML, not a data set."""
MAX_SAMPLE_FILE_BYTES = 64 << 20
"""The largest empirical sample file read (64 MiB); it is read in chunks, never past this."""
MAX_TRACE_FILE_BYTES = 64 << 20
"""The largest arrival trace file read (``arrival = "trace"``, 64 MiB), in chunks."""
MAX_TRACE_FRAMES = 10_000_000
"""The most timestamps an arrival trace may hold."""
MAX_BURST_SWITCHES = 10_000_000
"""The most on/off switches a source's ``burst`` may make over a run (by its means)."""
MAX_SCHEDULE_STEPS = 100_000
"""The most steps of a source's ``rate_schedule``."""
MAX_SLO_TARGETS = 100
"""The most latency targets ``run.slo_ms`` (and ``--slo``) may name."""
MAX_SAMPLES = 1_000_000
"""The most samples an empirical distribution may hold (file and ``samples_ms`` together)."""
MAX_TOML_DEPTH = 64
"""Deepest nesting of tables and arrays accepted in a spec (``parse_spec`` on a document)."""
MAX_NAME_CHARS = 200
"""The longest node name (it becomes part of channel and subscription names)."""
MAX_NODES = 1_000
"""The most ``[[source]]`` plus ``[[stage]]`` (and, separately, ``[[node]]``) tables."""
MAX_FAILURE_EVENTS = 10_000_000
"""The most failures and repairs all of one ``[[failure]]``'s processes may make over a
run (by their means)."""
MAX_FAULTS = 1_000
"""The most ``[[fault]]`` tables (each one is a timer and a row of the fault table)."""
MAX_REPLICAS = 10_000
"""The most replicas (worker tasks) of one stage."""
MAX_BATCH = 100_000
"""The largest ``batch`` of one receive."""
MAX_STREAMS = 1_000_000
"""The most streams of one source."""
MAX_FRAME_BYTES = 1 << 30
"""The largest ``bytes`` of a source's frames or a stage's ``output_bytes`` (1 GiB): the
simulator allocates one zero-filled buffer per distinct size and shares it."""
MAX_COUNT = 10**9
"""Bound of any other integer count (``max_queue``, ``max_deliver``, a fault's ``count``,
``gpus``, MIG instance counts, ``payload.max_bytes`` is a byte size: see
:data:`MAX_PAYLOAD_BYTES`)."""
MAX_PAYLOAD_BYTES = 1 << 50
"""The largest ``payload.max_bytes`` (a capacity, never allocated)."""
MAX_SEED = 2**63 - 1
"""Seeds are 64-bit signed integers."""
MAX_SECONDS = 1e9
"""Bound of any duration or instant in seconds (about 31.7 years)."""
MAX_MS = MAX_SECONDS * 1000.0
"""Bound of a service time in milliseconds (``mean_ms``, ``p99_ms``, ``value_ms``, samples)."""
MAX_FACTOR = 1e6
"""The largest ``slow_stage`` factor."""
MAX_MEMORY_GIB = 1e6
"""The largest ``memory_gib`` of a node."""

__all__ = [
    "MAX_BATCH",
    "MAX_BURST_SWITCHES",
    "MAX_COUNT",
    "MAX_FACTOR",
    "MAX_FAILURE_EVENTS",
    "MAX_FAULTS",
    "MAX_FRAME_BYTES",
    "MAX_MEMORY_GIB",
    "MAX_MS",
    "MAX_NAME_CHARS",
    "MAX_NODES",
    "MAX_PAYLOAD_BYTES",
    "MAX_REPLICAS",
    "MAX_SAMPLES",
    "MAX_SAMPLE_FILE_BYTES",
    "MAX_SCHEDULE_STEPS",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_SLO_TARGETS",
    "MAX_SPEC_FILE_BYTES",
    "MAX_STREAMS",
    "MAX_TOML_DEPTH",
    "MAX_TRACE_FILE_BYTES",
    "MAX_TRACE_FRAMES",
]
