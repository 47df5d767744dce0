"""Real adapters (``adapters.nats``, ``adapters.redis``, ``adapters.etcd``) and what they share
to reach a secured server: :class:`TLSConfig`, :class:`Credentials`, :class:`Secret`."""

from ._security import Credentials, Secret, TLSConfig

__all__ = ["Credentials", "Secret", "TLSConfig"]
