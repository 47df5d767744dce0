"""One rule for every adapter (issue 26, item 15): a local file that cannot be read or parsed
(CA, certificate, key, NKey seed, ``.creds``), a key that does not match its certificate, or
an encrypted key without its password, is a ValidationError when the adapter is built —
never AuthenticationFailed or BackendUnavailable later (which invite retrying), and never
an interactive password prompt. No server is needed: nothing is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _nats_jwt import operator_setup
from _servers_fixtures import nats_seed
from videoflow_aio.adapters import TLSConfig
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.testing.servers import Certificates

SECRET_MARK = "SUAM-NOT-A-REAL-SEED-BUT-SECRET"


@pytest.fixture(scope="module")
def certs() -> Iterator[Certificates]:
    made = Certificates.make()
    yield made
    made.remove()


def _bad_tls(certs: Certificates, tmp: Path) -> dict[str, TLSConfig]:
    garbage = tmp / "garbage.pem"
    garbage.write_text(f"{SECRET_MARK}\nnot a certificate\n")
    encrypted = tmp / "encrypted.key"
    encrypted.write_bytes(_encrypted_key())
    return {
        "missing CA": TLSConfig(ca_file=str(tmp / "absent.pem")),
        "garbage CA": TLSConfig(ca_file=str(garbage)),
        "a directory as CA": TLSConfig(ca_file=str(tmp)),
        "garbage certificate": TLSConfig(
            ca_file=str(certs.ca_file), cert_file=str(garbage), key_file=str(certs.client_key)
        ),
        "garbage key": TLSConfig(
            ca_file=str(certs.ca_file), cert_file=str(certs.client_cert), key_file=str(garbage)
        ),
        "key of another certificate": TLSConfig(
            ca_file=str(certs.ca_file),
            cert_file=str(certs.client_cert),
            key_file=str(certs.server_key),
        ),
        "missing key": TLSConfig(
            ca_file=str(certs.ca_file),
            cert_file=str(certs.client_cert),
            key_file=str(tmp / "absent.key"),
        ),
        "encrypted key, no password": TLSConfig(
            ca_file=str(certs.ca_file), cert_file=str(certs.client_cert), key_file=str(encrypted)
        ),
    }


def _encrypted_key() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )


BUILDERS: dict[str, Callable[[TLSConfig], object]] = {
    "redis runtime store": lambda tls: RedisRuntimeStore("rediss://127.0.0.1:1", tls=tls),
    "redis payload store": lambda tls: RedisPayloadStore(
        "rediss://127.0.0.1:1", tier="durable", tls=tls
    ),
    "nats jetstream": lambda tls: JetStreamMessagingBackend("tls://127.0.0.1:1", tls=tls),
    "nats core": lambda tls: CoreNatsMessagingBackend("tls://127.0.0.1:1", tls=tls),
    "etcd": lambda tls: EtcdRuntimeStore("https://127.0.0.1:1", tls=tls),
}


@pytest.mark.parametrize("adapter", sorted(BUILDERS))
def test_unusable_tls_files_are_validation_errors_at_construction(
    certs: Certificates, tmp_path: Path, adapter: str
) -> None:
    for case, tls in _bad_tls(certs, tmp_path).items():
        if adapter == "etcd" and tls.key_password is not None:
            continue
        with pytest.raises(ValidationError) as err:
            BUILDERS[adapter](tls)
        assert SECRET_MARK not in str(err.value), case  # names the file, never its content


@pytest.mark.parametrize("adapter", sorted(BUILDERS))
def test_good_tls_files_build(certs: Certificates, adapter: str) -> None:
    BUILDERS[adapter](certs.client_tls())


NATS = [JetStreamMessagingBackend, CoreNatsMessagingBackend]


def _creds_variants(tmp: Path) -> dict[str, Path]:
    _, good = operator_setup(tmp)
    text = good.read_text().splitlines()
    jwt_at = next(i for i, line in enumerate(text) if "BEGIN NATS USER JWT" in line) + 1
    seed_at = next(i for i, line in enumerate(text) if "BEGIN USER NKEY SEED" in line) + 1
    out = {}
    for name, lines in {
        "empty": [],
        "garbage": [SECRET_MARK, "hello"],
        "no JWT": text[seed_at - 1 : seed_at + 2],
        "no seed": text[jwt_at - 1 : jwt_at + 2],
        "bad JWT": [*text[:jwt_at], SECRET_MARK, *text[jwt_at + 1 :]],
        "bad seed": [*text[:seed_at], SECRET_MARK, *text[seed_at + 1 :]],
    }.items():
        path = tmp / f"{name.replace(' ', '_')}.creds"
        path.write_text("\n".join(lines) + "\n")
        out[name] = path
    out["missing"] = tmp / "absent.creds"
    out["a directory"] = tmp
    return out


@pytest.mark.parametrize("backend", NATS)
def test_unusable_creds_files_are_validation_errors_at_construction(
    tmp_path: Path, backend: type[JetStreamMessagingBackend] | type[CoreNatsMessagingBackend]
) -> None:
    for case, path in _creds_variants(tmp_path).items():
        with pytest.raises(ValidationError) as err:
            backend("nats://127.0.0.1:1", creds_file=str(path))
        assert err.value.fields["field"] == "creds_file", case
        assert SECRET_MARK not in str(err.value), case
    (tmp_path / "ok").mkdir()
    _, good = operator_setup(tmp_path / "ok")
    backend("nats://127.0.0.1:1", creds_file=str(good))


@pytest.mark.parametrize("backend", NATS)
def test_unusable_nkey_seed_files_are_validation_errors_at_construction(
    tmp_path: Path, backend: type[JetStreamMessagingBackend] | type[CoreNatsMessagingBackend]
) -> None:
    garbage = tmp_path / "garbage.nk"
    garbage.write_text(SECRET_MARK + "\n")
    empty = tmp_path / "empty.nk"
    empty.write_text("")
    for case, path in {
        "missing": tmp_path / "absent.nk",
        "garbage": garbage,
        "empty": empty,
        "a directory": tmp_path,
    }.items():
        with pytest.raises(ValidationError) as err:
            backend("nats://127.0.0.1:1", nkey_seed_file=str(path))
        assert err.value.fields["field"] == "nkey_seed_file", case
        assert SECRET_MARK not in str(err.value), case
    good = tmp_path / "user.nk"
    nats_seed(str(good))
    backend("nats://127.0.0.1:1", nkey_seed_file=str(good))
