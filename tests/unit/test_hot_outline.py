"""A definition's outline: what the web view draws of a big stack and whether stack show has outputs."""

from __future__ import annotations

from typing import Any

from control import hot


def _outline(source: dict[str, Any], **given: Any) -> dict[str, Any]:
    defn = hot.build(source, {}, hot.Environment(), given, stack_name="s", stack_id="i")
    return hot.outline(defn)


def test_counts_each_type_joins_two_types_once_and_counts_outputs() -> None:
    """Resources per type; one edge per pair of types where any needs another (none within a type)."""
    found = _outline(
        {
            "heat_template_version": "2018-08-31",
            "description": "three kinds",
            "resources": {
                "v": {"type": "OS::Heat::Value", "properties": {"value": "a"}},
                "w": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["v", "value"]}}},
                "n1": {"type": "OS::Heat::None", "depends_on": ["v", "w"]},
                "n2": {"type": "OS::Heat::None", "depends_on": "n1"},
                "r": {"type": "OS::Heat::RandomString", "properties": {"salt": {"get_resource": "n2"}}},
            },
            "outputs": {"a": {"value": 1}, "b": {"value": {"get_attr": ["v", "value"]}}},
        }
    )
    assert {"OS::Heat::None": 2, "OS::Heat::RandomString": 1, "OS::Heat::Value": 2} == found["types"]
    assert [["OS::Heat::None", "OS::Heat::RandomString"], ["OS::Heat::Value", "OS::Heat::None"]] == found[
        "edges"
    ]
    assert (2, "three kinds") == (found["outputs"], found["description"])


def test_a_resource_whose_condition_is_false_is_left_out() -> None:
    """An inactive resource is neither counted nor an end of an edge; no outputs is 0."""
    found = _outline(
        {
            "heat_template_version": "2018-08-31",
            "parameters": {"big": {"type": "boolean", "default": False}},
            "conditions": {"wanted": {"get_param": "big"}},
            "resources": {
                "v": {"type": "OS::Heat::Value", "properties": {"value": "a"}, "condition": "wanted"},
                "n": {"type": "OS::Heat::None", "depends_on": "v"},
            },
        }
    )
    assert ({"OS::Heat::None": 1}, [], 0) == (found["types"], found["edges"], found["outputs"])
