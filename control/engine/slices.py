"""The big-stack memory strategy: a step over many resources commits slice by slice.

A step holds a light record (``Light``) of each resource it does not act on, loads a
slice's full rows when the slice starts and lets them go once it commits (``Slices``).
``preload`` loads what the handlers of a step that acts will look up.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm.exc import StaleDataError

from control import hot
from control.engine import lifecycle
from control.engine.light import Light, Row, done, lights
from control.engine.settle import in_session
from control.resources import DEPLOYMENT_TYPES, HANDLERS, nested
from control.store import work
from control.store.orm import ConfigRow, DeploymentRow, ResourceRow, ServerRow, StackRow
from control.transports.publisher import http_publisher
from control.txn import Txn

T = TypeVar("T")
#: A step of a stack with more resources than this commits every SLICE resources it acts on (Slices).
SLICE = 2000
#: Every walk commits (and so publishes its documents) once it acted on ``settings.step_slice``
#: resources since its last commit, or this long (seconds) after the first of them, or twice as
#: long as its last commit took if that is longer (on a loaded machine each commit's own database
#: round trips cost tens of ms: they stay about a third of the step at most): a deployment's
#: document leaves while the rest of the step is still being written, not after it (Slices.tick).
COMMIT_AFTER = 0.02
#: A slice whose documents no agent was waiting for (no long-poll held here for any of its servers)
#: makes the next one twice as long, in count and in time, up to SLICE resources and this many
#: seconds: a big step nobody watches commits about as seldom as an unsliced one (each commit's
#: fence, version read, flush and publish cost a 50,000-deployment create 25 %), while the first
#: slices of any step, and every slice agents wait on, stay short (Slices.tick).
GROWN_AFTER = 1.0
#: How long (seconds) a slice's commit waits for the long-polls it woke to have their responses
#: (HttpPublisher.answered): they need the event loop the walk would otherwise keep.
ANSWER_BOUND = 0.1
SERVER_TYPES = hot.SERVER_TYPES


class Slices:
    """A step commits as it goes: a big stack's every ``SLICE`` resources, any walk's every few ms.

    One transaction for a whole 50,000-deployment stack held every new row, its
    decrypted values and the flush's parameters in memory at once (1 GB), and
    loaded every resource and deployment of the stack (with their decrypted
    properties and derived configs) for an update that touches a tenth of them.
    A sliced step acts on one slice and commits it (fenced by the lease, like the
    step's own commit) before the next. What it holds across slices is a light
    record per resource (``Light``); a slice's full rows are loaded when it
    starts (``realize``, ``load``) and let go once it commits (``settle``), with
    the deployments of those rows, in one query each. Each commit publishes the
    slice's documents, so agents start while later slices are still being
    written. The stack's version is read before every slice's commit: a stack
    updated meanwhile ends the step (``StaleDataError``, the step is retried
    against the new definition), so nothing more of the old traversal starts. A
    crash between slices leaves the committed slices, as a crash between two
    steps would. A stack of ``SLICE`` resources or fewer is stepped with full rows
    (its delete with light records, each loaded in full only to be deleted); so is
    a SUSPEND or RESUME, and a step that finds a failed resource (a rollback
    rewrites rows across the stack).

    Any walk, whatever the stack's size, also commits every ``settings.step_slice``
    resources it acts on or ``COMMIT_AFTER`` seconds after the first of them (``tick``):
    a document leaves tens of milliseconds after the step stamped its deployment, not
    after the whole step.
    """

    def __init__(
        self,
        txn: Txn,
        stack: StackRow,
        size: int,
        *,
        claim: work.Claim,
        lease: float,
        kick: Callable[[str], None],
        whole: bool = False,
    ) -> None:
        self._txn, self._stack = txn, stack
        self._claim, self._lease, self._kick = claim, lease, kick
        self.sliced = size > SLICE
        #: True when the step holds Light records instead of full rows.
        self.light = False
        #: Resources acted on since the last commit.
        self.acted = 0
        #: time.monotonic() of the first of them (what COMMIT_AFTER counts from).
        self._first = 0.0
        #: Resources acted on between two commits (0: none but the slices' and the step's own). *whole*:
        #: the transaction is shared with other stacks' steps (engine/batch.py), committed by its owner.
        self._every = 0 if whole else txn.runtime.settings.step_slice
        #: How long the last commit took (seconds; its woken long-polls' answers not counted): the
        #: next one comes at least twice that later.
        self._cost = 0.0
        #: How many times longer than ``_every`` and COMMIT_AFTER the slice may grow: doubled after a
        #: slice no agent waited on, back to 1 after one that an agent waited on.
        self._grown = 1
        self._http = http_publisher(txn.runtime.publisher)
        self._loaded: list[DeploymentRow] = []
        #: The servers the slice's resources name (a sliced step's own: a million deployments' 200,000
        #: servers, all held, were 0.65 GB of ORM objects: 3.3 KB each).
        self._servers: list[ServerRow] = []
        self._kept: list[ServerRow | ConfigRow] = []
        #: Full rows ``check`` read, until the walk or the cleanup takes them (``full``).
        self._checked: dict[int, ResourceRow] = {}

    async def rows(self) -> list[Row]:
        """The stack's resources: light records for a sliced walk or a delete, else full rows.

        A delete's step reads in full only the rows it deletes (``load``): a group's nested stack,
        stepped again as each batch of its members is gone, read every member still deleting
        (their properties and attributes decrypted) on each of those steps."""
        session, stack = self._txn.session, self._stack
        where = ResourceRow.stack_id == stack.id
        if (self.sliced or stack.action == "DELETE") and stack.action not in lifecycle.ACTIONS:
            light: list[Row] = [*await lights(session, where)]
            if not any(r.status == "FAILED" and r.traversal == stack.traversal for r in light):
                self.light = True
                return light
        return list(await session.scalars(select(ResourceRow).where(where)))

    def of(self, items: list[T]) -> list[list[T]]:
        """*items* in slices (all in one unless the step is sliced)."""
        if not self.sliced:
            return [items]
        return [items[start : start + SLICE] for start in range(0, len(items), SLICE)]

    async def full(self, ids: list[int], *, keep: bool = False) -> dict[int, ResourceRow]:
        """The full rows of these ids, in one query per SLICE. *keep*: held for the next call that
        wants them (a group's check reads its settled members' rows, then its cleanup deletes them),
        which takes them; only those are held, so the step holds no more than its check read."""
        out = {i: self._checked.pop(i) for i in ids if i in self._checked}
        wanted = [i for i in ids if i not in out]
        for start in range(0, len(wanted), SLICE):
            query = select(ResourceRow).where(ResourceRow.id.in_(wanted[start : start + SLICE]))
            out.update((r.id, r) for r in await self._txn.session.scalars(query))
        if keep:
            self._checked.update(out)
        return out

    async def realize(
        self,
        current: dict[str, Row],
        names: list[str],
        changing: Callable[[list[ResourceRow]], Awaitable[list[ResourceRow]]],
        requires: Callable[[str], Iterable[str]],
    ) -> None:
        """Replace the light records of *names* that may act in this traversal by full rows, and
        load the deployments of those *changing* keeps (the others act without theirs), and the
        servers they or what they require name."""
        traversal = self._stack.traversal
        # Those not made yet, and those neither done nor running on their server (which finish first).
        acting = [
            n
            for n in names
            if (r := current.get(n)) is None or not (done(r, traversal) or r.status == "IN_PROGRESS")
        ]
        light = [r for r in (current.get(n) for n in acting) if isinstance(r, Light)]
        full = await self.full([r.id for r in light])
        ordered = [full[r.id] for r in light if r.id in full]
        for row in ordered:
            current[row.name] = row
        # Their deployments in one query too: a handler finds its own in the session, not by a query
        # each; so do the servers what may act requires (a create's new deployments too).
        needed = (current.get(d) for n in acting for d in requires(n))
        servers = {
            r.physical_id for r in needed if r is not None and r.type in SERVER_TYPES and r.physical_id
        }
        await self._deployments(await changing(ordered) if ordered else [], ordered, servers)

    async def _deployments(
        self, rows: list[ResourceRow], acting: list[ResourceRow], servers: Iterable[str] = ()
    ) -> None:
        """Load the deployments of *rows* in one query, held until the next load (the map holds
        them weakly); in a sliced step also the servers those deployments, the servers among
        *acting* and *servers* name (an unsliced step's were preloaded)."""
        ids = [r.physical_id for r in rows if r.physical_id and r.type in DEPLOYMENT_TYPES]
        self._loaded, self._servers = [], []  # the previous slice's rows may go
        if ids:
            found = await self._txn.session.scalars(select(DeploymentRow).where(DeploymentRow.id.in_(ids)))
            self._loaded = list(found)
        if self.sliced:
            own = (r.physical_id for r in acting if r.type in SERVER_TYPES and r.physical_id)
            named = {*servers, *own, *(d.server_id for d in self._loaded if d.server_id)}
            self._servers = await _servers(self._txn, sorted(named))

    def settle(self, current: dict[str, Row], names: list[str]) -> None:
        """After a slice's commit: keep light records of *names* (the walk never acts on them again)."""
        if self.light:
            for n in names:
                row = current.get(n)
                if isinstance(row, ResourceRow):
                    current[n] = Light.of(row)

    async def old(self, rows: list[Row]) -> list[Row]:
        """Replaced and removed resources (read again after a sliced walk: it committed). A delete
        walks nothing: the rows read at the step's start are its own, as check left them (a group's
        nested stack read each of its members twice per step, stepped as each batch of them is gone)."""
        if not self.light or self._stack.action == "DELETE":
            return [r for r in rows if not r.current]
        return [
            *await lights(
                self._txn.session, ResourceRow.stack_id == self._stack.id, ResourceRow.current.is_(False)
            )
        ]

    async def load(self, rows: list[Row]) -> list[ResourceRow]:
        """Full rows of *rows* and their deployments, each in one query (a small step has them all)."""
        if not self.light:
            return [r for r in rows if isinstance(r, ResourceRow)]  # all of them: no light record
        full = await self.full([r.id for r in rows if isinstance(r, Light)])
        out = [
            r if isinstance(r, ResourceRow) else full[r.id]
            for r in rows
            if isinstance(r, ResourceRow) or r.id in full
        ]
        if self.sliced:  # (an unsliced step's were preloaded)
            await self._deployments(out, out)
        return out

    async def tick(self) -> None:
        """After an act: commit what the walk did so far once it is ``step_slice`` resources or
        ``COMMIT_AFTER`` seconds old (longer while no agent waits: GROWN_AFTER), in a stack of any
        size (``commit`` says what a commit checks)."""
        if not self.acted or self._every <= 0:
            return
        now = time.monotonic()
        if self.acted == 1:
            self._first = now
        grown = self._grown
        after = max(min(COMMIT_AFTER * grown, GROWN_AFTER), 2 * self._cost)
        if self.acted >= max(self._every, min(self._every * grown, SLICE)) or now - self._first >= after:
            awaited = self._awaited()
            await self._commit()
            self._grown = 1 if awaited else min(grown * 2, max(SLICE // self._every, 1))

    def _awaited(self) -> bool:
        """True when a long-poll held by this process waits for a document this slice changes.

        Another process's long-polls are not seen: a fleet spread over several processes
        has, with 20 servers a slice, almost surely one of them here.
        """
        http = self._http
        return http is not None and any(http.waits(s) for s in self._txn.publish)

    async def answered(self) -> None:
        """Once every long-poll held here that a commit woke has its response, or after ANSWER_BOUND s."""
        if self._http is not None:
            await self._http.answered(ANSWER_BOUND)

    async def commit(self) -> None:
        """Commit what the slice did (sliced steps only)."""
        if self.sliced and self.acted:
            await self._commit()

    async def _commit(self) -> None:
        """Commit, fenced by the lease, unless the stack was updated meanwhile (StaleDataError)."""
        session, stack, started = self._txn.session, self._stack, time.monotonic()
        version = await session.scalar(select(StackRow.version).where(StackRow.id == stack.id))
        if version != stack.version:
            raise StaleDataError(
                f"stack {stack.id} changed during the step (version {stack.version} -> {version})"
            )
        await work.fence(session, self._claim, self._lease)
        # A step the walk asked of its own stack waits for the step's end, which keeps it or,
        # once the stack settled, drops it: committed now, it would bump the work row's seq and
        # the stack would be stepped once more for nothing (its lease keeps the row meanwhile).
        again = stack.id in self._txn.kicks
        self._txn.kicks.discard(stack.id)
        await self._txn.commit(self._kick)
        self._cost = time.monotonic() - started
        await self.answered()  # the long-polls this commit woke answer before the walk goes on
        # Configs and servers later deployments look up stay in the identity map (a sliced step's
        # servers until its next slice, which reads those it needs: ``_deployments``); resources,
        # deployments and events go (the identity map holds rows weakly).
        for row in self._txn.created.values():
            if isinstance(row, ServerRow) and self.sliced:
                self._servers.append(row)
            elif isinstance(row, ServerRow | ConfigRow):
                self._kept.append(row)
        self._txn.restart()
        if again:
            self._txn.kicks.add(stack.id)
        self.acted = 0


async def preload(txn: Txn, stack_ids: list[str], rows: list[Row], sliced: bool) -> list[object]:
    """Load the stacks' configs, and unless *sliced* (then per slice: ``Slices``) their deployments
    and servers.

    Handlers then find them in the session instead of one query per resource; the
    returned list keeps them alive (the session's identity map holds weak references).
    """
    session, loaded = txn.session, list[object]()
    if not sliced:
        query = select(DeploymentRow).where(DeploymentRow.stack_id.in_(stack_ids))
        loaded += (await session.scalars(query)).all()
    loaded += (await session.scalars(select(ConfigRow).where(ConfigRow.stack_id.in_(stack_ids)))).all()
    if not sliced:
        loaded += await _servers(
            txn, [r.physical_id for r in rows if r.physical_id and r.type in SERVER_TYPES]
        )
    # The nested stacks of template resources (a group's members), for their update or delete; not
    # of those whose nested stack runs (their check reads its state alone: nested.read_states). A
    # group's nested stack, stepped again as each batch of its members settles, read all of them.
    children = [
        r.physical_id for r in rows if r.physical_id and r.type not in HANDLERS and r.status != "IN_PROGRESS"
    ]
    if children:
        await nested.read_children(txn, children)
    return loaded


async def _servers(txn: Txn, ids: list[str]) -> list[ServerRow]:
    """The servers of *ids*: those already in the session, the others read SLICE ids a query (one
    IN list of a million's 200,000 servers went past PostgreSQL's 32,767 parameters)."""
    found = [s for s in (in_session(txn, ServerRow, i) for i in ids) if s is not None]
    have = {s.id for s in found}
    wanted = [i for i in ids if i not in have]
    for start in range(0, len(wanted), SLICE):
        query = select(ServerRow).where(ServerRow.id.in_(wanted[start : start + SLICE]))
        found += (await txn.session.scalars(query)).all()
    return found
