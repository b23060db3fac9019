"""Sibling nested stacks stepped together: one transaction, one fence, one commit per batch.

Every nested stack is a unit of durable work of its own (its work row, lease, events,
traversal), so a group of N nested members paid the fixed cost of a step N times: the
claim, the reads of its stack row, resources, deployments, configs and servers, the
fence, the commit, the document publish and the release, each alone. Its members are
siblings (nested stacks of one parent), and a sibling never writes another's rows, so
the engine claims the due siblings of a claimed nested stack together (``gather``) and
steps them in one session (``step_batch``): each stack's step is the same ``step.run``
as alone, on rows read for all of them in one query per table, and all of them commit
at once, fenced by all their leases. A crash leaves all of the batch or none of it, as
for one step; a batch that fails in any way (a race, a lease lost, a bug) rolls back
whole and the worker steps its stacks one by one instead, so one member's failure
never holds back another's step. A stack and its parent are never in one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.engine import idle, purge, stackdef
from control.engine.light import Row
from control.engine.slices import SLICE, Slices, preload
from control.engine.step import STACK_WITHOUT_DEFINITION, Ran, run
from control.engine.timeouts import nearest
from control.runtime import Runtime
from control.store import bulk, work
from control.store.orm import DeploymentRow, ResourceRow, StackRow
from control.txn import Txn

#: Sibling stacks one batch steps at most (a member of a group: a server, a config and a few
#: deployments; 200 of them are fewer rows than one slice of a big stack's step).
BATCH = 200


async def gather(
    session: AsyncSession, claims: list[work.Claim], owner: str, lease: float, busy: set[str]
) -> list[list[work.Claim]]:
    """*claims* in batches: a nested stack's with its due siblings, claimed now; any other alone."""
    if not claims:
        return []
    found = await session.execute(
        select(StackRow.id, StackRow.parent_id).where(StackRow.id.in_([c.stack_id for c in claims]))
    )
    parents = {stack_id: parent for stack_id, parent in found}
    out: list[list[work.Claim]] = []
    by_parent: dict[str, list[work.Claim]] = {}
    for c in claims:
        parent = parents.get(c.stack_id)
        if parent is None:
            out.append([c])
        else:
            by_parent.setdefault(parent, []).append(c)
    taken = busy | {c.stack_id for c in claims}
    for parent, group in by_parent.items():
        if len(group) < BATCH:
            more = await work.claim_siblings(
                session, owner, lease, parent, BATCH - len(group), taken, group[0].token
            )
            group.extend(more)
            taken |= {c.stack_id for c in more}
        out += [group[start : start + BATCH] for start in range(0, len(group), BATCH)]
    return out


@dataclass
class Stepped:
    """A batch's outcome: (settled, nearest deadline) per stack stepped; those to step alone."""

    results: dict[str, tuple[bool, float | None]] = field(default_factory=dict)
    #: Stacks too big for a batch (their step commits slice by slice): stepped one by one.
    alone: list[work.Claim] = field(default_factory=list)


async def step_batch(
    rt: Runtime,
    defs: stackdef.Definitions,
    claims: list[work.Claim],
    *,
    lease: float,
    kick: Callable[[str], None],
) -> Stepped:
    """Step the claimed sibling stacks once each, in one transaction committed only while every
    lease holds. Raises whatever one of their steps raises (the caller then steps them alone)."""
    out = Stepped()
    async with rt.sessions() as session:
        # Changed deployments and resources go in one UPDATE per shape at each flush, for all of
        # the batch's stacks (control/store/bulk.py).
        bulk.on_flush(session.sync_session, (DeploymentRow, ResourceRow, StackRow))
        txn = Txn(session, rt, committed=[defs.adopt])
        stacks = await _stacks(session, defs, [c.stack_id for c in claims])
        rows = await _rows(session, list(stacks))
        mine = _sorted(claims, stacks, rows, defs, out)
        ids = [stack.id for _, stack, _ in mine]
        # What handlers look up, for the stacks where a resource may act, as step_stack does: a member
        # whose deployments all reported only settles (its five deployments, config and server, with
        # their encrypted columns, are not decoded). The session's identity map holds rows weakly:
        # this list keeps them until the commit.
        acting = [i for i in ids if idle.may_act(stacks[i], rows[i], _defined(stacks[i], defs))]
        keep_alive = await preload(txn, acting, [r for i in acting for r in rows[i]], False) if acting else []
        ahead = await idle.deadlines(session, ids)
        txn.ahead.update({(idle.DEADLINES, i): found for i, found in ahead.items()})
        ran: dict[str, Ran] = {}
        for c, stack, size in mine:
            # No commit inside a member's walk: the batch commits once, fenced by every member's lease.
            slices = Slices(txn, stack, size, claim=c, lease=lease, kick=kick, whole=True)
            ran[stack.id] = await run(txn, stack, defs, slices, rows[stack.id])
        await purge.purge(txn, defs, [stacks[i] for i, r in ran.items() if r.purge])
        await work.fence_many(session, [c for c, _, _ in mine], lease)
        await txn.commit(kick)
        del keep_alive
        # The deadlines of what it started, read once their documents left (as step_stack does).
        started = [i for i, r in ran.items() if r.started]
        later = await idle.nearest_deadlines(session, started) if started else {}
    for stack_id, r in ran.items():
        out.results[stack_id] = (r.finished, nearest(r.deadline, later.get(stack_id)))
    return out


def _sorted(
    claims: list[work.Claim],
    stacks: dict[str, StackRow],
    rows: dict[str, list[Row]],
    defs: stackdef.Definitions,
    out: Stepped,
) -> list[tuple[work.Claim, StackRow, int]]:
    """The claims this batch steps, with their stack and size; a stack gone is settled, and a
    stack too big for one transaction is left to step alone."""
    mine: list[tuple[work.Claim, StackRow, int]] = []
    for c in claims:
        stack = stacks.get(c.stack_id)
        size = _size(stack, defs, rows.get(c.stack_id, [])) if stack is not None else 0
        if stack is None:
            out.results[c.stack_id] = (True, None)
        elif size > SLICE:
            out.alone.append(c)
        else:
            mine.append((c, stack, size))
    return mine


async def _stacks(session: AsyncSession, defs: stackdef.Definitions, ids: list[str]) -> dict[str, StackRow]:
    """The stack rows, each with its definition columns only if this process has not parsed them."""
    query = select(StackRow).where(StackRow.id.in_(ids)).options(*STACK_WITHOUT_DEFINITION)
    stacks = {s.id: s for s in await session.scalars(query)}
    uncached = [
        s.id
        for s in stacks.values()
        if s.status == "IN_PROGRESS" and s.action != "DELETE" and defs.cached(s.id, s.version) is None
    ]
    if uncached:  # the same objects, now with every column (nothing of them is changed yet)
        full = select(StackRow).where(StackRow.id.in_(uncached)).execution_options(populate_existing=True)
        await session.execute(full)
    return stacks


async def _rows(session: AsyncSession, ids: list[str]) -> dict[str, list[Row]]:
    """Every resource row of the stacks, in one query."""
    out: dict[str, list[Row]] = {i: [] for i in ids}
    if ids:
        for row in await session.scalars(select(ResourceRow).where(ResourceRow.stack_id.in_(ids))):
            out[row.stack_id].append(row)
    return out


def _size(stack: StackRow, defs: stackdef.Definitions, rows: list[Row]) -> int:
    """What the stack's step walks: its resources, or its definition's if more (a create)."""
    return max(len(rows), _defined(stack, defs))


def _defined(stack: StackRow, defs: stackdef.Definitions) -> int:
    """How many resources the definition of a stack in progress has (0 for any other stack)."""
    if stack.status != "IN_PROGRESS" or stack.action == "DELETE":
        return 0
    return len(defs.get(stack).template.resources)
