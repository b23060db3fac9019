"""Publishers: where per-server documents go once the database holds them.

A publisher is a projection of database state: `runtime.publish` renders the
document from the database after every commit that changes it, and on start.
The HTTP publisher keeps the newest bytes per server in memory and wakes the
agents' long-polls; `control.transports.publisher.Transports` implements the same
port: it holds an HTTP publisher and also writes to the object stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.store.orm import DeploymentRow, ServerRow

#: How many servers' signed documents the HTTP publisher keeps in memory (about 7.5 KB each with
#: five deployments): the servers that changed last, whose agents fetch them next.
DOCUMENT_CACHE = 20_000


class Publisher(Protocol):
    def section(self, server: ServerRow, rows: Iterable[DeploymentRow]) -> dict[str, Any] | None:
        """The document's ``transport`` section for *server* (None: documents name no transport)."""

    async def publish(self, server_id: str, serial: int, body: bytes, at: float | None = None) -> None:
        """Hand over *server_id*'s document of *serial*; *at* (time.monotonic()) is when the change
        it carries was known committed (default: now): a woken long-poll's credential check needs a
        revocation-counter read started no earlier."""

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
    """Documents served by the control plane itself, with ETag and long-poll.

    Every server's serial stays in memory (what a no-change poll compares), but only the newest
    *cache* documents' bytes: a fleet of 200,000 servers would hold 1.5 GB of signed documents.
    A document read after its bytes left is rendered again from the database (`get` gives None).
    """

    def __init__(self, cache: int = DOCUMENT_CACHE) -> None:
        self._serials: dict[str, tuple[int, float]] = {}
        self._bodies: OrderedDict[str, bytes] = OrderedDict()
        self._cache = cache
        self._changed: dict[str, asyncio.Future[Published | None]] = {}
        self._closing = False
        #: Long-polls held per server (``answering``), and those a publish woke whose request has not
        #: answered yet: what ``answered`` lets run before the engine's walk goes on.
        self._parked: dict[str, set[object]] = {}
        self._woken: set[object] = set()
        self._all_answered: asyncio.Future[None] | None = None

    def section(self, server: ServerRow, rows: Iterable[DeploymentRow]) -> dict[str, Any] | None:
        return None  # HTTP only: the agent keeps polling where it enrolled

    async def publish(self, server_id: str, serial: int, body: bytes, at: float | None = None) -> None:
        current = self._serials.get(server_id)
        if current is not None and (
            current[0] > serial or (current[0] == serial and server_id in self._bodies)
        ):
            return  # unchanged, or a slower render of an older state: never go backwards
        # The same serial rendered again (its bytes had left the cache) keeps the time it was published.
        doc = (
            Published(serial, body, time.monotonic() if at is None else at)
            if current is None or current[0] < serial
            else Published(serial, body, current[1])
        )
        self._serials[server_id] = (serial, doc.at)
        self._bodies[server_id] = body
        self._bodies.move_to_end(server_id)
        while len(self._bodies) > self._cache:
            self._bodies.popitem(last=False)
        self._wake(server_id, doc)  # the waiters get the bytes even if the cache drops them next

    def _wake(self, server_id: str, doc: Published | None) -> None:
        waiting = self._changed.pop(server_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(doc)
        self._woken |= self._parked.pop(server_id, set())

    @contextlib.contextmanager
    def answering(self, server_id: str) -> Iterator[None]:
        """Around a long-poll's request for *server_id*, up to its response: ``answered`` waits for it
        once a publish has woken it."""
        ticket = object()
        self._parked.setdefault(server_id, set()).add(ticket)
        try:
            yield
        finally:
            parked = self._parked.get(server_id)
            if parked is not None:
                parked.discard(ticket)
                if not parked:
                    del self._parked[server_id]
            self._woken.discard(ticket)
            done = self._all_answered
            if not self._woken and done is not None and not done.done():
                done.set_result(None)

    async def answered(self, bound: float) -> None:
        """Return once every long-poll the publishes so far woke has its response, or after *bound* s.

        The engine's walk runs on the same event loop and yields only at its next database
        round trip: a slice's woken long-polls then waited behind the next slice's acts.
        """
        if not self._woken:
            return
        if self._all_answered is None or self._all_answered.done():
            self._all_answered = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(bound):
                await asyncio.shield(self._all_answered)

    async def withdraw(self, server_id: str) -> None:
        self._serials.pop(server_id, None)
        self._bodies.pop(server_id, None)
        self._wake(server_id, None)

    def release_waiters(self) -> int:
        """The control plane stops: answer every held long-poll now (unchanged), hold no new one."""
        self._closing = True
        waiting, self._changed = list(self._changed.values()), {}
        for future in waiting:
            if not future.done():
                future.set_result(None)
        return len(waiting)

    def waits(self, server_id: str) -> bool:
        """True while a long-poll held here waits for the server's next document."""
        waiting = self._changed.get(server_id)
        return waiting is not None and not waiting.done()

    def etag(self, server_id: str) -> str | None:
        """The ETag of the server's newest document here (its bytes may have left the cache)."""
        current = self._serials.get(server_id)
        return f'"{current[0]}"' if current is not None else None

    def get(self, server_id: str) -> Published | None:
        """The newest document, or None when there is none or its bytes left the cache."""
        current, body = self._serials.get(server_id), self._bodies.get(server_id)
        if current is None or body is None:
            return None
        self._bodies.move_to_end(server_id)
        return Published(current[0], body, current[1])

    async def wait_newer(self, server_id: str, etag: str, timeout: float) -> Published | None:
        """The document once its ETag differs from *etag*; None after *timeout*, or when it is
        withdrawn or the control plane stops meanwhile."""
        doc = self.get(server_id)
        if doc is not None and doc.etag != etag:
            return doc
        if self._closing:
            return None
        waiting = self._changed.get(server_id)
        if waiting is None or waiting.done():
            waiting = self._changed[server_id] = asyncio.get_running_loop().create_future()
        try:  # shielded: one waiter's timeout does not cancel the others' future
            async with asyncio.timeout(timeout):
                found = await asyncio.shield(waiting)
        except TimeoutError:
            return None
        return found if found is not None and found.etag != etag else None
