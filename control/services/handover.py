"""A stack handed to another control plane (`stack abandon --to`, then `stack adopt` there).

The receiving control plane (B) shows its signing key and its adopt key (X25519, derived
from its data key) with `anneal key show`. Abandon on the giving one (A) seals the stack's
secrets and the records of its servers, configs and deployments (their derived configs and
results, each server's credential hash and public keys) with a fresh transfer key, which is
itself sealed to B's adopt key: only B opens them. A keeps each server, with its
deployments gone from its document, and publishes in it, signed with A's key the agent
trusts, the hand-over: B's URL and public key. The agent moves to B and trusts only B's key
from then on (agent/handover.py). Adopt on B re-creates the rows as they were, so B's
document carries the same generations, which the agents' ledgers hold as done: nothing runs.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select

from agent import envelope, sealed
from control.errors import BadRequestError, ConflictError
from control.principal import Within
from control.runtime import Runtime
from control.services.stacks import get_stack
from control.store import crypt, names, previous
from control.store.orm import Base, ConfigRow, DeploymentRow, ServerRow
from control.txn import Txn, retried_on_race

#: The abandon data's section for a hand-over: who it is for, the sealed transfer key, the records.
SECTION = "anneal_handover"
#: Bound into the sealed transfer key: it opens as nothing else.
_PLACE = "anneal-adopt-transfer-key"
#: Columns a record leaves behind: the row's own bookkeeping, or what the receiver sets itself; and
#: a stack's previous definition in its deferred columns, which only a top-level update writes (the
#: records are nested stacks', whose own previous definition is never kept: their parent's is).
_LEFT = frozenset({"row_version", "project", "handover", *previous.COLUMNS})


@dataclass(frozen=True)
class Target:
    """The receiving control plane: its URL, its Ed25519 signing key and X25519 adopt key (base64)."""

    url: str
    public_key: str
    adopt_key: str

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "public_key": self.public_key, "adopt_key": self.adopt_key}


def read_target(body: Mapping[str, Any], where: str = "") -> Target | None:
    """The hand-over in ``{"to": URL, "to_key": <anneal key show>}``; None when *body* names none."""
    to, key = body.get("to"), body.get("to_key")
    if to is None and key is None:
        return None
    if not isinstance(to, str) or not to.startswith(("http://", "https://")) or "?" in to:
        raise BadRequestError(
            f"{where}to: expected the receiving control plane's http(s) URL", where=f"{where}to"
        )
    if not isinstance(key, Mapping):
        raise BadRequestError(
            f"{where}to_key: expected what `anneal key show -f json` prints on the receiving control plane",
            where=f"{where}to_key",
        )
    for name in ("public_key", "adopt_key"):
        _raw(key.get(name), f"{where}to_key.{name}")
    try:  # a low-order point would make every seal to it fail (no shared secret)
        sealed.seal("", _raw(key["adopt_key"], ""), _PLACE)
    except ValueError:
        raise BadRequestError(
            f"{where}to_key.adopt_key: not a usable X25519 key", where=f"{where}to_key.adopt_key"
        ) from None
    return Target(to.rstrip("/"), str(key["public_key"]), str(key["adopt_key"]))


def _raw(text: Any, where: str) -> bytes:
    try:
        raw = base64.b64decode(text if isinstance(text, str) else "", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise BadRequestError(f"{where}: expected a 32-byte key in base64", where=where)
    return raw


def record(row: Base, *leave: str) -> dict[str, Any]:
    """A row's columns, as the receiver re-creates them; *leave*: more to leave out (an autoincrement id)."""
    left = _LEFT | set(leave)
    return {a.key: getattr(row, a.key) for a in row.__mapper__.column_attrs if a.key not in left}


async def export(
    rt: Runtime, txn: Txn, stack_ids: list[str], owned: Iterable[str], target: Target
) -> tuple[dict[str, Any], bytes, list[str]]:
    """Hand the servers of the stacks *stack_ids* (a stack and its nested ones) to *target*: the abandon
    data's section, the transfer key, the servers.

    Every server a deployment of the stacks runs on moves; one that also runs another
    stack's (or a standalone) deployment is refused (409), as it cannot be in two places.
    """
    session = txn.session
    deps = list(await session.scalars(select(DeploymentRow).where(DeploymentRow.stack_id.in_(stack_ids))))
    configs = list(await session.scalars(select(ConfigRow).where(ConfigRow.stack_id.in_(stack_ids))))
    ids = sorted({d.server_id for d in deps} | set(owned))
    await _refuse_shared(txn, ids, stack_ids)
    servers = list(await session.scalars(select(ServerRow).where(ServerRow.id.in_(ids))))
    published = {
        "url": target.url,
        "document_url": f"{target.url}/v1/agent/document",
        "heartbeat_url": f"{target.url}/v1/agent/heartbeat",
        "public_key": target.public_key,
    }
    transfer = os.urandom(32)
    records = {
        "servers": [record(s) for s in servers],
        "configs": [record(c) for c in configs],
        "deployments": [record(d) for d in deps],
    }
    for server in servers:
        server.handover, server.owner_stack_id = published, None
    txn.publish.update(ids)  # the hand-over document, signed by this control plane's key
    section = {
        "from_key_id": rt.keys.key_id,
        "to": target.url,
        "to_key_id": envelope.key_id(_raw(target.public_key, "to_key.public_key")),
        "key": sealed.seal(transfer.hex(), _raw(target.adopt_key, "to_key.adopt_key"), _PLACE),
        "records": crypt.seal(transfer, records),
    }
    for row in (*deps, *configs):
        await session.delete(row)  # B has them now; A's document no longer lists them
    return section, transfer, [s.id for s in servers]


async def _refuse_shared(txn: Txn, server_ids: list[str], stack_ids: list[str]) -> None:
    """A server that also runs another stack's (or a standalone) deployment cannot move: 409 naming it."""
    session = txn.session
    shared = await session.scalar(
        select(DeploymentRow.server_id).where(
            DeploymentRow.server_id.in_(server_ids),
            or_(DeploymentRow.stack_id.is_(None), DeploymentRow.stack_id.not_in(stack_ids)),
        )
    )
    if shared is not None:
        raise ConflictError(
            f"server {shared} also runs deployments of another stack (or standalone ones): "
            "a server moves whole; hand those over or delete them first",
            where="to",
        )


def transfer_key(rt: Runtime, data: Mapping[str, Any]) -> bytes | None:
    """The transfer key of abandon data handed to this control plane; None for data not handed over."""
    section = data.get(SECTION)
    if section is None:
        return None
    where = f"adopt_stack_data.{SECTION}"
    if not isinstance(section, Mapping):
        raise BadRequestError(f"{where}: expected an object", where=where)
    if section.get("to_key_id") != rt.keys.key_id:
        raise BadRequestError(
            f"{where}.to_key_id: handed to the control plane with key {section.get('to_key_id')}, "
            f"this one's is {rt.keys.key_id}",
            where=f"{where}.to_key_id",
        )
    try:
        return bytes.fromhex(sealed.open_sealed(section.get("key"), rt.keys.adopt_private, _PLACE))
    except (sealed.SealError, ValueError, TypeError) as e:
        raise BadRequestError(
            f"{where}.key: does not open with this control plane's adopt key ({e})", where=where
        ) from None


async def import_rows(
    txn: Txn, data: Mapping[str, Any], key: bytes, remap: Mapping[str, str], project: str
) -> list[str]:
    """Re-create the handed-over servers, configs and deployments in their stacks (*remap*: the giving
    control plane's top-level stack id to the new one; nested stacks keep theirs); the server ids."""
    where = f"adopt_stack_data.{SECTION}.records"
    try:
        records = crypt.unseal(key, data[SECTION].get("records"))
    except (crypt.DataKeyError, AttributeError) as e:
        raise BadRequestError(f"{where}: does not open with the transfer key ({e})", where=where) from None
    session = txn.session
    ids = []
    for rec in records.get("servers") or []:
        if await session.get(ServerRow, rec["id"]) or await names.taken(
            session, ServerRow, rec["name"], project
        ):
            raise ConflictError(
                f"{where}: server {rec['name']} ({rec['id']}) exists here already", where=where
            )
        owner = remap.get(rec["owner_stack_id"], rec["owner_stack_id"]) if rec.get("owner_stack_id") else None
        # Above the hand-over document's serial (the commit adds one more): the agent's floor holds.
        session.add(
            ServerRow(**{**rec, "owner_stack_id": owner, "serial": rec["serial"] + 1}, project=project)
        )
        ids.append(rec["id"])
    txn.publish.update(ids)  # the same generations: the agents' ledgers hold them as done
    for table, name in ((ConfigRow, "configs"), (DeploymentRow, "deployments")):
        for rec in records.get(name) or []:
            if await session.get(table, rec["id"]) is not None:
                raise ConflictError(f"{where}: {name[:-1]} {rec['id']} exists here already", where=where)
            stack_id = remap.get(rec["stack_id"], rec["stack_id"]) if rec.get("stack_id") else None
            session.add(table(**{**rec, "stack_id": stack_id}, project=project))
    return ids


@retried_on_race
async def set_target(rt: Runtime, name: str, target: Target | None, *, within: Within) -> dict[str, Any]:
    """Where stack *name*'s next abandon hands it (None: nowhere); for `openstack stack abandon`."""
    async with rt.sessions() as session:
        stack = await get_stack(session, name, within=within)
        stack.handover = target.to_json() if target else None
        await session.commit()
        return {"name": stack.name, "id": stack.id, "handover": stack.handover}
