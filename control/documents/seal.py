"""Which values of a document are secret, sealing them to the server's key, and secret texts.

Secrecy is a property of the value (``control/hot/taint.py``), decided when the
deployment's generation is derived (``resources/deploy.py``): an input is secret when
its value is a Secret (derived from a hidden parameter, a random string, a secret
output) or when it is declared ``secret: true`` (Anneal's extension); the config is
secret when any part of it is (a StructuredConfig's ``get_input`` of a secret input
included), which the stored item records by keeping its config a Secret. A signal URL
that carries its own credential is secret too. Secret values leave the control plane
only sealed (``agent/sealed.py``), to the X25519 key the server gave at enrolment.

What a hook writes back (outputs, stdout, stderr, progress) is text the taint cannot
follow: it is searched for the *secret texts* of its deployment, the texts of its
secret inputs and of its stack's hidden parameters and random strings (``texts_for``).
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
from control.hot import taint
from control.store.orm import ResourceRow, StackRow

#: Derived inputs that are credentials when they carry a query string (a signature).
CREDENTIAL_URLS = ("deploy_signal_id",)
#: Resource types whose ``value`` attribute is a generated secret.
GENERATED = ("OS::Heat::RandomString",)


async def stack_texts(session: AsyncSession, stack_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """Each stack's secret texts: its hidden parameters' values and its random strings."""
    return (await stack_texts_and_traversals(session, stack_ids))[0]


async def stack_texts_and_traversals(
    session: AsyncSession, stack_ids: Iterable[str]
) -> tuple[dict[str, frozenset[str]], dict[str, int]]:
    """``stack_texts``, and each stack's traversal from the same query (a signal's transaction needs
    both: one round trip to the database fewer on every result)."""
    ids = sorted(set(stack_ids))
    if not ids:
        return {}, {}
    query = select(StackRow.id, StackRow.parameters, StackRow.hidden, StackRow.traversal)
    out: dict[str, frozenset[str]] = {}
    traversals: dict[str, int] = {}
    for sid, params, names, traversal in await session.execute(query.where(StackRow.id.in_(ids))):
        out[sid] = frozenset(taint.texts(taint.Secret([params.get(n) for n in names if n in params])))
        traversals[sid] = traversal
    generated = select(ResourceRow.stack_id, ResourceRow.attributes).where(
        ResourceRow.stack_id.in_(ids), ResourceRow.type.in_(GENERATED)
    )
    for sid, attributes in await session.execute(generated):
        out[sid] = out.get(sid, frozenset()) | taint.texts(taint.Secret((attributes or {}).get("value")))
    return out, traversals


async def secret_strings(session: AsyncSession, stack_id: str | None) -> set[str]:
    """One stack's secret texts (``stack_texts``), for masking what the Heat API shows."""
    if not stack_id:
        return set()
    return set((await stack_texts(session, [stack_id])).get(stack_id, frozenset()))


def texts_for(item: Mapping[str, Any] | None, stack: Iterable[str] = ()) -> frozenset[str]:
    """The secret texts a hook's write-back is searched for: its secret inputs' and *stack*'s."""
    values = [i.get("value") for i in (item or {}).get("inputs", []) if i.get("secret")]
    return frozenset(taint.texts(taint.Secret(values))) | frozenset(stack)


def stored_item(item: wire.DeploymentItem, config_secret: bool) -> dict[str, Any]:
    """The item as a deployment row keeps it: a secret config stays a Secret (sealed when published)."""
    raw = item.to_json()
    if config_secret:
        raw["config"] = taint.Secret(raw["config"])
    return raw


def load_item(raw: Any, where: str) -> tuple[wire.DeploymentItem, bool]:
    """A deployment row's item, and whether its config is secret (``stored_item`` reversed)."""
    config = raw.get("config") if isinstance(raw, Mapping) else None
    if isinstance(config, taint.Secret):
        return wire.decode_item({**raw, "config": config.value}, where), True
    return wire.decode_item(raw, where), False


def is_credential(inp: wire.InputItem) -> bool:
    """A derived input that carries its own credential (a signed signal URL)."""
    return inp.name in CREDENTIAL_URLS and "?" in str(inp.value or "")


def box_key(public_keys: Mapping[str, Any]) -> bytes | None:
    """The server's X25519 public key, if it has enrolled."""
    try:
        raw = base64.b64decode(str(public_keys.get("box") or ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def seal_item(
    item: wire.DeploymentItem, server_id: str, recipient: bytes | None, config_secret: bool
) -> tuple[wire.DeploymentItem, tuple[str, ...]]:
    """*item* with its secret fields sealed, and the names of those fields."""

    def close(value: Any, field: str) -> str:
        if recipient is None:
            return sealed.UNAVAILABLE
        return sealed.seal(value, recipient, f"{server_id}/{item.id}/{field}")

    fields: list[str] = []
    config = item.config
    if config_secret:
        config = close(config, "config")
        fields.append("config")
    inputs = []
    for inp in item.inputs:
        if inp.secret or (recipient is not None and is_credential(inp)):
            field = f"inputs.{inp.name}"
            inputs.append(dataclasses.replace(inp, value=close(inp.value, field), secret=True))
            fields.append(field)
        else:
            inputs.append(inp)
    if not fields:
        return item, ()
    return dataclasses.replace(item, config=config, inputs=tuple(inputs)), tuple(fields)
