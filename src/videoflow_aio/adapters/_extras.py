"""The optional dependencies of the adapters, and the extra that installs each.

``pip install videoflow-aio`` brings the contracts, the models and the file store; each real
engine's client comes with an extra. A missing one is named with the command that installs it,
never left as a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib

EXTRAS: dict[str, tuple[str, ...]] = {
    "nats": ("nats",),
    "redis": ("redis",),
    "etcd": ("aetcd", "grpc"),
}
"""extra -> the top-level modules it provides that the adapters import."""
_DISTRIBUTIONS = {"nats": "nats-py", "redis": "redis", "aetcd": "aetcd", "grpc": "grpcio"}


def install_hint(extra: str) -> str:
    """The line that installs the ``extra`` adapters' client libraries."""
    return f"install it with pip install 'videoflow-aio[{extra}]'"


def missing_extra(extra: str) -> str | None:
    """Why the ``extra`` adapters cannot be imported here (with the command that fixes it),
    or None when they can."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            dist = _DISTRIBUTIONS.get(module, module)
            return f"{dist} is not installed ({exc}); {install_hint(extra)}"
    return None


def explain(extra: str, exc: ModuleNotFoundError) -> None:
    """Raise a ModuleNotFoundError naming the extra when ``exc`` is one of its modules
    missing; return (the caller re-raises ``exc``) when it is anything else.

    An extra not listed in :data:`EXTRAS` (an adapter added since) claims every missing module
    outside this library: its adapter package needs no line here.
    """
    top = (exc.name or "").partition(".")[0]
    modules = EXTRAS.get(extra)
    if top and (top in modules if modules is not None else top != "videoflow_aio"):
        dist = _DISTRIBUTIONS.get(top, top)
        raise ModuleNotFoundError(
            f"videoflow_aio.adapters.{extra} needs {dist}: {install_hint(extra)}", name=exc.name
        ) from exc
