"""Setting up etcd authentication through the client API (no ``etcdctl``), asyncio only.

- :func:`enable_auth` creates ``root`` with the ``root`` role and turns authentication on
  (what ``etcdctl user add root`` + ``etcdctl auth enable`` do).
- :func:`grant_prefix` creates a user whose only role may read and write the keys of one
  :class:`~videoflow_aio.adapters.etcd.EtcdRuntimeStore` namespace (``<namespace>/`` and
  below): the least-privilege role for the adapter. ``password=None`` makes a user without
  password, for ``--client-cert-auth`` where etcd takes the user from the client
  certificate's common name.
- :func:`revoke_prefix` takes that permission away again (an ACL changed under a running
  adapter).

Each call opens its own channel as ``root`` and closes it; errors are the adapter's
(``AuthenticationFailed``, ``AccessDenied``, ``BackendUnavailable``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from ...contracts.errors import BackendUnavailable
from .._security import Credentials, Secret, TLSConfig, as_secret
from ._channel import EtcdChannel, classify

ROOT = "root"


def prefix_range(namespace: str) -> tuple[bytes, bytes]:
    """The key range ``[key, range_end)`` of an adapter namespace (``<namespace>/…``)."""
    start = namespace.encode() + b"/"
    return start, start[:-1] + b"0"  # '/' + 1 == '0'


@asynccontextmanager
async def _session(
    url: str, tls: TLSConfig | None, root_password: str | Secret | None, rpc_timeout: float
) -> AsyncIterator[EtcdChannel]:
    target = url.split("//", 1)[-1].rstrip("/")
    creds = Credentials(
        username=ROOT if root_password is not None else None,
        password=as_secret(root_password, "root_password"),
    )
    ch = EtcdChannel(target, tls=tls, credentials=creds, timeout=rpc_timeout)
    try:
        await ch.connect()
        yield ch
    finally:
        await ch.close()


async def _auth(ch: EtcdChannel, what: str, method: str, request: Any, *, exists_ok: bool) -> None:
    try:
        await ch.call(
            lambda: getattr(ch.authstub, method)(request, timeout=ch.timeout, metadata=ch.metadata)
        )
    except grpc.aio.AioRpcError as exc:
        details = exc.details() or ""
        if exists_ok and "already exists" in details:
            return
        typed = classify(exc, what, tls=ch.tls is not None)
        if typed is not None:
            raise typed from exc
        raise BackendUnavailable(f"etcd {what} failed: {details}", backend="etcd") from exc


async def _role(ch: EtcdChannel, user: str, role: str, perm: Any = None) -> None:
    """Create ``role`` (with ``perm``, when given) and grant it to ``user``."""
    await _auth(ch, "role add", "RoleAdd", rpc.AuthRoleAddRequest(name=role), exists_ok=True)
    if perm is not None:
        grant = rpc.AuthRoleGrantPermissionRequest(name=role, perm=perm)
        await _auth(ch, "grant permission", "RoleGrantPermission", grant, exists_ok=False)
    request = rpc.AuthUserGrantRoleRequest(user=user, role=role)
    await _auth(ch, "grant role", "UserGrantRole", request, exists_ok=True)


async def enable_auth(
    url: str,
    *,
    root_password: str | Secret,
    tls: TLSConfig | None = None,
    rpc_timeout: float = 5.0,
) -> None:
    """Create ``root`` (role ``root``) and enable authentication on a server without it."""
    pw = as_secret(root_password, "root_password")
    assert pw is not None
    async with _session(url, tls, None, rpc_timeout) as ch:
        await _auth(
            ch,
            "user add",
            "UserAdd",
            rpc.AuthUserAddRequest(name=ROOT, password=pw.reveal()),
            exists_ok=True,
        )
        await _role(ch, ROOT, ROOT)
        await _auth(ch, "auth enable", "AuthEnable", rpc.AuthEnableRequest(), exists_ok=False)


async def grant_prefix(
    url: str,
    *,
    username: str,
    password: str | Secret | None,
    namespace: str,
    root_password: str | Secret,
    tls: TLSConfig | None = None,
    rpc_timeout: float = 5.0,
) -> str:
    """Create ``username`` with a role (named ``<username>-<namespace>``, returned) that may
    read and write ``<namespace>/…`` and nothing else."""
    role = f"{username}-{namespace}"
    start, end = prefix_range(namespace)
    pw = as_secret(password, "password")
    async with _session(url, tls, root_password, rpc_timeout) as ch:
        if pw is None:
            options = rpc.UserAddOptions(no_password=True)
            add = rpc.AuthUserAddRequest(name=username, options=options)
        else:
            add = rpc.AuthUserAddRequest(name=username, password=pw.reveal())
        await _auth(ch, "user add", "UserAdd", add, exists_ok=True)
        perm = rpc.Permission(permType=rpc.Permission.READWRITE, key=start, range_end=end)
        await _role(ch, username, role, perm)
    return role


async def revoke_prefix(
    url: str,
    *,
    role: str,
    namespace: str,
    root_password: str | Secret,
    tls: TLSConfig | None = None,
    rpc_timeout: float = 5.0,
) -> None:
    """Take ``role``'s permission on ``<namespace>/…`` away (its users keep their tokens)."""
    start, end = prefix_range(namespace)
    async with _session(url, tls, root_password, rpc_timeout) as ch:
        await _auth(
            ch,
            "revoke permission",
            "RoleRevokePermission",
            rpc.AuthRoleRevokePermissionRequest(role=role, key=start, range_end=end),
            exists_ok=False,
        )


__all__ = ["ROOT", "enable_auth", "grant_prefix", "prefix_range", "revoke_prefix"]
