"""The idempotency hash of a derived config: what it applies, with ids, times and credentials left out.

The control plane stamps it on each deployment; the agent never computes it (hashlib would load
OpenSSL's libcrypto into every agent for nothing).
"""

from __future__ import annotations

import hashlib
import hmac

from agent import wire


def idempotency_hash(item: wire.DeploymentItem, action: str, key: bytes = b"") -> str:
    """A deterministic hash of what *item* applies for *action*.

    With *key* it is an HMAC, so that the published hash cannot be used to guess secret inputs.
    """
    inputs = [[i.name, i.type, i.value] for i in item.inputs if i.name not in wire.CREDENTIAL_INPUTS]
    body = {
        "name": item.name,
        "group": item.group,
        "config": item.config,
        "options": item.options,
        "outputs": [o.to_json() for o in item.outputs],
        "inputs": inputs,
        "action": action,
    }
    if key:
        return "hmac-sha256:" + hmac.new(key, wire.canonical_json(body), hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(wire.canonical_json(body)).hexdigest()
