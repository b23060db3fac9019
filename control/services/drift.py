"""Checks on the host: asking a stack's servers whether what they applied still holds, and their answers.

``request`` raises each COMPLETE deployment's ``check_serial``; the server's document then
carries it (``anneal.deployments[id].check``) and its agent runs the hook in check mode
(agent/checks.py), changing nothing. The answers come with heartbeats (``record``); a
deployment's ``host`` view is its answer for its current generation and newest request, or
``pending`` until one arrives. `stack check` reports a ``drifted`` answer as drift, and
`stack converge` re-applies it (control/services/converge.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from agent.wire_caps import CHECK_STATES, MAX_CHECK_DIFF, MAX_CHECK_REASON
from control.documents import heat, seal
from control.errors import BadRequestError, ConflictError
from control.hot import taint
from control.principal import Within
from control.runtime import Runtime
from control.services.stacks import get_stack
from control.store.orm import DeploymentRow, ServerRow, StackRow
from control.txn import Txn, retried_on_race

#: Results one heartbeat may carry (the agent sends at most 40 KiB of them).
MAX_RESULTS = 256
#: Seconds after which services/autoconverge.py first looks for the answers of a CHECK.
ANSWER_POLL = 1.0


@retried_on_race
async def request(rt: Runtime, ref: str, *, within: Within) -> dict[str, Any]:
    """Ask the servers to check every COMPLETE deployment of the stack; the answers come later."""
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, ref, within=within)
        if stack.action == "DELETE":
            raise ConflictError(f"stack {stack.name} is being deleted", where="name")
        asked = await _ask(session, txn, stack)
        await txn.commit()
        return {"stack": stack.name, "requested": asked}


@retried_on_race
async def start_check(rt: Runtime, ref: str, *, within: Within) -> bool:
    """Heat's CHECK action: ask for the checks and leave the stack CHECK_IN_PROGRESS until the answers.

    services/autoconverge.py finishes it (converge.check_stack) once every server answered or
    its wait ran out. False when the stack has nothing to check on a server: finish it at once.
    """
    async with rt.sessions() as session:
        txn = Txn(session, rt)
        stack = await get_stack(session, ref, within=within)
        settled(stack, "check")
        asked = await _ask(session, txn, stack)
        if not asked:
            return False
        now = time.time()
        stack.traversal += 1
        stack.action, stack.status, stack.updated_at = "CHECK", "IN_PROGRESS", now
        stack.status_reason = f"Stack CHECK started: {len(asked)} deployment(s) to check on their servers"
        stack.converge_asked, stack.converge_due = now, now + ANSWER_POLL
        txn.event(stack.id, "", "CHECK", "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
        await txn.commit()
        return True


def settled(stack: StackRow, verb: str) -> None:
    """Refuse to *verb* a stack in progress or being deleted (409)."""
    if stack.status == "IN_PROGRESS":
        raise ConflictError(f"stack {stack.name} is {stack.action}_IN_PROGRESS; {verb} when it settles")
    if stack.action == "DELETE":
        raise ConflictError(f"stack {stack.name} is being deleted", where="name")


async def _ask(session: Any, txn: Txn, stack: StackRow) -> list[str]:
    """Raise the check number of the stack's COMPLETE deployments on servers Anneal's agent runs."""
    deps = await session.scalars(
        select(DeploymentRow)
        .join(ServerRow, ServerRow.id == DeploymentRow.server_id)
        .where(
            DeploymentRow.stack_id == stack.id,
            DeploymentRow.status == "COMPLETE",
            DeploymentRow.item_id.is_not(None),
            ServerRow.agent_kind != heat.HEAT_AGENT,  # Heat's agent: no check mode (host_view says so)
        )
    )
    asked = []
    for dep in deps:
        dep.check_serial = (dep.check_serial or 0) + 1
        txn.publish.add(dep.server_id)
        asked.append(dep.id)
    return sorted(asked)


def host_view(dep: DeploymentRow, agent_kind: str = "") -> dict[str, Any] | None:
    """The answer to the newest check of *dep*'s current generation, ``pending``, or None (never asked)."""
    if agent_kind == heat.HEAT_AGENT and dep.status == "COMPLETE":
        return {"state": "unknown", "reason": "the server runs Heat's agent, which has no check mode"}
    if not dep.check_serial:
        return None
    answer = dep.check_result if isinstance(dep.check_result, dict) else {}
    if answer.get("check") == dep.check_serial and answer.get("generation") == dep.generation:
        keys = ("state", "diff", "reason", "check", "at")
        return {k: answer[k] for k in keys if k in answer}
    if answer.get("generation") not in (None, dep.generation) and answer.get("check") == dep.check_serial:
        return None  # answered for a generation since replaced (re-applied): not checked since
    return {"state": "pending", "check": dep.check_serial}


async def record(session: Any, server_id: str, results: Any) -> list[str]:
    """Keep a heartbeat's check results for *server_id*'s deployments; the ``item:check`` keys acknowledged.

    A result for another server's deployment, an item that is no longer the deployment's or a
    check that is not its newest is acknowledged and dropped: the agent never sends it again.
    """
    parsed = [_parse(r, f"checks[{i}]") for i, r in enumerate(_list(results))]
    ids = sorted({p["deployment_id"] for p in parsed})
    rows = {
        d.id: d
        for d in await session.scalars(
            select(DeploymentRow).where(DeploymentRow.id.in_(ids), DeploymentRow.server_id == server_id)
        )
    }
    taken = [(p, rows[p["deployment_id"]]) for p in parsed if p["deployment_id"] in rows]
    taken = [(p, d) for p, d in taken if d.item_id == p["item"] and d.check_serial == p["check"]]
    stacks = await seal.stack_texts(session, sorted({d.stack_id for _, d in taken if d.stack_id}))
    for p, dep in taken:  # a diff quotes what the tool saw: the deployment's secret texts are masked
        secrets = seal.texts_for(dep.item, stacks.get(dep.stack_id or "", ()))
        shown = {k: taint.mask_text(p[k], secrets) for k in ("diff", "reason")}
        dep.check_result = {**{k: p[k] for k in ("state", "check", "generation", "at")}, **shown}
    return [f"{p['item']}:{p['check']}" for p in parsed]


def _list(results: Any) -> list[Any]:
    if not isinstance(results, list) or len(results) > MAX_RESULTS:
        raise BadRequestError(f"checks: expected a list of at most {MAX_RESULTS} results", where="checks")
    return results


def _parse(obj: Any, path: str) -> dict[str, Any]:
    """One result, checked field by field; a 400 names the first wrong one."""
    if not isinstance(obj, Mapping):
        raise BadRequestError(f"{path}: expected an object", where=path)
    kinds: dict[str, Any] = {
        "item": str,
        "deployment_id": str,
        "check": int,
        "generation": int,
        "state": str,
        "diff": str,
        "reason": str,
        "at": (int, float),
    }
    for key, kind in kinds.items():
        value = obj.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise BadRequestError(f"{path}.{key}: missing or of the wrong type", where=f"{path}.{key}")
    if obj["state"] not in CHECK_STATES:
        raise BadRequestError(f"{path}.state: one of {', '.join(CHECK_STATES)}", where=f"{path}.state")
    for key, cap in (("diff", MAX_CHECK_DIFF), ("reason", MAX_CHECK_REASON)):
        if len(obj[key].encode()) > cap + 64:  # the agent trims to the cap, marking the cut
            raise BadRequestError(f"{path}.{key}: over {cap} bytes", where=f"{path}.{key}")
    return {key: obj[key] for key in kinds}
