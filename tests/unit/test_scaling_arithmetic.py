"""A scaling policy's arithmetic (Heat's) and an AutoScalingGroup's attributes."""

from __future__ import annotations

import pytest

from control.resources.group_stack import ORDER
from control.resources.provider import hidden_output
from control.resources.scaling import new_capacity, read


@pytest.mark.parametrize(
    ("current", "adjustment", "kind", "step", "expected"),
    [
        (2, 1, "change_in_capacity", None, 3),
        (2, -5, "change_in_capacity", None, 1),  # kept at min_size
        (2, 9, "exact_capacity", None, 5),  # kept at max_size
        (4, 10, "percent_change_in_capacity", None, 5),  # 0.4 rounds up to 1
        (4, -10, "percent_change_in_capacity", None, 3),  # -0.4 rounds down to -1
        (4, 60, "percent_change_in_capacity", None, 5),  # 2.4 truncates to 2, then max_size
        (4, 10, "percent_change_in_capacity", 2, 5),  # at least min_adjustment_step, then max_size
        (3, 34, "percent_change_in_capacity", 0, 4),
    ],
)
def test_new_capacity(current: int, adjustment: float, kind: str, step: int | None, expected: int) -> None:
    """Adjustments give Heat's sizes, within min_size 1 and max_size 5."""
    assert expected == new_capacity(current, adjustment, kind, step, 1, 5)


def test_group_attributes_follow_member_order() -> None:
    """current_size, refs, outputs_list and resource.<index>.<attr> follow the oldest-first order."""
    attrs = {
        ORDER: ["b", "a"],
        "refs_map": {"a": "id-a", "b": "id-b"},
        hidden_output(["outputs", "said"]): {"a": "A", "b": "B"},
    }
    assert 2 == read(attrs, "current_size", [])
    assert ["id-b", "id-a"] == read(attrs, "refs", [])
    assert ["B", "A"] == read(attrs, "outputs_list", ["said"])
    assert {"b": "B", "a": "A"} == read(attrs, "outputs", ["said"])
    assert "A" == read(attrs, "resource.1.said", [])
    assert "id-b" == read(attrs, "resource.0", [])
    assert read(attrs, "resource.7.said", []) is None
