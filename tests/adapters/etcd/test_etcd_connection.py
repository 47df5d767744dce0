"""``EtcdConnection``: one definition of endpoints, credentials, TLS and the RPC deadline."""

from __future__ import annotations

import pytest

from videoflow_aio.adapters import Secret, TLSConfig
from videoflow_aio.adapters.etcd import EtcdConnection, EtcdRuntimeStore
from videoflow_aio.contracts.errors import ValidationError


def test_a_url_and_keywords_make_the_connection_a_store_opens() -> None:
    store = EtcdRuntimeStore("https://127.0.0.1:1", username="u", password="pw", timeout=2.0)
    conn = store.connection
    assert (conn.url, conn.username, conn.timeout) == ("https://127.0.0.1:1", "u", 2.0)
    assert isinstance(conn.tls, TLSConfig) and "pw" not in repr(conn)
    assert store.endpoints == ["127.0.0.1:1"]


def test_one_connection_serves_several_stores_each_with_its_channels() -> None:
    conn = EtcdConnection(endpoints=["http://127.0.0.1:1", "http://127.0.0.1:2"])
    a, b = EtcdRuntimeStore(conn, namespace="a"), EtcdRuntimeStore(conn, namespace="b")
    assert a.connection is conn is b.connection
    assert a.endpoints == b.endpoints == ["127.0.0.1:1", "127.0.0.1:2"]
    assert a._endpoints is not b._endpoints


def test_settings_are_checked_once_with_typed_errors() -> None:
    with pytest.raises(ValidationError, match="both username and password"):
        EtcdConnection(username="u")
    with pytest.raises(ValidationError, match="not in the URL"):
        EtcdConnection("http://u:p@127.0.0.1:1")
    with pytest.raises(TypeError, match="passwd"):
        EtcdConnection(passwd="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="set on the EtcdConnection"):
        EtcdRuntimeStore(EtcdConnection(), password=Secret("x"))
