"""The least-privilege NATS permissions for the backends: what a user needs to run
:class:`JetStreamMessagingBackend` / :class:`CoreNatsMessagingBackend` on one subject prefix.

:func:`jetstream_permissions` is what ``docs/security.md`` prints and what the tests give the
user (rendered by :func:`permissions_config`), so the documented rules and the tested ones
cannot drift apart.

JetStream's API subjects name a stream as one token (``$JS.API.STREAM.CREATE.<name>``) and
NATS permissions match whole tokens, so no rule can limit the API to streams whose *name*
starts with the backend's ``stream_prefix``. The isolation NATS offers for that is the
account: give the backend's user an account of its own with JetStream enabled, and its
streams and consumers are invisible to every other account (and theirs to it). Within that
account the user may publish only on its subject prefix, the JetStream API and acks, and
subscribe only to its inboxes and its account's JetStream advisories and metrics.
"""

from __future__ import annotations

import json

Permissions = dict[str, dict[str, list[str]]]


def jetstream_permissions(subject_prefix: str = "vf") -> Permissions:
    """Publish/subscribe allow-lists for a :class:`JetStreamMessagingBackend` with
    ``subject_prefix`` (everything else is denied)."""
    return {
        "publish": {"allow": [f"{subject_prefix}.>", "$JS.API.>", "$JS.ACK.>"]},
        # inboxes (replies, pulls, observations); what the backend follows: consumer
        # advisories, the JetStream API audit (purges by an administrator), ack metrics
        # (the evidence of a confirmed settle)
        "subscribe": {"allow": ["_INBOX.>", "$JS.EVENT.ADVISORY.>", "$JS.EVENT.METRIC.>"]},
    }


def core_permissions(subject_prefix: str = "vf") -> Permissions:
    """Publish/subscribe allow-lists for a :class:`CoreNatsMessagingBackend`."""
    return {
        "publish": {"allow": [f"{subject_prefix}.>"]},
        "subscribe": {"allow": [f"{subject_prefix}.>"]},
    }


def merge_permissions(*parts: Permissions) -> Permissions:
    """One user's permissions for several backends (the allow-lists joined)."""
    out: Permissions = {}
    for perms in parts:
        for direction, rules in perms.items():
            allow = out.setdefault(direction, {}).setdefault("allow", [])
            allow.extend(s for s in rules.get("allow", []) if s not in allow)
    return out


def permissions_config(perms: Permissions) -> str:
    """``perms`` as nats-server configuration (a user's ``permissions:`` value)."""
    return json.dumps(perms)


__all__ = [
    "Permissions",
    "core_permissions",
    "jetstream_permissions",
    "merge_permissions",
    "permissions_config",
]
