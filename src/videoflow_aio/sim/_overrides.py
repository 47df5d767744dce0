"""``--set KEY=VALUE``: change any spec key by dotted path, then validate the whole spec again.

Paths follow the TOML: ``run.duration_seconds``, ``payload.tier``, ``gpu.authority``; array
tables are addressed by name — ``stage.detect.replicas``, ``source.cams.rate_hz``,
``stage.detect.service.mean_ms``, ``node.gpu-0.gpus`` — and faults (which have no name) by
position, ``fault.0.at_seconds``. A value is read as a TOML value (``10``, ``1.5``,
``"trio"``, ``true``, ``["a", "b"]``); a bare word that is not TOML is taken as a string
(``run.backend=trio``).

Overrides apply to a validated :class:`SimSpec` (turned back into the document it came from,
changed, and parsed again), so every check of the spec applies to the result; a bad path or
value is a :class:`SpecError` naming the override.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterable
from typing import Any

import msgspec

from ._spec import parse_spec
from ._spec_input import FAULT_KEYS as _FAULT_KEYS
from ._spec_types import SimSpec, SpecError

_ARRAYS = {
    "source": "sources",
    "stage": "stages",
    "node": "nodes",
    "fault": "faults",
    "failure": "failures",
}
_TABLES = ("run", "payload", "gpu")


def _clean(value: Any) -> Any:
    """``value`` without None entries (a None key is an absent key in TOML)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _service_doc(service: dict[str, Any]) -> dict[str, Any]:
    out = _dist_doc(service)
    if service.get("per_item_ms"):
        out["per_item_ms"] = service["per_item_ms"]
    return out


def _source_doc(src: dict[str, Any]) -> dict[str, Any]:
    """A source's table: the keys its arrival takes (a trace inlined as trace_seconds)."""
    src.pop("mean_rate_hz", None)
    src.pop("trace", None)
    if src.get("arrival") == "trace":
        for key in ("rate_hz", "rate_schedule", "jitter_ms"):
            src.pop(key, None)
    else:
        src.pop("trace_seconds", None)
        if src.get("rate_schedule"):
            src.pop("rate_hz", None)
        else:
            src.pop("rate_schedule", None)
        if not src.get("jitter_ms"):
            src.pop("jitter_ms", None)
    return src


def _stage_doc(st: dict[str, Any]) -> dict[str, Any]:
    st["service"] = _service_doc(st["service"])
    batch = st.pop("batch_service", None)
    if batch is not None:
        st["batch"] = batch
    return st


def _dist_doc(service: dict[str, Any]) -> dict[str, Any]:
    dist = service["dist"]
    if dist == "constant":
        return {"dist": dist, "value_ms": service["value_ms"]}
    if dist == "exponential":
        return {"dist": dist, "mean_ms": service["mean_ms"]}
    if dist == "lognormal":
        return {"dist": dist, "mean_ms": service["mean_ms"], "p99_ms": service["p99_ms"]}
    return {"dist": dist, "samples_ms": list(service["samples_ms"])}  # samples already read


def to_doc(spec: SimSpec) -> dict[str, Any]:
    """The TOML document (as decoded by ``tomllib``) that ``parse_spec`` turns into ``spec``
    again: ``parse_spec(to_doc(spec)) == spec`` (an empirical service's file is inlined)."""
    raw = _clean(msgspec.to_builtins(spec))
    doc: dict[str, Any] = {t: raw[t] for t in _TABLES}
    for single, plural in _ARRAYS.items():
        items = raw.get(plural, [])
        if single == "stage":
            items = [_stage_doc(st) for st in items]
        if single == "source":
            items = [_source_doc(src) for src in items]
        if single == "fault":
            items = [
                {k: v for k, v in f.items() if k in ("at_seconds", "kind", *_FAULT_KEYS[f["kind"]])}
                for f in items
            ]
        if items:
            doc[single] = items
    return doc


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML (``10``, ``2.5``, ``"x"``, ``true``, ``[1, 2]``), else the
    text itself as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_set(text: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` as ``(KEY, value)``; SpecError when there is no ``=`` or no key."""
    if not isinstance(text, str):
        raise TypeError(f"--set must be a str KEY=VALUE, not {text!r:.80}")
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(f"--set {text!r}: expected KEY=VALUE", field="--set", value=text)
    return key, parse_value(value.strip())


def _locate(doc: dict[str, Any], key: str) -> tuple[dict[str, Any], str, str]:
    """The table holding ``key``'s last part, that part, and the key's canonical path
    (``stage[1].service.mean_ms``, as SpecError fields name it)."""
    parts = key.split(".")
    if any(not p for p in parts) or len(parts) < 2:
        raise _bad(key, "expected a dotted path such as stage.detect.replicas")
    head, rest = parts[0], parts[1:]
    table: Any
    if head in _TABLES:
        table = doc.setdefault(head, {})
        canon = head
    elif head in _ARRAYS:
        items = doc.get(head, [])
        name = rest[0]
        if len(rest) < 2:
            raise _bad(key, f"expected {head}.NAME.KEY")
        index = next((i for i, t in enumerate(items) if t.get("name") == name), None)
        if index is None and name.isdigit() and int(name) < len(items):
            index = int(name)
        if index is None:
            known = ", ".join(str(t.get("name", i)) for i, t in enumerate(items)) or "none"
            raise _bad(key, f"no {head} named {name!r} (known: {known})")
        table = items[index]
        canon = f"{head}[{index}]"
        rest = rest[1:]
    else:
        raise _bad(
            key, f"unknown table {head!r}; expected one of {', '.join((*_TABLES, *_ARRAYS))}"
        )
    for part in rest[:-1]:
        nxt = table.get(part)
        if not isinstance(nxt, dict):
            raise _bad(key, f"{canon}.{part} is not a table")
        table = nxt
        canon = f"{canon}.{part}"
    return table, rest[-1], f"{canon}.{rest[-1]}"


def _bad(key: str, message: str) -> SpecError:
    return SpecError(f"--set {key}: {message}", field=key, value=None)


def apply_overrides(spec: SimSpec, overrides: Iterable[tuple[str, Any]]) -> SimSpec:
    """``spec`` with each ``(dotted key, value)`` applied in order and validated again.

    A bad path, or a value the spec's checks refuse, is a SpecError whose message starts
    ``--set KEY=VALUE:`` (the checks' own reason follows); ``spec`` is unchanged."""
    pairs = list(overrides)
    if not pairs:
        return spec
    doc = copy.deepcopy(to_doc(spec))
    canon: dict[str, tuple[str, Any]] = {}
    for key, value in pairs:
        table, last, path = _locate(doc, key)
        table[last] = value
        canon[path] = (key, value)
    try:
        return parse_spec(doc)
    except SpecError as exc:
        field = exc.field or ""
        for path, (key, value) in canon.items():
            if field == path or field.startswith(path + ".") or field.startswith(path + "["):
                raise SpecError(
                    f"--set {key}={_show(value)}: {exc.message}", field=key, value=value
                ) from None
        raise SpecError(
            f"with --set {_sets(pairs)}: {exc.message}", field=field, value=None
        ) from None


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _sets(pairs: list[tuple[str, Any]]) -> str:
    return " ".join(f"{k}={_show(v)}" for k, v in pairs)


__all__ = ["apply_overrides", "parse_set", "parse_value", "to_doc"]
