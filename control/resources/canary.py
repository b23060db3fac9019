"""A group's canary: the first members of an update run alone, and the rollout goes on only if
enough of them complete (SoftwareDeploymentGroup, StructuredDeploymentGroup and ResourceGroup).

``update_policy: {canary: {count: 2 | percent: 20, pause: 60, success: {min_complete: 2,
max_failed: 0}}}``. The canary is the first batch of an update (of the members the update
changes); when it has ended, it passes with at least ``min_complete`` COMPLETE (default: all of
it but ``max_failed``) and at most ``max_failed`` FAILED (default 0). Passed, the rollout waits
``pause`` seconds and goes on in ``rolling_update`` batches; failed, the group fails and nothing
else is touched (with the stack's rollback, only the members that ran are returned). A rollback
traversal has no canary: it returns what ran, at once. Each group kind finds its canary members'
states its own way; the judging here is the one both use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from control import hot
from control.errors import BadRequestError
from control.resources.base import Res
from control.txn import Txn

#: A canary member as judged: its name, status (COMPLETE, FAILED, IN_PROGRESS, ...) and reason.
Member = tuple[str, str, str]


def policy(res: Res, queued: int) -> dict[str, Any] | None:
    """The canary of an update that runs *queued* members (None: no canary), checked."""
    given = res.update_policy.get("canary")
    if not given or not queued or res.stack.action == "ROLLBACK":
        return None
    where = f"{res.where}.update_policy.canary"
    terms = hot.canary_terms(given, where)  # checked when the template was, again for its defaults
    count, percent, max_failed = terms["count"], terms["percent"], terms["max_failed"]
    size = min(queued, count if count is not None else max(1, math.ceil(queued * float(percent) / 100)))
    least = terms["min_complete"] if terms["min_complete"] is not None else max(size - max_failed, 0)
    if least > size:
        raise BadRequestError(
            f"min_complete {least} is more than the canary's {size} members", where=f"{where}.success"
        )
    return {"size": size, "pause": terms["pause"], "min_complete": least, "max_failed": max_failed}


def verdict(canary: Mapping[str, Any], members: Sequence[Member]) -> str | None:
    """None when the canary passed; else why it failed (its counts and the first failure)."""
    complete = [m for m in members if m[1] == "COMPLETE"]
    failed = [m for m in members if m[1] == "FAILED"]
    if len(complete) >= canary["min_complete"] and len(failed) <= canary["max_failed"]:
        return None
    others = len(members) - len(complete) - len(failed)
    ended = f", {others} not ended" if others else ""
    first = f": member {failed[0][0]}: {failed[0][2]}" if failed else ""
    return (
        f"canary failed: {len(complete)} of {len(members)} members complete (at least "
        f"{canary['min_complete']} needed), {len(failed)} failed (at most {canary['max_failed']})"
        f"{ended}{first}"
    )


def judge(txn: Txn, res: Res, canary: dict[str, Any], members: Sequence[Member]) -> str | None:
    """The verdict on an ended canary; passed, it is marked so and the stack's events say it."""
    why = verdict(canary, members)
    if why is None:
        canary["passed"] = True
        passed = sum(m[1] == "COMPLETE" for m in members)
        txn.event(
            res.stack.id,
            res.name,
            "UPDATE",
            "IN_PROGRESS",
            f"canary passed: {passed} of {len(members)} members complete",
            traversal=res.stack.traversal,
        )
    return why
