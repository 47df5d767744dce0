"""``EtcdConnection``: how an etcd store reaches the cluster, and as whom — defined once.

An :class:`EtcdConnection` holds the endpoints (one URL, several comma-separated, or
``endpoints=``), TLS, the user and password (:class:`EtcdOptions`) and the RPC deadline,
checked once. :class:`~videoflow_aio.adapters.etcd.EtcdRuntimeStore` takes one in place of a
URL (a URL and the keywords still make one)::

    conn = EtcdConnection("https://e1:2379,https://e2:2379", username="app", password=secret)
    store = EtcdRuntimeStore(conn, namespace="vf")

Each store opens its own gRPC channels from it (``_endpoints.Endpoints``), owns the RPC tasks
in flight (``adapters._tasks``) and maps gRPC's errors through one table
(``EtcdRuntimeStore._errors``, ``adapters._errors.map_exceptions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict, Unpack

from ...contracts.errors import ValidationError
from .._options import check_known
from .._security import Credentials, Secret, TLSConfig, as_secret, split_url
from ._endpoints import Endpoints, parse_endpoints

DEFAULT_URL = "http://127.0.0.1:2379"


class EtcdOptions(TypedDict, total=False):
    """The connection keywords of an etcd store: ``timeout`` (5.0 s, every RPC's deadline),
    ``tls`` (a :class:`TLSConfig`: CA, client certificate for mTLS; ``https://`` implies the
    system's trust store), ``username`` / ``password`` (etcd's auth; both or neither) and
    ``endpoints`` (the cluster's members, ``http://host:port``, besides or instead of the
    URL's)."""

    timeout: float
    tls: TLSConfig | None
    username: str | None
    password: str | Secret | None
    endpoints: Sequence[str] | None


class EtcdConnection:
    """How to reach an etcd cluster and as whom (see the module docstring)."""

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[EtcdOptions]) -> None:
        check_known(options, EtcdOptions.__annotations__)
        tls, username, password = (
            options.get("tls"),
            options.get("username"),
            options.get("password"),
        )
        url, url_user, url_password = split_url(url)
        if url_user is not None or url_password is not None:
            raise ValidationError(
                "etcd credentials go in username=/password=, not in the URL", field="url"
            )
        scheme = url.split("://", 1)[0].lower() if "://" in url else "http"
        if tls is not None and not isinstance(tls, TLSConfig):
            raise ValidationError(
                "etcd takes a TLSConfig (gRPC needs the PEM files, not an ssl.SSLContext)",
                field="tls",
                value=type(tls).__name__,
            )
        if tls is None and scheme == "https":
            tls = TLSConfig()  # the system's trust store
        if (username is None) != (password is None):
            raise ValidationError(
                "etcd authentication takes both username and password (or neither: no auth, "
                "or the client certificate's common name under --client-cert-auth)",
                field="username" if username is None else "password",
            )
        self.url = url
        self.username = username
        self.tls = tls
        self.credentials = Credentials(username=username, password=as_secret(password, "password"))
        self.timeout = float(options.get("timeout", 5.0))
        self.hosts = parse_endpoints(url, options.get("endpoints"))

    def open(self) -> Endpoints:
        """The gRPC channels of one store (one per endpoint, connected on first use)."""
        return Endpoints(self.hosts, self.timeout, tls=self.tls, credentials=self.credentials)

    def __repr__(self) -> str:
        return f"EtcdConnection({self.url!r})"


__all__ = ["EtcdConnection", "EtcdOptions"]
