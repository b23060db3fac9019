"""Which values of a document are secret, and sealing them to the server's key.

A value is secret when its input is declared ``secret: true`` (Anneal's
extension) or when it contains the value of one of the stack's ``hidden``
parameters (also inside a larger string, e.g. after ``str_replace``); a config
body containing a hidden value is secret too, and so is a signal URL that
carries its own credential. Secret values leave the control plane only sealed
(``agent/sealed.py``), to the X25519 key the server gave at enrolment.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from agent import sealed, wire

#: Derived inputs that are credentials when they carry a query string (a signature).
CREDENTIAL_URLS = ("deploy_signal_id",)


def hidden_strings(parameters: Mapping[str, Any], hidden: Iterable[str]) -> frozenset[str]:
    """The string forms of the hidden parameters' values (empty values left out)."""
    out = set()
    for name in hidden:
        value = parameters.get(name)
        if value in (None, ""):
            continue
        out.add(value if isinstance(value, str) else str(wire.canonical_json(value), "utf-8"))
    return frozenset(out)


def contains(value: Any, secrets: frozenset[str]) -> bool:
    if not secrets or value is None:
        return False
    text = value if isinstance(value, str) else wire.canonical_json(value).decode()
    return any(s in text for s in secrets)


def box_key(public_keys: Mapping[str, Any]) -> bytes | None:
    """The server's X25519 public key, if it has enrolled."""
    try:
        raw = base64.b64decode(str(public_keys.get("box") or ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def seal_item(
    item: wire.DeploymentItem, server_id: str, recipient: bytes | None, secrets: frozenset[str]
) -> tuple[wire.DeploymentItem, tuple[str, ...]]:
    """*item* with its secret fields sealed, and the names of those fields."""

    def close(value: Any, field: str) -> str:
        if recipient is None:
            return sealed.UNAVAILABLE
        return sealed.seal(value, recipient, f"{server_id}/{item.id}/{field}")

    fields: list[str] = []
    config = item.config
    if contains(config, secrets):
        config = close(config, "config")
        fields.append("config")
    inputs = []
    for inp in item.inputs:
        credential = inp.name in CREDENTIAL_URLS and recipient is not None and "?" in str(inp.value or "")
        if inp.secret or credential or contains(inp.value, secrets):
            field = f"inputs.{inp.name}"
            inputs.append(dataclasses.replace(inp, value=close(inp.value, field), secret=True))
            fields.append(field)
        else:
            inputs.append(inp)
    if not fields:
        return item, ()
    return dataclasses.replace(item, config=config, inputs=tuple(inputs)), tuple(fields)
