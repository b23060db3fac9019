"""What the API, the engine and the services share in one process."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError

from agent import envelope
from control import keys as keyfiles
from control.documents.publish import Publisher
from control.documents.render import RENDERED, render_document
from control.keys import Keys
from control.metrics import Metrics
from control.principal import TokenValidator
from control.provision import Provisioner
from control.settings import Settings
from control.store import notify
from control.store.credentials import Credentials
from control.store.db import Sessions
from control.store.orm import DeploymentRow, ServerRow

log = logging.getLogger(__name__)
#: Servers whose documents are rendered from one database read.
PUBLISH_CHUNK = 500


class SignalQueue(Protocol):
    """What the process owning a Runtime sees of its signal queue (control/signals/batch.py)."""

    #: Transactions committed (for the bench and the tests).
    batches: int

    async def close(self) -> None: ...


@dataclass
class Runtime:
    """The handles one control-plane process shares, and the publishing of its documents."""

    settings: Settings
    keys: Keys
    sessions: Sessions
    publisher: Publisher
    provisioner: Provisioner
    #: Agent credentials, cached so that polls need no database read (at most BOUND old).
    credentials: Credentials = field(default_factory=Credentials)
    #: server id -> serial of the document this process last handed to the publisher.
    published: dict[str, int] = field(default_factory=dict)
    #: The queue result signals are applied from in batches, made on the first signal.
    signal_batch: SignalQueue | None = None
    #: The process is stopping: long-polls answer at once rather than hold its shutdown.
    stopping: bool = False
    #: This process's Prometheus instruments, in a registry of its own (control/metrics.py).
    metrics: Metrics = field(default_factory=Metrics)
    #: Consulted for a token that is none of Anneal's (control/api/principal.py says how to plug one in).
    validator: TokenValidator | None = None
    #: Other processes listen for this one's changes (PostgreSQL NOTIFY, control/store/notify.py).
    announce: bool = False
    #: server id -> time.time() of its agent's last document poll here, not yet written (services/alive.py).
    polled: dict[str, float] = field(default_factory=dict)
    #: This process's name in its notifications, so that it skips its own.
    origin: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    #: The data dir's key files as last looked at (control/keys.py ``stamp``).
    key_stamp: tuple[int, ...] = ()

    def follow_key_rotation(self) -> None:
        """Sign with the key another process on this data dir rotated to: a stat, a read when it moved."""
        now = keyfiles.stamp(self.settings.data_dir)
        if now == self.key_stamp:
            return
        self.key_stamp = now
        newer = keyfiles.rotated_elsewhere(self.settings.data_dir, self.keys)
        if newer is not None:
            log.info("signing key rotated by another process: %s -> %s", self.keys.key_id, newer.key_id)
            self.keys = newer

    async def publish(self, server_ids: Iterable[str], *, announce: bool = True) -> None:
        """Render, sign and hand each server's document to the publisher; re-sign those near expiry.

        Called right after the commit that changed them; with *announce*, the other
        processes on the database are told first, so they render theirs meanwhile.
        Servers go in chunks of PUBLISH_CHUNK, each read in its own session: a stack of
        10,000 servers never holds every deployment row in memory at once.
        """
        ids = sorted(set(server_ids))
        # Every change these documents carry is committed by now: the long-polls they wake check their
        # credential by a revocation-counter read started after this instant (agents.check_still_held),
        # the first of them starting the one they share. Started here instead, it cost a read per
        # publish, Swift's and S3's too, for no gain at 1,000 agents (docs/performance.md).
        at = self.credentials.clock()
        self.follow_key_rotation()
        if announce and self.announce and ids:
            try:
                await notify.send(self.sessions, self.origin, ids)
            except (DBAPIError, OSError) as e:  # the other processes' table poll finds them later
                log.warning("telling other processes of %d changed document(s) failed: %s", len(ids), e)
        for start in range(0, len(ids), PUBLISH_CHUNK):
            await self._publish(ids[start : start + PUBLISH_CHUNK], at)

    async def _publish(self, ids: list[str], at: float) -> None:
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
                select(DeploymentRow)
                .where(DeploymentRow.server_id.in_(ids), DeploymentRow.item.is_not(None))
                .options(RENDERED)
            )
            by_server: dict[str, list[DeploymentRow]] = {}
            for row in rows:
                by_server.setdefault(row.server_id, []).append(row)
        for server_id in ids:
            server = servers.get(server_id)
            if server is None:
                await self.publisher.withdraw(server_id)
                self.published.pop(server_id, None)
                continue
            doc = render_document(server, by_server.get(server_id, []), self.settings.document_ttl)
            section = self.publisher.section(server, by_server.get(server_id, []))
            if section is not None:
                doc = dataclasses.replace(doc, transport=section)
            body = envelope.sign(doc.to_json(), self.keys.signing_key, self.keys.chain)
            await self.publisher.publish(server_id, doc.serial, body, at)
            self.metrics.documents_published.inc()
            self.published[server_id] = max(doc.serial, self.published.get(server_id, 0))

    async def publish_all(self) -> None:
        async with self.sessions() as session:
            ids = list(await session.scalars(select(ServerRow.id)))
        await self.publish(ids, announce=False)

    async def refresh_due(self) -> None:
        """Re-sign every document past half its lifetime (the serial moves, agents refetch)."""
        due = time.time() - self.settings.document_ttl / 2
        async with self.sessions() as session:
            ids = list(await session.scalars(select(ServerRow.id).where(ServerRow.serial_at < due)))
        await self.publish(ids)
