"""One unit of work: a database transaction plus what to do once it commits."""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import insert, inspect, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.util import identity_key

from control.runtime import Runtime
from control.store import work
from control.store.db import rolled_back
from control.store.orm import EventRow, ServerRow, StackRow

T = TypeVar("T")
P = ParamSpec("P")
#: Times a transaction that lost a race on a versioned row (``row_version``) is run again.
RACE_ATTEMPTS = 5
#: First key of the PostgreSQL advisory locks on stacks' event streams (the second is the
#: stack id's hash); see ``lock_event_streams``.
EVENT_STREAM_LOCK = 0x416E6E  # "Ann"


async def lock_event_streams(session: AsyncSession, stack_ids: Iterable[str], *, shared: bool) -> None:
    """Order a stack's events by commit for readers that follow them by id (PostgreSQL).

    Event ids come from a sequence when a row is inserted, so on PostgreSQL a
    transaction may commit id 12 while id 11 is still uncommitted in another; a
    reader that has seen 12 asks for events after 12 and never sees 11. Writers hold
    the stack's lock shared from inserting their events to their commit (they never
    wait on each other); a reader takes it exclusively before it reads, so it waits
    for the writers whose ids are already taken and reads only once each smaller id
    is committed or rolled back. The locks end with the transaction. SQLite has one
    writer at a time, from its first write to its commit: ids are in commit order.
    """
    if work.dialect(session) != "postgresql":
        return
    ids = sorted(set(stack_ids))  # one order everywhere: no lock-order deadlock
    if not ids:
        return
    # One statement for all: unnest yields the array's elements in its order, and the locks
    # are taken row by row as they come (a batch of 200 nested stacks took 200 round trips).
    await session.execute(_STREAM_LOCKS[shared], {"cls": EVENT_STREAM_LOCK, "ids": ids})


#: By ``shared``: each lock of the array's stack ids, in the array's order.
_STREAM_LOCKS = {
    True: text(
        "SELECT pg_advisory_xact_lock_shared(:cls, hashtext(s.id)) FROM unnest(CAST(:ids AS text[])) AS s(id)"
    ),
    False: text(
        "SELECT pg_advisory_xact_lock(:cls, hashtext(s.id)) FROM unnest(CAST(:ids AS text[])) AS s(id)"
    ),
}


def retried_on_race(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Run *fn* (one transaction) again when it lost a race on a versioned row (or a deadlock).

    The engine steps a stack while requests change it: each writes the stack's (a
    resource's, a deployment's) ``row_version``, so only one commits and the other
    gets ``StaleDataError``. The loser reads the rows afresh and decides again (a
    delete of a stack a step just finished is still a delete), after a short random
    pause so two losers do not collide again; after RACE_ATTEMPTS the error stands
    (the API answers 503 with Retry-After). A PostgreSQL deadlock or serialization
    failure is the same kind of loss (``store.db.rolled_back``).
    """

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, RACE_ATTEMPTS + 1):
            try:
                return await fn(*args, **kwargs)
            except Exception as e:
                if attempt == RACE_ATTEMPTS or not rolled_back(e):
                    raise
                await asyncio.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")

    return run


@dataclass
class Txn:
    session: AsyncSession
    runtime: Runtime
    publish: set[str] = field(default_factory=set)
    kicks: set[str] = field(default_factory=set)
    later: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: Work done at the start of ``commit``, inside the transaction (set-based writes gathered
    #: from many rows, e.g. the resources of every nested stack a step deletes, in one statement).
    before: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: Rows this transaction added, by (class, primary key or another key): found without a flush.
    created: dict[tuple[type, Hashable], Any] = field(default_factory=dict)
    #: Events (EventRow's columns), inserted by ``write_events`` (at the latest in ``commit``) under their streams' locks.
    events: list[dict[str, Any]] = field(default_factory=list)
    #: What a step read ahead for its handlers in one query, each value taken once (``nested.child_state``).
    ahead: dict[Hashable, Any] = field(default_factory=dict)
    #: What the step keeps across its slices' commits (``restart`` leaves it): the nested stacks it
    #: read ahead, the templates its handlers parsed, the definitions they built (``nested.built``).
    kept: dict[Hashable, Any] = field(default_factory=dict)
    #: Called after every commit, a sliced step's too (``restart`` leaves them).
    committed: list[Callable[[Txn], None]] = field(default_factory=list)

    def add(self, row: Any, *keys: Hashable) -> None:
        """Add a new row; ``get`` (and ``created_row`` by *keys*) find it without flushing.

        Looking a pending row up through the session would flush every row added so
        far first (autoflush): a stack of 10,000 servers then flushed 10,000 times in
        small batches instead of once, in one batched INSERT per table.
        """
        self.session.add(row)
        for key in (row.id, *keys):
            if key is not None:  # an autoincrement id is known only after the flush
                self.created[(type(row), key)] = row

    def created_row(self, cls: type[T], key: Hashable) -> T | None:
        found = self.created.get((cls, key))
        return found if found is not None and found in self.session else None

    async def get(self, cls: type[T], key: Any) -> T | None:
        """``session.get``, finding rows added in this transaction without a flush.

        A row not in the session is read without flushing first (a row loaded by its
        key depends on no pending change but its own insert, which ``created`` finds):
        a step that loads each deployment it acts on otherwise flushed once per load.
        """
        found = self.created_row(cls, key)
        if found is not None:
            return found
        # A row the session holds (loaded ahead by the step): what session.get answers, without
        # its hop through SQLAlchemy's greenlet (tens of microseconds, paid per resource deleted).
        held = self.session.sync_session.identity_map.get(identity_key(cls, key))
        if held is not None and not inspect(held).expired:
            return held
        with self.session.no_autoflush:
            return await self.session.get(cls, key)

    def event(
        self,
        stack_id: str,
        resource_name: str,
        action: str,
        status: str,
        reason: str = "",
        *,
        traversal: int = 0,
        deployment_id: str | None = None,
        generation: int | None = None,
        gone: StackRow | None = None,
    ) -> None:
        """Record an event, inserted at the commit. *gone*: the stack this event ends (its delete's
        COMPLETE), whose name and parent the event keeps: its events stay found by its name."""
        self.events.append(
            {
                "stack_id": stack_id,
                "stack_name": gone.name if gone is not None else "",
                "parent_stack_id": gone.parent_id if gone is not None else None,
                "resource_name": resource_name,
                "deployment_id": deployment_id,
                "generation": generation,
                "traversal": traversal,
                "action": action,
                "status": status,
                "reason": reason,
                "timestamp": time.time(),
            }
        )

    async def commit(self, kick: Callable[[str], None] | None = None) -> None:
        """Commit, then publish documents, run deferred work and wake the engine.

        Every stack in ``kicks`` gets its durable work row (control/store/work.py) in this
        same transaction; *kick* only wakes this process's claim loop early.
        """
        for first in self.before:
            await first()
        if self.kicks:
            await work.request(self.session, self.kicks)
        if self.publish:
            # One serial bump per transaction: the document agents see changes exactly once.
            await self.session.execute(
                update(ServerRow)
                .where(ServerRow.id.in_(sorted(self.publish)))
                .values(serial=ServerRow.serial + 1, serial_at=time.time())
                # Only the rows it matched are brought up to date in the session ("evaluate",
                # the default, tests the IN list against every server the session holds: a
                # sliced step of 10,000 servers did that 10,000 x 333 times per slice).
                .execution_options(synchronize_session="fetch")
            )
        await self.write_events()
        await self.session.commit()
        for hook in self.committed:
            hook(self)
        if self.publish:
            await self.runtime.publish(self.publish)
        for job in self.later:
            await job()
        if kick is not None:
            for stack_id in self.kicks:
                kick(stack_id)

    async def write_events(self) -> None:
        """Insert the events so far, their streams locked until the commit.

        ``commit`` calls it last, so the locks are held only for its final flush; call it
        earlier only when a statement of this transaction must see the events.
        """
        if self.events:
            await lock_event_streams(self.session, (e["stack_id"] for e in self.events), shared=True)
            # One executemany, not ORM objects: the unit of work wants each new row's id back,
            # which on SQLite costs one INSERT per event (13x slower for 1,000: bench/events.py);
            # nothing reads an event's id in the writer.
            # Core, not the ORM's bulk insert, which groups rows by the keys whose value is not None
            # and sends one INSERT per run of a group: events alternating with and without a
            # deployment (nested stacks stepped together) went one statement each.
            connection = await self.session.connection()
            await connection.execute(insert(EventRow), self.events)
            self.events = []

    def restart(self) -> None:
        """After ``commit``: go on in the same session with a new unit of work.

        What the committed unit published, kicked and added is done; a sliced
        engine step (the engine's ``_Slices``) must not publish it again.
        """
        self.publish, self.kicks, self.later, self.created, self.ahead = set(), set(), [], {}, {}
        self.before = []
