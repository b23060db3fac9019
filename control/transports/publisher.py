"""The publisher of a control plane with stores: where each document goes, where signals come from.

Every document is kept by the HTTP publisher that `Transports` holds (the control
plane's own long-poll, always available as the index an agent falls back to). A
server whose transport is SWIFT, S3, LOCAL or RELAY also gets its document written
to that store, with a ``transport`` section naming the URLs (or paths) of its next
document and of a signal object per waiting deployment; signal objects are collected
back from each store. docs/transports.md describes each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from sqlalchemy import update

from agent.wire import EXTRA_KEY
from control.documents.publish import DOCUMENT_CACHE, HttpPublisher, Publisher
from control.errors import BadRequestError
from control.runtime import Runtime
from control.store.orm import DeploymentRow, ServerRow
from control.transports.store import Lifetimes, Store, StoreError, Waiting, parse_signal_name
from control.txn import Txn

log = logging.getLogger(__name__)

KINDS = ("HTTP", "SWIFT", "S3", "LOCAL", "RELAY")
#: Heat's software_config_transport values and what they mean here.
HEAT_KINDS = {
    "POLL_SERVER_CFN": "HTTP",
    "POLL_SERVER_HEAT": "HTTP",
    "POLL_TEMP_URL": "SWIFT",
    "ZAQAR_MESSAGE": "HTTP",  # no Zaqar here: served as POLL_SERVER_HEAT is (docs/templates.md)
}
#: Capped exponential back-off of store writes and signal listings (seconds). The cap is
#: short: one control plane's retries cost the store little, and a return must be noticed
#: well within the agents' poll interval (R09: recovery <= poll_interval + the agents' cap).
BACKOFF_FIRST, BACKOFF_CAP = 0.5, 5.0
#: Documents written to a store at once.
WRITE_CONCURRENCY = 16


def normalize(value: Any, where: str) -> str:
    """Our transport kind for *value* (ours or Heat's); BadRequestError naming *where* otherwise."""
    if isinstance(value, str) and value.upper() in (*KINDS, *HEAT_KINDS):
        upper = value.upper()
        return HEAT_KINDS.get(upper, upper)
    allowed = ", ".join((*KINDS, *HEAT_KINDS))
    raise BadRequestError(f"transport {value!r} is not one of {allowed}", where=where)


def nearest_kind(publisher: Publisher, value: Any, where: str) -> tuple[str, str]:
    """Our kind for a software_config_transport, and a note when Heat's own service is not here."""
    kind = normalize(value, where)
    upper = str(value).upper()
    if upper == "ZAQAR_MESSAGE":
        return kind, (
            "software_config_transport ZAQAR_MESSAGE: this control plane has no Zaqar; the document is "
            "served as for POLL_SERVER_HEAT (our agent: HTTP; Heat's agents: the `heat` collector)"
        )
    if upper == "POLL_TEMP_URL" and not (isinstance(publisher, Transports) and "SWIFT" in publisher.stores):
        return "HTTP", (
            "software_config_transport POLL_TEMP_URL: no Swift store is configured; our agent polls "
            "over HTTP, Heat's `request` collector polls this control plane's metadata URL"
        )
    return kind, ""


def http_publisher(publisher: Publisher) -> HttpPublisher | None:
    """The HTTP publisher behind *publisher*: the documents the control plane serves itself."""
    if isinstance(publisher, Transports):
        return publisher.http
    return publisher if isinstance(publisher, HttpPublisher) else None


def published_section(publisher: Publisher, server_id: str) -> dict[str, Any]:
    """The ``transport`` section of the document just published for *server_id* (HTTP when none).

    Enrolment hands it to the agent, so that its first document already comes from
    the transport it is assigned, not from wherever it enrolled.
    """
    http = http_publisher(publisher)
    published = http.get(server_id) if http is not None else None
    if published is None:
        return {"kind": "HTTP"}
    section = json.loads(published.body).get(EXTRA_KEY, {}).get("transport")
    return section if isinstance(section, dict) else {"kind": "HTTP"}


class _Writer:
    """The newest document per server, written to one store with capped back-off and jitter."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: dict[str, tuple[int, bytes | None]] = {}
        self.written: dict[str, int] = {}
        self.wake = asyncio.Event()
        self.failures = 0

    def offer(self, server_id: str, serial: int, body: bytes | None) -> None:
        queued = self.pending.get(server_id)
        if body is not None and (
            (queued is not None and queued[0] > serial) or self.written.get(server_id, -1) > serial
        ):
            return  # never overwrite a newer document with an older one
        self.pending[server_id] = (serial, body)
        self.wake.set()

    async def _write(self, server_id: str, serial: int, body: bytes | None) -> StoreError | None:
        try:
            if body is None:
                await self.store.delete_document(server_id)
            else:
                await self.store.put_document(server_id, body)
        except StoreError as e:
            return e
        if self.pending.get(server_id) == (serial, body):
            del self.pending[server_id]
        if body is not None:
            self.written[server_id] = max(serial, self.written.get(server_id, -1))
        return None

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if not self.store.ready():
                continue  # on_ready re-publishes everything
            items = list(self.pending.items())
            error: StoreError | None = None
            for i in range(0, len(items), WRITE_CONCURRENCY):
                batch = items[i : i + WRITE_CONCURRENCY]
                errors = [e for e in await asyncio.gather(*(self._write(k, *v) for k, v in batch)) if e]
                if errors:
                    error = errors[0]
                    break
            if error is None:
                if self.failures:
                    log.warning("%s: writable again after %d failed tries", self.store.kind, self.failures)
                self.failures = 0
                continue
            self.failures += 1
            delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** min(self.failures, 10)) * random.uniform(0.5, 1.0)
            log.warning(
                "%s: %d documents not written (%s); retrying in %.1f s",
                self.store.kind,
                len(self.pending),
                error,
                delay,
            )
            await asyncio.sleep(delay)
            self.wake.set()


class Transports:
    """The publisher of a control plane with stores: HTTP for every server, plus its store."""

    def __init__(self, stores: Iterable[Store], lifetimes: Lifetimes, cache: int = DOCUMENT_CACHE) -> None:
        #: Every document, served by the control plane itself: the index every agent falls back to.
        self.http = HttpPublisher(cache)
        self.stores = {s.kind: s for s in stores}
        self.lifetimes = lifetimes
        self._writers = {kind: _Writer(store) for kind, store in self.stores.items()}
        self._routes: dict[str, tuple[str, ...]] = {}
        self._expires: dict[str, float] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def check_kind(self, kind: str, where: str) -> None:
        """A server may only use a store this control plane is configured for."""
        if kind != "HTTP" and kind not in self.stores:
            raise BadRequestError(
                f"transport {kind} is not configured on this control plane (see docs/transports.md)",
                where=where,
            )

    def section(self, server: ServerRow, rows: Iterable[DeploymentRow]) -> dict[str, Any]:
        """The document's ``transport`` section; also decides which stores get the document."""
        previous = [k for k in server.transport_previous.split(",") if k]
        self._routes[server.id] = tuple(
            k for k in dict.fromkeys((server.transport, *previous)) if k in self.stores
        )
        store = self.stores.get(server.transport)
        if store is None or not store.ready():
            self._expires.pop(server.id, None)
            return {"kind": "HTTP"}
        waiting = [
            Waiting(r.item_id, r.id, r.generation)
            for r in rows
            if r.status == "IN_PROGRESS" and r.item_id is not None
        ]
        expires = int(time.time() + self.lifetimes.total)
        self._expires[server.id] = expires
        return store.section(server.id, waiting, expires)

    def signal_url(self, kind: str, deployment_id: str, generation: int) -> str | None:
        """A store PUT URL for one deployment generation's signal (Heat's TEMP_URL_SIGNAL uses SWIFT's).

        Whatever is PUT there is collected and recorded like any signal of that generation.
        None when *kind* is not configured or not reachable yet.
        """
        store = self.stores.get(kind)
        if store is None or not store.ready():
            return None
        expires = int(time.time() + self.lifetimes.total)
        target = store.section("", [Waiting("x", deployment_id, generation)], expires)["signals"]["x"]
        return str(target["url"]) if "url" in target else None

    async def publish(self, server_id: str, serial: int, body: bytes, at: float | None = None) -> None:
        await self.http.publish(server_id, serial, body, at)
        for kind in self._routes.get(server_id, ()):
            self._writers[kind].offer(server_id, serial, body)

    async def withdraw(self, server_id: str) -> None:
        await self.http.withdraw(server_id)
        for kind in self._routes.pop(server_id, ()):
            self._writers[kind].offer(server_id, 0, None)
        self._expires.pop(server_id, None)

    def due_for_refresh(self) -> list[str]:
        now = time.time()
        return sorted(sid for sid, exp in self._expires.items() if self.lifetimes.due(exp, now))

    def pending_writes(self) -> int:
        return sum(len(w.pending) for w in self._writers.values())

    async def start(
        self,
        on_ready: Callable[[], Awaitable[None]],
        refresh: Callable[[list[str]], Awaitable[None]],
        intake: Callable[[str, str, int, bytes], Awaitable[None]],
        signal_poll: float,
    ) -> None:
        for store in self.stores.values():
            await store.start(on_ready)
        for writer in self._writers.values():
            self._tasks.append(asyncio.create_task(writer.run()))
        self._tasks.append(asyncio.create_task(self._refresh_loop(refresh)))
        for store in self.stores.values():
            self._tasks.append(asyncio.create_task(self._collect_loop(store, intake, signal_poll)))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for store in self.stores.values():
            await store.close()

    async def _refresh_loop(self, refresh: Callable[[list[str]], Awaitable[None]]) -> None:
        period = max(1.0, min(300.0, self.lifetimes.need / 8))
        while True:
            await asyncio.sleep(period)
            due = self.due_for_refresh()
            if due:
                log.info("refreshing store URLs of %d servers", len(due))
                try:
                    await refresh(due)
                except Exception:
                    log.exception("refreshing store URLs failed; next try in %.0f s", period)

    async def _collect_loop(
        self, store: Store, intake: Callable[[str, str, int, bytes], Awaitable[None]], period: float
    ) -> None:
        """List the store's signal objects (only new ones: each is deleted once imported)."""
        failures = 0
        while True:
            delay = period
            if store.ready():
                try:
                    await collect(store, intake)
                    failures = 0
                except StoreError as e:
                    failures += 1
                    delay = min(BACKOFF_CAP, period * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                    log.warning(
                        "%s: collecting signals failed (%s); retrying in %.1f s", store.kind, e, delay
                    )
            await asyncio.sleep(delay)


async def collect(store: Store, intake: Callable[[str, str, int, bytes], Awaitable[None]]) -> int:
    """Import every signal object in *store* once, then delete it; returns how many were seen."""
    seen = 0
    while True:
        names = await store.list_signals(1000)
        if not names:
            return seen
        for name in names:
            seen += 1
            parsed = parse_signal_name(name)
            body = await store.get_signal(name)
            if parsed is None:
                log.error("%s: signal object %r is not <deployment>/<generation>; deleted", store.kind, name)
            elif body is not None:
                await intake(store.kind, parsed[0], parsed[1], body)
            await store.delete_signal(name)
        if len(names) < 1000:
            return seen


def assign(txn: Txn, server: ServerRow, value: Any, where: str) -> None:
    """Move *server* to the transport named by *value* (ours or Heat's).

    An enrolled server keeps getting its document on the transports it left until
    its agent is seen on the new one (a signal or heartbeat through it), so the
    agent finds the document that names the new transport wherever it polls.
    """
    kind = normalize(value, where)
    publisher = txn.runtime.publisher
    if isinstance(publisher, Transports):
        publisher.check_kind(kind, where)
    elif kind != "HTTP":
        raise BadRequestError(
            f"transport {kind} is not configured on this control plane (see docs/transports.md)", where=where
        )
    if kind == server.transport:
        return
    previous = [k for k in server.transport_previous.split(",") if k and k != kind]
    if server.status == "ENROLLED" and server.transport not in previous:
        previous.append(server.transport)
    server.transport_previous = ",".join(previous[-3:])
    server.transport = kind
    txn.publish.add(server.id)


async def arrived_via(rt: Runtime, server_id: str, kind: str) -> None:
    """The agent of *server_id* is using *kind*: stop publishing to the transports it left."""
    async with rt.sessions() as session:
        changed = await session.execute(
            update(ServerRow)
            .where(ServerRow.id == server_id, ServerRow.transport == kind, ServerRow.transport_previous != "")
            .values(transport_previous="")
        )
        await session.commit()
    if changed.rowcount:  # type: ignore[attr-defined]
        log.info("server %s switched to %s; no longer publishing to its previous transports", server_id, kind)
        await rt.publish([server_id])
