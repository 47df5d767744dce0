"""``RedisConnection``: one definition of the URL, credentials, TLS and connection keywords."""

from __future__ import annotations

import pytest

from videoflow_aio.adapters import Secret
from videoflow_aio.adapters.redis import RedisConnection, RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.contracts.errors import ValidationError


def test_a_url_and_keywords_make_the_connection_a_store_opens() -> None:
    store = RedisRuntimeStore("redis://app:s3cret@127.0.0.1:1/2", timeout=2.0, max_connections=3)
    conn = store._conn.connection
    assert (conn.url, conn.timeout, conn.max_connections) == ("redis://127.0.0.1:1/2", 2.0, 3)
    assert conn.username == "app" and "s3cret" not in repr(conn)


def test_one_connection_serves_both_stores() -> None:
    conn = RedisConnection("redis://127.0.0.1:1/0", password=Secret("pw"), wait_replicas=1)
    runtime = RedisRuntimeStore(conn, namespace="a")
    payload = RedisPayloadStore(conn, namespace="b")
    assert runtime._conn.connection is conn is payload._conn.connection
    assert runtime._conn.wait_replicas == payload._conn.wait_replicas == 1
    assert runtime._conn.client is not payload._conn.client  # each store its own pool


def test_settings_are_checked_once_with_typed_errors() -> None:
    with pytest.raises(ValidationError, match="protocol"):
        RedisConnection(protocol=4)
    with pytest.raises(ValidationError, match="wait_timeout"):
        RedisConnection(wait_timeout=0)
    with pytest.raises(TypeError, match="passwd"):
        RedisConnection(passwd="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="set on the RedisConnection"):
        RedisRuntimeStore(RedisConnection(), timeout=1.0)
