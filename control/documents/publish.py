"""Publishers: where per-server documents go once the database holds them.

A publisher is a projection of database state: `runtime.publish` renders the
document from the database after every commit that changes it, and on start.
The HTTP publisher keeps the newest bytes per server in memory and wakes the
agents' long-polls; `control.transports.publisher.Transports` implements the same
port: it holds an HTTP publisher and also writes to the object stores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.store.orm import DeploymentRow, ServerRow


class Publisher(Protocol):
    def section(self, server: ServerRow, rows: Iterable[DeploymentRow]) -> dict[str, Any] | None:
        """The document's ``transport`` section for *server* (None: documents name no transport)."""

    async def publish(self, server_id: str, serial: int, body: bytes) -> None: ...
    async def withdraw(self, server_id: str) -> None: ...


@dataclass(frozen=True)
class Published:
    serial: int
    body: bytes
    #: time.monotonic() when this process published it (what a woken long-poll re-checks against).
    at: float = field(default_factory=time.monotonic, compare=False)

    @property
    def etag(self) -> str:
        return f'"{self.serial}"'


class HttpPublisher:
    """Documents served by the control plane itself, with ETag and long-poll."""

    def __init__(self) -> None:
        self._docs: dict[str, Published] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._closing = False

    def section(self, server: ServerRow, rows: Iterable[DeploymentRow]) -> dict[str, Any] | None:
        return None  # HTTP only: the agent keeps polling where it enrolled

    async def publish(self, server_id: str, serial: int, body: bytes) -> None:
        current = self._docs.get(server_id)
        if current is not None and current.serial >= serial:
            return  # unchanged, or a slower render of an older state: never go backwards
        self._docs[server_id] = Published(serial, body)
        event = self._changed.pop(server_id, None)
        if event is not None:
            event.set()

    async def withdraw(self, server_id: str) -> None:
        self._docs.pop(server_id, None)
        event = self._changed.pop(server_id, None)
        if event is not None:
            event.set()

    def release_waiters(self) -> int:
        """The control plane stops: answer every held long-poll now (unchanged), hold no new one."""
        self._closing = True
        events, self._changed = list(self._changed.values()), {}
        for event in events:
            event.set()
        return len(events)

    def get(self, server_id: str) -> Published | None:
        return self._docs.get(server_id)

    async def wait_newer(self, server_id: str, etag: str, timeout: float) -> Published | None:
        """Return the document once its ETag differs from *etag*, or None after *timeout*."""
        doc = self._docs.get(server_id)
        if doc is not None and doc.etag != etag:
            return doc
        if self._closing:
            return None
        event = self._changed.setdefault(server_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return None
        doc = self._docs.get(server_id)
        return doc if doc is not None and doc.etag != etag else None
