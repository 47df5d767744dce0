"""A throwaway NATS operator, account and user as JWTs (operator mode), and the user's
``.creds`` file, made with ``nkeys`` (what ``nsc`` does; nsc is not installed here).

JWTs are ``base64url(header).base64url(claims).base64url(ed25519 signature)``, signed by the
issuer's NKey; the server trusts the operator (``operator:``), resolves the account from
memory (``resolver_preload``) and checks the user's JWT against the account.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import nkeys


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _keypair(prefix: int) -> Any:
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix)))


def _jwt(issuer: Any, subject: str, name: str, nats: dict[str, Any]) -> str:
    claims: dict[str, Any] = {
        "iat": int(time.time()),  # wall-clock: a JWT's issue time is wall time
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    claims["jti"] = (
        base64.b32encode(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest())
        .decode()
        .rstrip("=")
    )
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = issuer.sign(f"{head}.{body}".encode())
    return f"{head}.{body}.{_b64(sig)}"


def operator_setup(directory: Path) -> tuple[str, Path]:
    """``(server configuration, path of the user's .creds file)``."""
    op = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    acct = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    user = _keypair(nkeys.PREFIX_BYTE_USER)
    op_pub, acct_pub = op.public_key.decode(), acct.public_key.decode()
    op_jwt = _jwt(op, op_pub, "vf-operator", {"type": "operator"})
    unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                 "wildcards": True, "conn": -1, "leaf": -1}  # fmt: skip
    acct_jwt = _jwt(op, acct_pub, "vf-account", {"type": "account", "limits": unlimited})
    user_jwt = _jwt(
        acct,
        user.public_key.decode(),
        "vf-user",
        {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
    )
    creds = directory / "user.creds"
    creds.write_text(
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt}\n"
        "------END NATS USER JWT------\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{user.seed.decode()}\n"
        "------END USER NKEY SEED------\n"
    )
    creds.chmod(0o600)
    conf = f"operator: {op_jwt}\nresolver: MEMORY\nresolver_preload: {{ {acct_pub}: {acct_jwt} }}\n"
    return conf, creds
