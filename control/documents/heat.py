"""Serving Heat's own agent chain: the metadata URL its `request` collector polls.

A server created Heat-compatible (`anneal server create NAME --heat-compatible`)
runs os-collect-config, os-refresh-config, 55-heat-config and heat-config-notify
instead of our agent. It never enrols; it gets a capability URL,
``/v1/heat/metadata/<server id>?sig=<HMAC>``, good for reading that one
server's document and nothing else. The document there is the server's
document with the ``os-collect-config`` section Heat writes for a
deployed server: collectors ``request`` and ``local`` and the URL itself.
Results come back on the deployments' CFN_SIGNAL URLs, which
heat-config-notify POSTs to as it would to heat-api-cfn.
"""

from __future__ import annotations

import hashlib
import hmac
from email.utils import formatdate
from typing import Any

from sqlalchemy import select

from agent import wire
from control.documents import seal
from control.documents.render import iso
from control.errors import ForbiddenError, NotFoundError
from control.runtime import Runtime
from control.store.orm import DeploymentRow, ServerRow

#: ServerRow.agent_kind of a server whose agent is Heat's chain.
HEAT_AGENT = "heat"
#: Collectors Heat configures for a deployed server polling a URL (heat.md §2.1).
COLLECTORS = ("request", "local")


def metadata_signature(rt: Runtime, server_id: str) -> str:
    msg = f"heat-metadata:{server_id}".encode()
    return hmac.new(rt.keys.signal_key, msg, hashlib.sha256).hexdigest()


def metadata_url(rt: Runtime, server_id: str) -> str:
    """The URL os-collect-config's `request` collector polls: it reads one server's document."""
    sig = metadata_signature(rt, server_id)
    return f"{rt.settings.base_url}/v1/heat/metadata/{server_id}?sig={sig}"


def os_collect_config(rt: Runtime, server_id: str) -> dict[str, Any]:
    """The document's `os-collect-config` section, as Heat writes it for POLL_TEMP_URL servers."""
    return {"collectors": list(COLLECTORS), "request": {"metadata_url": metadata_url(rt, server_id)}}


def heat_view(rt: Runtime, server: ServerRow) -> dict[str, Any]:
    """What an operator needs to point Heat's agent at this server's document."""
    return {
        "agent_kind": HEAT_AGENT,
        "metadata_url": metadata_url(rt, server.id),
        "os-collect-config": os_collect_config(rt, server.id),
    }


async def metadata(rt: Runtime, server_id: str, sig: str | None) -> tuple[bytes, str, str]:
    """The document of a Heat-compatible server: (body, ETag, Last-Modified)."""
    if not sig or not hmac.compare_digest(metadata_signature(rt, server_id), sig):
        raise ForbiddenError("metadata URL signature does not match this server", where="sig")
    async with rt.sessions() as session:
        server = await session.get(ServerRow, server_id)
        if server is None:
            raise NotFoundError(f"server {server_id!r} not found", where="server")
        if server.agent_kind != HEAT_AGENT:
            raise ForbiddenError(
                f"server {server.name} is not Heat-compatible; its agent reads /v1/agent/document",
                where="server",
            )
        rows = list(
            await session.scalars(
                select(DeploymentRow).where(
                    DeploymentRow.server_id == server_id, DeploymentRow.item.is_not(None)
                )
            )
        )
    # Not render_document: Heat's chain cannot open secrets sealed to an agent key (it has
    # none), so a Heat-compatible server gets them as Heat sends them, behind the URL's
    # capability (docs/heat-compat.md).
    items = [seal.load_item(r.item, f"deployment {r.id}")[0] for r in rows]
    meta = {
        i.id: wire.ItemMeta(r.id, r.generation, r.hash, r.action, r.timeout)
        for i, r in zip(items, rows, strict=True)
    }
    # Heat's chain re-runs its command whenever the document differs, so nothing in it may
    # change between renders or on a signal: issued_at is when the newest generation started.
    started = max([server.created_at, *(r.started_at or 0 for r in rows)])
    changed = max([server.created_at, *(r.updated_at or 0 for r in rows)])
    body = wire.Document(
        server_id=server.id,
        serial=server.serial,
        issued_at=iso(started),
        deployments=tuple(wire.sorted_items(items)),
        meta=meta,
        extra={"os-collect-config": os_collect_config(rt, server_id)},
    ).encode()
    return body, f'"{server.serial}"', formatdate(changed, usegmt=True)
