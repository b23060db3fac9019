"""The create's dry run reaches every group member that can differ, and children under conditions
over values not known yet (control/resources/validate.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from control import hot
from control.hot import TemplateError
from control.resources.validate import MAX_DRY_MEMBERS, DryContext, DryStack, Group
from control.services.stack_request import validated
from control.settings import Settings

HEAD = {"heat_template_version": "2018-08-31"}
#: A member template whose parameter `size` may be at most 5.
SMALL = json.dumps(
    {
        **HEAD,
        "parameters": {"size": {"type": "number", "constraints": [{"range": {"max": 5}}]}},
        "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": {"get_param": "size"}}}},
    }
)
#: A member template building 300,000 copies of a kilobyte: over the per-call cap.
BOMB = json.dumps(
    {
        **HEAD,
        "resources": {
            "bomb": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": {"repeat": {"for_each": {"%i%": ["k" * 1024] * 300}, "template": "%i%" * 1000}}
                },
            }
        },
    }
)
FINE = json.dumps({**HEAD, "resources": {"v": {"type": "OS::Heat::Value", "properties": {"value": 1}}}})


def created(resources: dict[str, Any], files: dict[str, str], env: str = "") -> TemplateError | None:
    """The create's whole check of a top template with *resources*; the error, or None when accepted."""
    environment = hot.parse_environment(env) if env else hot.Environment()
    template = {**HEAD, "resources": {"anchor": {"type": "OS::Heat::None"}, **resources}}
    try:
        validated(
            Settings(data_dir=Path("/nonexistent")),
            template,
            files,
            environment,
            {},
            stack_name="top",
            stack_id="top-id",
            nesting=hot.Nesting(0, 5),
        )
    except TemplateError as e:
        return e
    return None


def group(count: int, member: dict[str, Any]) -> dict[str, Any]:
    return {
        "grp": {"type": "OS::Heat::ResourceGroup", "properties": {"count": count, "resource_def": member}}
    }


def test_a_member_whose_index_breaks_a_constraint_is_refused_though_member_0_is_fine() -> None:
    """Member 9 gives size 9 to a template allowing at most 5: refused at create naming the member's property."""
    e = created(group(10, {"type": "small.yaml", "properties": {"size": "%index%"}}), {"small.yaml": SMALL})
    assert e is not None
    assert "resources.grp.properties.resource_def.properties.size" == e.path
    assert "9" in e.reason
    assert (
        created(group(6, {"type": "small.yaml", "properties": {"size": "%index%"}}), {"small.yaml": SMALL})
        is None
    )


def test_a_member_the_environment_maps_to_another_template_is_dry_run_too() -> None:
    """The environment maps member 3 alone to a bomb: the create is refused, naming the bomb's template."""
    env = "resource_registry:\n  My::Member: fine.yaml\n  resources:\n    grp:\n      '3': {My::Member: bomb.yaml}\n"
    files = {"fine.yaml": FINE, "bomb.yaml": BOMB}
    e = created(group(5, {"type": "My::Member"}), files, env)
    assert e is not None and "resources.grp.properties.resource_def" == e.path, e
    assert "in template bomb.yaml" in e.reason and "cap" in e.reason
    assert created(group(3, {"type": "My::Member"}), files, env) is None  # member 3 does not exist


GUARDED: dict[str, Any] = {
    "by_name": {"type": "bomb.yaml", "condition": "named"},
    "inline": {"type": "bomb.yaml", "condition": {"equals": [{"get_param": "ref"}, "expected"]}},
}
CONDITIONED = {
    **HEAD,
    "parameters": {"ref": {"type": "string", "default": ""}},
    "conditions": {"named": {"equals": [{"get_param": "ref"}, "expected"]}},
    "resources": GUARDED,
}


@pytest.mark.parametrize("guarded", ["by_name", "inline"])
def test_a_child_under_a_condition_over_a_resources_value_is_dry_run(guarded: str) -> None:
    """A nested bomb whose condition reads a parameter the parent gives from get_attr is taken as possibly there."""
    child = {**CONDITIONED, "resources": {guarded: GUARDED[guarded]}}
    files = {"child.yaml": json.dumps(child), "bomb.yaml": BOMB}
    nest = {"nest": {"type": "child.yaml", "properties": {"ref": {"get_attr": ["anchor", "show"]}}}}
    e = created(nest, files)
    assert e is not None and "resources.nest" == e.path, e
    assert "in template child.yaml" in e.reason and "bomb.yaml" in e.reason


def test_a_condition_false_on_known_values_still_leaves_its_resource_out() -> None:
    """Given a known value, the condition decides: the bomb it guards is never made, so never refused."""
    files = {"child.yaml": json.dumps(CONDITIONED), "bomb.yaml": BOMB}
    assert created({"nest": {"type": "child.yaml", "properties": {"ref": ""}}}, files) is None


def test_a_condition_that_cannot_be_evaluated_over_an_unknown_value_no_longer_skips_the_child() -> None:
    """`contains` of a placeholder used to end the child's dry run; the other resources are checked now."""
    child = {
        **HEAD,
        "parameters": {"ref": {"type": "string", "default": "a"}},
        "conditions": {"has": {"contains": ["a", {"get_param": "ref"}]}},
        "resources": {"maybe": {"type": "OS::Heat::None", "condition": "has"}, "bomb": {"type": "bomb.yaml"}},
    }
    files = {"child.yaml": json.dumps(child), "bomb.yaml": BOMB}
    nest = {"nest": {"type": "child.yaml", "properties": {"ref": {"get_attr": ["anchor", "show"]}}}}
    e = created(nest, files)
    assert e is not None and "in template child.yaml" in e.reason, e


def test_members_that_differ_are_dry_run_first_and_last_first_at_most_the_cap() -> None:
    """1,000 members with their index: the first, the last, then in order, MAX_DRY_MEMBERS in all; same ones: one."""

    def members(props: dict[str, Any]) -> list[int]:
        source = {**HEAD, "resources": group(1000, {"type": "small.yaml", "properties": props})}
        template = hot.parse_template(source, files={"small.yaml": SMALL}, environment=hot.Environment())
        rdef = template.resources["grp"]
        stack = DryStack(template, DryContext({}, {}, {}), hot.Environment(), {}, "top", hot.Nesting(0, 5))
        return Group(stack, "grp", rdef, rdef.properties["resource_def"], None).distinct(1000)

    assert [0, 999, *range(1, MAX_DRY_MEMBERS - 1)] == members({"size": "%index%"})
    assert [0] == members({"size": 1})
