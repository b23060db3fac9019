"""Heat's batch arithmetic for groups: how many members a rolling update or a batched
create changes per step, and which members get the new definition in each.

A group's nested stack is updated once per batch; each batch's template keeps the old
definition of every member not yet due and gives the new one to at most the batch's
count, creating members or removing them to reach the batch's capacity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: A plan longer than this is refused: no group needs it, and it bounds a bad policy's loop.
MAX_BATCHES = 100_000


def batches(
    target: int, current: int, size: int, min_in_service: int, first: int | None = None
) -> list[tuple[int, int]]:
    """``(capacity, new)`` per batch: the group's size after it and how many members get the new
    definition in it (created ones included), keeping ``min_in_service`` members untouched
    at every step, as Heat's rolling update does (adding members first when it must).
    *first*: the first batch's size when it differs (a canary)."""
    plan: list[tuple[int, int]] = []
    updated = 0
    while not (updated >= current == target):
        in_service = min(min_in_service, target, current)
        new = min(first if first is not None and not plan else size, max(target - updated, 0))
        capacity = new + max(min(current, target - new), in_service)
        plan.append((capacity, new))
        updated += new - max(capacity - max(current, target), 0)
        current = capacity
        if len(plan) > MAX_BATCHES:
            raise ValueError(f"the update policy needs more than {MAX_BATCHES} batches")
    return plan


def names(count: int, removed: set[str]) -> list[str]:
    """The first *count* member names ``0``, ``1``, ... that were never removed (Heat's rule:
    a removed name is not used again)."""
    out: list[str] = []
    index = 0
    while len(out) < count:
        if str(index) not in removed:
            out.append(str(index))
        index += 1
    return out


def members(
    old: Mapping[str, Any],
    new: Callable[[str], Any],
    keep_first: list[str],
    capacity: int,
    changes: int,
    fresh: Iterator[str],
    replace: bool = False,
) -> dict[str, Any]:
    """Member name -> definition after one batch.

    *old* holds the current members (name -> definition) ordered so that the first are
    removed or changed first; the last *capacity* of them stay. Of those, up to
    *changes* minus the members created get ``new(name)`` (with *replace*, a new member
    named from *fresh* takes the old one's place instead: Heat's instance groups replace
    their servers); members are created, named from *fresh*, until there are *capacity*.
    *keep_first* only orders the result.
    """
    ordered = list(old.items())
    kept = ordered[max(0, len(ordered) - capacity) :] if capacity else []
    created = capacity - len(kept)
    due = changes - created
    out: dict[str, Any] = {}
    for name, definition in kept:
        wanted = new(name)
        if definition != wanted and due > 0:
            due -= 1
            out[next(fresh) if replace else name] = wanted
        else:
            out[name] = definition
    for _ in range(created):
        name = next(fresh)
        out[name] = new(name)
    position = {n: i for i, n in enumerate(keep_first)}
    return dict(sorted(out.items(), key=lambda item: (position.get(item[0], len(position)), item[0])))
