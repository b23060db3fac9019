"""What the API, the engine and the services share in one process."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import select

from agent import wire
from control.keys import Keys
from control.provision import Provisioner
from control.publish import Publisher
from control.settings import Settings
from control.store.db import Sessions
from control.store.orm import DeploymentRow, ServerRow

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    keys: Keys
    sessions: Sessions
    publisher: Publisher
    provisioner: Provisioner
    #: credential hash -> server id, so that polls need no database read.
    credentials: dict[str, str] = field(default_factory=dict)

    async def publish(self, server_ids: Iterable[str]) -> None:
        """Render each server's document from the database and hand it to the publisher."""
        ids = sorted(set(server_ids))
        if not ids:
            return
        async with self.sessions() as session:
            servers = {s.id: s for s in await session.scalars(select(ServerRow).where(ServerRow.id.in_(ids)))}
            rows = await session.scalars(
                select(DeploymentRow).where(DeploymentRow.server_id.in_(ids), DeploymentRow.item.is_not(None))
            )
            by_server: dict[str, list[DeploymentRow]] = {}
            for row in rows:
                by_server.setdefault(row.server_id, []).append(row)
        for server_id in ids:
            server = servers.get(server_id)
            if server is None:
                await self.publisher.withdraw(server_id)
                continue
            doc = render_document(server, by_server.get(server_id, []))
            section = self.publisher.section(server, by_server.get(server_id, []))
            if section is not None:
                doc = dataclasses.replace(doc, transport=section)
            await self.publisher.publish(server_id, doc.serial, doc.encode())

    async def publish_all(self) -> None:
        async with self.sessions() as session:
            ids = list(await session.scalars(select(ServerRow.id)))
        await self.publish(ids)


def render_document(server: ServerRow, rows: Iterable[DeploymentRow]) -> wire.Document:
    """The server's document: every deployment currently on it, Heat's shape plus our extras."""
    items = []
    meta = {}
    for row in rows:
        item = wire.decode_item(row.item, f"deployment {row.id}")
        items.append(item)
        meta[item.id] = wire.ItemMeta(row.id, row.generation, row.hash, row.action, row.timeout)
    return wire.Document(
        server_id=server.id,
        serial=server.serial,
        issued_at=iso(time.time()),
        deployments=tuple(wire.sorted_items(items)),
        meta=meta,
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
