"""Which values of a document are secret, and sealing them to the server's key.

A value is secret when its input is declared ``secret: true`` (Anneal's
extension) or when it contains a *secret string* of its stack: the value of one
of the stack's ``hidden`` parameters or of an ``OS::Heat::RandomString`` (also
inside a larger string, e.g. after ``str_replace``). A config body containing a
secret string, or the value of one of its deployment's secret inputs (a
StructuredConfig's ``get_input``), is secret too, and so is a signal URL that
carries its own credential. Secret values leave the control plane only sealed
(``agent/sealed.py``), to the X25519 key the server gave at enrolment, and are
masked wherever the API shows them (``control/services/queries.py``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent import sealed, wire
from control.store.orm import ResourceRow, StackRow

#: Derived inputs that are credentials when they carry a query string (a signature).
CREDENTIAL_URLS = ("deploy_signal_id",)
#: Resource types whose ``value`` attribute is a generated secret.
GENERATED = ("OS::Heat::RandomString",)


def hidden_strings(parameters: Mapping[str, Any], hidden: Iterable[str]) -> frozenset[str]:
    """The string forms of the hidden parameters' values (empty values left out)."""
    values = (parameters.get(name) for name in hidden)
    return frozenset(_text(v) for v in values if v not in (None, ""))


async def stack_secrets(session: AsyncSession, stack_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """Each stack's secret strings: hidden parameter values and generated values (RandomString)."""
    ids = sorted(set(stack_ids))
    if not ids:
        return {}
    query = select(StackRow.id, StackRow.parameters, StackRow.hidden).where(StackRow.id.in_(ids))
    out = {sid: hidden_strings(params, names) for sid, params, names in await session.execute(query)}
    generated = select(ResourceRow.stack_id, ResourceRow.attributes).where(
        ResourceRow.stack_id.in_(ids), ResourceRow.type.in_(GENERATED)
    )
    for sid, attributes in await session.execute(generated):
        value = (attributes or {}).get("value")
        if isinstance(value, str) and value:
            out[sid] = out.get(sid, frozenset()) | {value}
    return out


async def secret_strings(session: AsyncSession, stack_id: str | None) -> set[str]:
    """One stack's secret strings, for masking what the API shows."""
    if not stack_id:
        return set()
    return set((await stack_secrets(session, [stack_id])).get(stack_id, frozenset()))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(wire.canonical_json(value), "utf-8")


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
    # A secret input's value substituted into the config (get_input) makes the config secret.
    own = frozenset(_text(i.value) for i in item.inputs if i.secret and i.value not in (None, ""))
    if contains(config, secrets | own):
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
