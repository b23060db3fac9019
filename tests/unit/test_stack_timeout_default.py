"""The default stack timeout (`anneal serve --stack-timeout`, Heat's stack_action_timeout): which
minutes a stack's action gets, when its deadline falls, and which settings are refused."""

from __future__ import annotations

from pathlib import Path

from control.resources import deploy
from control.settings import Settings, stack_timeout_problem
from control.store.orm import StackRow


def settings(stack_timeout: int = 60, minute: float = 60.0) -> Settings:
    return Settings(data_dir=Path("/nonexistent"), stack_timeout=stack_timeout, timeout_minute=minute)


def test_a_stacks_own_timeout_mins_wins_over_the_operators_default() -> None:
    """timeout_mins 5 gives a deadline 5 minutes on; without it, --stack-timeout's minutes."""
    stack = StackRow(timeout_mins=5)
    deploy.start_deadline(settings(60, minute=4.0), stack, 1000.0)
    assert 1020.0 == stack.deadline
    stack.timeout_mins = None
    deploy.start_deadline(settings(60, minute=4.0), stack, 1000.0)
    assert (1240.0, 60) == (stack.deadline, deploy.stack_minutes(settings(60), stack))


def test_a_stack_timeout_of_zero_leaves_a_stack_without_timeout_mins_unbounded() -> None:
    """--stack-timeout 0: no deadline for a stack that sets none; one that sets it keeps its own."""
    stack = StackRow(timeout_mins=None, deadline=5.0)
    deploy.start_deadline(settings(0), stack, 1000.0)
    assert (None, None) == (stack.deadline, deploy.stack_minutes(settings(0), stack))
    stack.timeout_mins = 2
    deploy.start_deadline(settings(0, minute=1.0), stack, 1000.0)
    assert 1002.0 == stack.deadline


def test_a_negative_stack_timeout_is_refused_naming_the_option() -> None:
    """`anneal serve --stack-timeout -1` is refused with the option and what it expects; 0 and 60 pass."""
    problem = stack_timeout_problem(settings(-1))
    assert problem is not None and problem.startswith("--stack-timeout -1: expected 0 (no timeout)")
    assert (None, None) == (stack_timeout_problem(settings(0)), stack_timeout_problem(settings(60)))
