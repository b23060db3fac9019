"""Serving Heat's own agent chain: its documents, and the `os-collect-config` section naming them.

A server may run os-collect-config, os-refresh-config, 55-heat-config and
heat-config-notify instead of our agent. It never enrols: it reads its document
with one of Heat's collectors, with a credential that reads that one server's
document and nothing else (``heatauth``):

| software_config_transport | collector | what it reads |
|---|---|---|
| ``POLL_SERVER_CFN`` (Heat's default) | ``cfn`` | DescribeStackResource, EC2-signed (``/v1/heat/cfn/v1/``) |
| ``POLL_SERVER_HEAT``, ``ZAQAR_MESSAGE`` | ``heat`` | the resource's metadata, Keystone login (``/v1/heat/keystone/v3``) |
| ``POLL_TEMP_URL`` and the others | ``request`` | ``/v1/heat/metadata/<server id>?sig=<HMAC>`` |

The server resource's ``os_collect_config`` attribute is that section (Heat's
bootstrap); a server created ``--heat-compatible`` gets the ``request`` one. A
server the stack made becomes Heat-compatible the first time Heat's chain reads
its document, unless our agent enrolled first (then the chain is refused).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

from sqlalchemy import select

from agent import wire
from control import hot
from control.documents import heatauth, seal
from control.documents.render import iso
from control.errors import ForbiddenError, NotFoundError
from control.runtime import Runtime
from control.store.orm import DeploymentRow, ResourceRow, ServerRow, StackRow

#: ServerRow.agent_kind of a server whose agent is Heat's chain.
HEAT_AGENT = "heat"
SERVER_TYPES = hot.SERVER_TYPES
#: heat.conf's default_software_config_transport.
DEFAULT_TRANSPORT = "POLL_SERVER_CFN"
#: What the `heat` collector serves here; ZAQAR_MESSAGE comes nearest to it (no Zaqar here).
HEAT_POLLED = frozenset({"POLL_SERVER_HEAT", "ZAQAR_MESSAGE"})


@dataclass(frozen=True)
class Placement:
    """Where a server resource sits: what Heat's collectors name in their settings."""

    stack_name: str
    stack_id: str
    resource: str
    transport: str
    nova: bool = False


def metadata_signature(rt: Runtime, server_id: str) -> str:
    msg = f"heat-metadata:{server_id}".encode()
    return hmac.new(rt.keys.signal_key, msg, hashlib.sha256).hexdigest()


def metadata_url(rt: Runtime, server_id: str) -> str:
    """The URL os-collect-config's `request` collector polls: it reads one server's document."""
    sig = metadata_signature(rt, server_id)
    return f"{rt.settings.base_url}/v1/heat/metadata/{server_id}?sig={sig}"


def os_collect_config(rt: Runtime, server_id: str, place: Placement | None = None) -> dict[str, Any]:
    """The `os-collect-config` section Heat writes for a server polling with *place*'s transport."""
    base = rt.settings.base_url
    transport = place.transport if place is not None else "POLL_TEMP_URL"
    first = ["ec2"] if place is not None and place.nova else []  # Heat's Nova servers; not DeployedServer
    if place is not None and transport == "POLL_SERVER_CFN":
        return {
            "collectors": [*first, "cfn", "local"],
            "cfn": {
                "metadata_url": heatauth.cfn_url(base),
                "access_key_id": server_id,
                "secret_access_key": heatauth.cfn_secret(rt.keys, server_id),
                "stack_name": place.stack_name,
                "path": f"{place.resource}.Metadata",
            },
        }
    if place is not None and transport in HEAT_POLLED:
        user = heatauth.user_id("server", server_id)
        return {
            "collectors": [*first, "heat", "local"],
            "heat": {
                "user_id": user,
                "password": heatauth.password(rt.keys, user),
                "auth_url": heatauth.auth_url(base),
                "project_id": place.stack_id,
                "stack_id": f"{place.stack_name}/{place.stack_id}",
                "resource_name": place.resource,
                "region_name": heatauth.REGION,
            },
        }
    return {
        "collectors": [*first, "request", "local"],
        "request": {"metadata_url": metadata_url(rt, server_id)},
    }


def heat_view(rt: Runtime, server: ServerRow) -> dict[str, Any]:
    """What an operator needs to point Heat's agent at this server's document."""
    return {
        "agent_kind": HEAT_AGENT,
        "metadata_url": metadata_url(rt, server.id),
        "os-collect-config": os_collect_config(rt, server.id),
    }


def check_metadata_signature(rt: Runtime, server_id: str, sig: str | None) -> None:
    if not sig or not sig.isascii() or not hmac.compare_digest(metadata_signature(rt, server_id), sig):
        raise ForbiddenError("metadata URL signature does not match this server", where="sig")


async def metadata(rt: Runtime, server_id: str) -> tuple[dict[str, Any], str, str]:
    """The document of a server Heat's chain polls: (document, ETag, Last-Modified).

    The caller has checked the credential. A server awaiting its agent becomes
    Heat-compatible here (its enrolment token dies); one whose agent is ours is refused.
    """
    async with rt.sessions() as session:
        server = await session.get(ServerRow, server_id)
        if server is None:
            raise NotFoundError(f"server {server_id!r} not found", where="server")
        if server.agent_kind != HEAT_AGENT:
            if server.status != "AWAITING_ENROLMENT":
                raise ForbiddenError(
                    f"server {server.name} runs Anneal's agent; its agent reads /v1/agent/document",
                    where="server",
                )
            server.agent_kind, server.status = HEAT_AGENT, "HEAT_COMPATIBLE"
            server.enrol_token_hash, server.enrol_expires = None, None
            server.last_seen = time.time()
            await session.commit()
        place = await placement(session, server_id)
        rows = list(
            await session.scalars(
                select(DeploymentRow).where(
                    DeploymentRow.server_id == server_id, DeploymentRow.item.is_not(None)
                )
            )
        )
    # Not render_document: Heat's chain cannot open secrets sealed to an agent key (it has
    # none), so a Heat-compatible server gets them as Heat sends them, behind its
    # credential (docs/heat-compat.md).
    items = [seal.load_item(r.item, f"deployment {r.id}")[0] for r in rows]
    meta = {
        i.id: wire.ItemMeta(r.id, r.generation, r.hash, r.action, r.timeout)
        for i, r in zip(items, rows, strict=True)
    }
    # Heat's chain re-runs its command whenever the document differs, so nothing in it may
    # change between renders or on a signal: issued_at is when the newest generation started.
    started = max([server.created_at, *(r.started_at or 0 for r in rows)])
    changed = max([server.created_at, *(r.updated_at or 0 for r in rows)])
    doc = wire.Document(
        server_id=server.id,
        serial=server.serial,
        issued_at=iso(started),
        deployments=tuple(wire.sorted_items(items)),
        meta=meta,
        extra={"os-collect-config": os_collect_config(rt, server_id, place)},
    ).to_json()
    return doc, f'"{server.serial}"', formatdate(changed, usegmt=True)


async def placement(session: Any, server_id: str) -> Placement | None:
    """The server resource whose physical id is *server_id*, if a stack made or adopted it."""
    found = (
        await session.execute(
            select(
                ResourceRow.name,
                ResourceRow.type,
                ResourceRow.properties,
                ResourceRow.stack_id,
                StackRow.name,
            )
            .join(StackRow, StackRow.id == ResourceRow.stack_id)
            .where(
                ResourceRow.physical_id == server_id,
                ResourceRow.type.in_(SERVER_TYPES),
                ResourceRow.current.is_(True),
            )
            .limit(1)
        )
    ).first()
    if found is None:
        return None
    name, rtype, props, stack_id, stack_name = found
    transport = str((props or {}).get("software_config_transport") or DEFAULT_TRANSPORT).upper()
    return Placement(stack_name, stack_id, name, transport, rtype == "OS::Nova::Server")
