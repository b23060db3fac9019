"""Heat's rollback: a failed create or update returns to the stack's previous definition.

Asked for with ``rollback: true`` (or Heat's ``disable_rollback: false``); without it a
failed resource fails the stack.
"""

from __future__ import annotations

import time
from typing import Any

from control import hot
from control.engine import stackdef
from control.engine.light import Row
from control.engine.settle import finish
from control.resources import deploy
from control.store import previous
from control.store.orm import ResourceRow, StackRow
from control.txn import Txn

#: What a failed create rolls back to: no resources.
EMPTY_TEMPLATE: dict[str, Any] = {"heat_template_version": "2018-08-31", "resources": {}}


async def resource_failed(
    txn: Txn, stack: StackRow, rows: list[Row], first: ResourceRow, asked_by: str | None = None
) -> bool:
    """A resource failed in this traversal: roll back if asked to, else fail the stack.

    *asked_by* names a failed group whose ``update_policy.on_failure`` is ``rollback``: it rolls
    a top-level update back without the stack's own rollback, when there is a definition to
    return to. True when the stack is done (failed), False while its rollback runs.
    """
    reason = f"Resource {first.action} failed: {first.name}: {first.status_reason}"
    if stack.rollback and stack.action in ("CREATE", "UPDATE"):
        await start_rollback(txn, stack, rows, reason)
        return False
    top_update = asked_by is not None and stack.action == "UPDATE" and stack.parent_id is None
    # Never "back" to nothing: an update of a failed create has no previous definition.
    if top_update and await previous.held(txn.session, stack.id):
        await start_rollback(txn, stack, rows, f"{reason} (update_policy.on_failure of {asked_by}: rollback)")
        return False
    finish(txn, stack, "FAILED", reason)
    return True


def rollback_asked(defn: stackdef.Definition, failed: list[Row]) -> str | None:
    """The first failed resource whose ``update_policy.on_failure`` is ``rollback`` (None: none)."""
    for row in failed:
        rdef = defn.template.resources.get(row.name)
        if rdef is not None and (rdef.update_policy or {}).get("on_failure") == "rollback":
            return row.name
    return None


async def start_rollback(txn: Txn, stack: StackRow, rows: list[Row], reason: str) -> None:
    """Go back to the definition before the failed create/update (after a create: to nothing)."""
    prev = await previous.read(txn.session, stack.id) or {
        "template": EMPTY_TEMPLATE,
        "files": {},
        "environment": {},
        "params_given": {},
    }
    env = stackdef.environment_from_json(prev.get("environment") or {})
    defn = stackdef.build(
        prev["template"],
        prev.get("files") or {},
        env,
        prev.get("params_given") or {},
        stack_name=stack.name,
        stack_id=stack.id,
        nesting=hot.Nesting(stack.nested_depth, txn.runtime.settings.max_nested_depth),
    )
    stack.template, stack.files = prev["template"], dict(prev.get("files") or {})
    stack.environment, stack.params_given = (
        dict(prev.get("environment") or {}),
        dict(prev.get("params_given") or {}),
    )
    stack.parameters = stackdef.plain(dict(defn.params.values))
    stack.hidden = sorted(defn.params.hidden)
    stack.version += 1
    stack.traversal += 1
    stack.action, stack.status, stack.updated_at = "ROLLBACK", "IN_PROGRESS", time.time()
    deploy.start_deadline(txn.runtime.settings, stack, stack.updated_at)
    stack.status_reason = f"Stack ROLLBACK started: {reason}"
    stack.rollback = False
    previous.clear(stack)
    keep = set(defn.order())
    for row in rows:
        if row.name not in keep:
            row.current = False
    txn.event(stack.id, "", "ROLLBACK", "IN_PROGRESS", stack.status_reason, traversal=stack.traversal)
    txn.kicks.add(stack.id)
