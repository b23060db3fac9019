"""A stack's ``converge_interval`` and its first round (services/autoconverge.py runs the rounds)."""

from __future__ import annotations

from control.store.orm import StackRow


def interval(stack: StackRow) -> float | None:
    """The stack's converge_interval in seconds (the environment's deployment_defaults), or None."""
    value = ((stack.environment or {}).get("deployment_defaults") or {}).get("converge_interval")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def schedule(stack: StackRow, now: float) -> None:
    """After a create or update: the first round one interval on (none without an interval)."""
    every = interval(stack)
    stack.converge_due = None if every is None else now + every
    stack.converge_asked = None
