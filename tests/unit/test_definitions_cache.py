"""The engine's definitions cache: a step's own version stays while newer ones are kept; a step drops older ones."""

from __future__ import annotations

from control import hot
from control.engine.stackdef import Definition, Definitions


def _defn(value: str) -> Definition:
    source = {
        "heat_template_version": "2018-08-31",
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": value}}},
    }
    return hot.build(source, {}, hot.Environment(), {}, stack_name="s", stack_id="i")


def test_a_version_kept_by_an_update_leaves_the_running_steps_version_cached() -> None:
    """Version 2 kept (an update committed) while a step of 1 runs: both cached; version 3 drops 1."""
    defs, one, two, three = Definitions(), _defn("1"), _defn("2"), _defn("3")
    defs.keep("s", 1, one)
    defs.keep("s", 2, two)
    assert (one, two) == (defs.cached("s", 1), defs.cached("s", 2))
    defs.keep("s", 3, three)
    assert (None, two, three) == (defs.cached("s", 1), defs.cached("s", 2), defs.cached("s", 3))


def test_a_step_of_the_new_version_releases_the_older_ones() -> None:
    """release_older(2) (a step of version 2 starts) leaves version 2 only; other stacks keep theirs."""
    defs, one, two = Definitions(), _defn("1"), _defn("2")
    defs.keep("s", 1, one)
    defs.keep("s", 2, two)
    defs.keep("t", 1, one)
    defs.release_older("s", 2)
    assert (None, two, one) == (defs.cached("s", 1), defs.cached("s", 2), defs.cached("t", 1))
