"""Real adapters (``adapters.nats``, ``adapters.redis``, ``adapters.etcd``) and what they share:
to reach a secured server, :class:`TLSConfig`, :class:`Credentials`, :class:`Secret`; to be
used from trio, the one bridge (:func:`bridged` with an :class:`Affinity`,
:func:`keep_plain_asyncio_loops`); to say which extra installs an engine's client,
:func:`missing_extra` and :func:`install_hint`."""

from ._extras import install_hint, missing_extra
from ._security import Credentials, Secret, TLSConfig
from ._trio_bridge import Affinity, bridged, keep_plain_asyncio_loops

__all__ = [
    "Affinity",
    "Credentials",
    "Secret",
    "TLSConfig",
    "bridged",
    "install_hint",
    "keep_plain_asyncio_loops",
    "missing_extra",
]
