"""A deployment group's canary: the first members of an update run alone, and the rollout goes on
only if enough of them complete.

``update_policy: {canary: {count: 2 | percent: 20, pause: 60, success: {min_complete: 2,
max_failed: 0}}}``. The canary is the first batch of an update (members in key order, of those the
update runs); when every one of them has ended, it passes with at least ``min_complete`` COMPLETE
(default: all of it but ``max_failed``) and at most ``max_failed`` FAILED (default 0). Passed, the
rollout waits ``pause`` seconds and goes on in ``rolling_update`` batches; failed, the group fails
and nothing else is touched (with the stack's rollback, only the members that ran are returned).
A rollback traversal has no canary: it returns what ran, at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from control.errors import BadRequestError
from control.resources.base import Res
from control.store.orm import DeploymentRow


def policy(res: Res, queued: int) -> dict[str, Any] | None:
    """The canary of an update that runs *queued* members (None: no canary), checked."""
    given = res.update_policy.get("canary")
    if not given or not queued or res.stack.action == "ROLLBACK":
        return None
    where = f"{res.where}.update_policy.canary"
    count, percent = given.get("count"), given.get("percent")
    if (count is None) == (percent is None):
        raise BadRequestError("give one of count or percent", where=where)
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise BadRequestError(f"count: {count!r} is not an integer >= 1", where=f"{where}.count")
    if percent is not None and not (isinstance(percent, int | float) and 0 < percent <= 100):
        raise BadRequestError(f"percent: {percent!r} is not a number in (0, 100]", where=f"{where}.percent")
    size = min(queued, count if count is not None else max(1, math.ceil(queued * float(percent or 0) / 100)))
    success = given.get("success") or {}
    max_failed = _count(success.get("max_failed", 0), f"{where}.success.max_failed", 0)
    least = _count(success.get("min_complete", max(size - max_failed, 0)), f"{where}.success.min_complete", 0)
    pause = given.get("pause") or 0
    if not isinstance(pause, int | float) or pause < 0:
        raise BadRequestError(f"pause: {pause!r} is not a number of seconds >= 0", where=f"{where}.pause")
    if least > size:
        raise BadRequestError(
            f"min_complete {least} is more than the canary's {size} members", where=f"{where}.success"
        )
    return {"size": size, "pause": float(pause), "min_complete": least, "max_failed": max_failed}


def _count(value: Any, where: str, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise BadRequestError(f"{value!r} is not an integer >= {least}", where=where)
    return value


def verdict(canary: Mapping[str, Any], members: list[DeploymentRow]) -> str | None:
    """None when the canary passed; else why it failed (its counts and the first failure)."""
    complete = [d for d in members if d.status == "COMPLETE"]
    failed = [d for d in members if d.status == "FAILED"]
    if len(complete) >= canary["min_complete"] and len(failed) <= canary["max_failed"]:
        return None
    first = f": member {failed[0].resource_name}: {failed[0].status_reason}" if failed else ""
    return (
        f"canary failed: {len(complete)} of {len(members)} members complete (at least "
        f"{canary['min_complete']} needed), {len(failed)} failed (at most {canary['max_failed']}){first}"
    )
