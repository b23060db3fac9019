"""What the API, the engine and the services share in one process."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

from agent import envelope, wire
from control.documents import seal
from control.documents.publish import Publisher
from control.keys import Keys
from control.provision import Provisioner
from control.settings import Settings
from control.store.db import Sessions
from control.store.orm import DeploymentRow, ServerRow

log = logging.getLogger(__name__)
#: Servers whose documents are rendered from one database read.
PUBLISH_CHUNK = 500


@dataclass
class Runtime:
    settings: Settings
    keys: Keys
    sessions: Sessions
    publisher: Publisher
    provisioner: Provisioner
    #: credential hash -> server id, so that polls need no database read.
    credentials: dict[str, str] = field(default_factory=dict)
    #: server id -> serial of the document this process last handed to the publisher.
    published: dict[str, int] = field(default_factory=dict)
    #: The queue result signals are applied from in batches (control/signal_batch.py).
    signal_batch: Any = None

    async def publish(self, server_ids: Iterable[str]) -> None:
        """Render, sign and hand each server's document to the publisher; re-sign those near expiry.

        Servers go in chunks of PUBLISH_CHUNK, each read in its own session: a stack of
        10,000 servers never holds every deployment row in memory at once.
        """
        ids = sorted(set(server_ids))
        for start in range(0, len(ids), PUBLISH_CHUNK):
            await self._publish(ids[start : start + PUBLISH_CHUNK])

    async def _publish(self, ids: list[str]) -> None:
        if not ids:
            return
        async with self.sessions() as session:
            servers = {s.id: s for s in await session.scalars(select(ServerRow).where(ServerRow.id.in_(ids)))}
            due = time.time() - self.settings.document_ttl / 2
            stale = sorted(s.id for s in servers.values() if s.serial_at < due)
            if stale:  # a new serial, so that agents holding the old signature fetch the new one
                await session.execute(
                    update(ServerRow)
                    .where(ServerRow.id.in_(stale))
                    .values(serial=ServerRow.serial + 1, serial_at=time.time())
                    .execution_options(synchronize_session=False)
                )
                await session.commit()
                query = select(ServerRow).where(ServerRow.id.in_(stale))
                for fresh in await session.scalars(query.execution_options(populate_existing=True)):
                    servers[fresh.id] = fresh
            rows = await session.scalars(
                select(DeploymentRow).where(DeploymentRow.server_id.in_(ids), DeploymentRow.item.is_not(None))
            )
            by_server: dict[str, list[DeploymentRow]] = {}
            for row in rows:
                by_server.setdefault(row.server_id, []).append(row)
            stack_ids = {r.stack_id for rs in by_server.values() for r in rs if r.stack_id}
            hidden = await seal.stack_secrets(session, stack_ids)
        for server_id in ids:
            server = servers.get(server_id)
            if server is None:
                await self.publisher.withdraw(server_id)
                self.published.pop(server_id, None)
                continue
            doc = render_document(server, by_server.get(server_id, []), self.settings.document_ttl, hidden)
            section = self.publisher.section(server, by_server.get(server_id, []))
            if section is not None:
                doc = dataclasses.replace(doc, transport=section)
            body = envelope.sign(doc.to_json(), self.keys.signing_key, self.keys.chain)
            await self.publisher.publish(server_id, doc.serial, body)
            self.published[server_id] = max(doc.serial, self.published.get(server_id, 0))

    async def publish_all(self) -> None:
        async with self.sessions() as session:
            ids = list(await session.scalars(select(ServerRow.id)))
        await self.publish(ids)

    async def refresh_due(self) -> None:
        """Re-sign every document past half its lifetime (the serial moves, agents refetch)."""
        due = time.time() - self.settings.document_ttl / 2
        async with self.sessions() as session:
            ids = list(await session.scalars(select(ServerRow.id).where(ServerRow.serial_at < due)))
        await self.publish(ids)


def render_document(
    server: ServerRow,
    rows: Iterable[DeploymentRow],
    ttl: float,
    hidden: Mapping[str, frozenset[str]] | None = None,
) -> wire.Document:
    """The server's document: every deployment on it, Heat's shape plus our extras, secrets sealed."""
    items = []
    meta = {}
    recipient = seal.box_key(server.public_keys or {})
    for row in rows:
        item = wire.decode_item(row.item, f"deployment {row.id}")
        strings = (hidden or {}).get(row.stack_id or "", frozenset())
        item, fields = seal.seal_item(item, server.id, recipient, strings)
        items.append(item)
        # A generation failed without a signal (cancelled, timed out): its agent stops the hook.
        stop = row.status == "FAILED" and row.status_code is None
        meta[item.id] = wire.ItemMeta(
            row.id, row.generation, row.hash, row.action, row.timeout, fields, stop=stop
        )
    return wire.Document(
        server_id=server.id,
        serial=server.serial,
        issued_at=iso(server.serial_at),
        deployments=tuple(wire.sorted_items(items)),
        meta=meta,
        expires_at=iso(server.serial_at + ttl),
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
