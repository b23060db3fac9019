"""Heat's batch arithmetic and a ResourceGroup's nested template, attributes and removed names."""

from __future__ import annotations

from typing import Any

from control.resources import batches
from control.resources.group_stack import ORDER
from control.resources.provider import hidden_output
from control.resources.resource_group import member, outputs, read, removed_names


def test_batched_create_adds_max_batch_size_members_at_a_time():
    """batch_create of 5 in batches of 2: sizes 2, 4, 5, each batch's members all new."""
    assert [(2, 2), (4, 2), (5, 1)] == batches.batches(5, 0, 2, 0)


def test_rolling_update_without_min_in_service_changes_a_batch_at_a_time():
    """10 members, batches of 4, nobody kept: 4, 4, 2 members change, the size stays 10."""
    assert [(10, 4), (10, 4), (10, 2)] == batches.batches(10, 10, 4, 0)


def test_min_in_service_adds_members_first_and_removes_them_last():
    """10 members, keep 8, batches of 4: the group grows to 12 while it changes, then back to 10."""
    assert [(12, 4), (12, 4), (12, 4), (10, 0)] == batches.batches(10, 10, 4, 8)


def test_a_canary_is_the_first_batch_then_the_rolling_batches_follow():
    """10 members, a canary of 2, then batches of 4: 2, 4, 4 members change; without batches, 2 then 8."""
    assert [(10, 2), (10, 4), (10, 4)] == batches.batches(10, 10, 4, 0, first=2)
    assert [(10, 2), (10, 8)] == batches.batches(10, 10, 10, 0, first=2)


def test_removed_names_are_never_used_again():
    """Names skip the removed ones; scaling down keeps the lowest names."""
    assert ["0", "1", "2", "4", "5"] == batches.names(5, {"3"})


def test_members_change_in_order_and_new_ones_come_from_fresh_names():
    """The first members of the old order change first; missing ones are created."""
    old = {"1": "old", "0": "old"}
    out = batches.members(old, lambda n: "new", ["0", "1", "2"], 3, 2, iter(["2"]))
    assert {"0": "old", "1": "new", "2": "new"} == out


def test_replacing_members_gives_the_new_definition_to_fresh_names():
    """With replace, a member due for the new definition is dropped and a freshly named one takes
    its place; the members not yet due keep their names and definitions."""
    old = {"a": "old", "b": "old", "c": "old"}
    out = batches.members(old, lambda n: "new", [], 3, 2, iter(["x", "y"]), replace=True)
    assert {"c": "old", "x": "new", "y": "new"} == out


def test_index_var_is_replaced_in_every_string_property():
    """%index% (or the group's index_var) becomes the member's name wherever it appears."""
    definition = {"type": "T", "properties": {"name": "web-%index%", "tags": ["%index%", 3], "none": None}}
    assert {"type": "T", "properties": {"name": "web-4", "tags": ["4", 3]}, "metadata": {}} == member(
        definition, "%index%", "4"
    )


def test_outputs_answer_what_the_parent_reads():
    """refs_map always; a member attribute as a map per member, resource.<n>.<attr> for one."""
    out = outputs(["0", "1"], [["said"], ["resource.1.said"], ["attributes", "server"]])
    assert out["refs_map"]["value"] == {"0": {"get_resource": "0"}, "1": {"get_resource": "1"}}
    assert out[hidden_output(["said"])]["value"] == {
        "0": {"get_attr": ["0", "said"]},
        "1": {"get_attr": ["1", "said"]},
    }
    assert out[hidden_output(["resource.1.said"])]["value"] == {"get_attr": ["1", "said"]}
    assert out[hidden_output(["attributes", "server"])]["value"]["1"] == {"get_attr": ["1", "server"]}


def test_reading_group_attributes():
    """refs in member order, resource.<n> a member's id, any attribute a list in member order."""
    attrs = {
        ORDER: ["0", "2"],
        "refs_map": {"0": "a", "2": "c"},
        hidden_output(["said"]): {"2": "two", "0": "zero"},
        hidden_output(["said", 0]): {"2": "t", "0": "z"},
    }
    assert ["a", "c"] == read(attrs, "refs", [])
    assert "c" == read(attrs, "resource.2", [])
    assert ["zero", "two"] == read(attrs, "said", [])
    assert ["z", "t"] == read(attrs, "said", [0])
    assert read(attrs, "unknown", []) is None


def test_removal_policies_by_name_and_by_reference():
    """A listed name or member id is removed; mode update forgets the earlier removals."""
    props: dict[str, Any] = {"removal_policies": [{"resource_list": ["1", "id-of-4", 9]}]}
    found = removed_names(props, {"0"}, {"1", "4"}, {"4": "id-of-4"}, created=True)
    assert {"0", "1", "4"} == found
    props["removal_policies_mode"] = "update"
    assert {"1", "4"} == removed_names(props, {"0"}, {"1", "4"}, {"4": "id-of-4"}, created=True)
