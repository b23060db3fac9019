"""Parsing Heat's older features: CFN functions in 2013-05-23 HOT, OS::Heat::Stack, InstanceGroup,
external_id, and the Nova server attributes nothing here can answer."""

from __future__ import annotations

from typing import Any

import pytest

from control.hot import TemplateError, parse_template
from control.hot.cfn import select
from control.resources.instance_group import pause_seconds

CHILD = """heat_template_version: 2013-05-23
parameters: {x: {type: number}}
outputs: {o: {value: {get_param: x}}}
"""


def old(resources: dict[str, Any], version: str = "2013-05-23", **sections: Any) -> dict[str, Any]:
    return {"heat_template_version": version, "resources": resources, **sections}


def error(source: Any, **kwargs: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse_template(source, **kwargs)
    return info.value


def test_ref_is_get_param_of_a_parameter_and_get_resource_of_a_resource() -> None:
    """Ref of a parameter (or OS:: pseudo parameter) reads it; of a resource, depends on it."""
    t = parse_template(
        old(
            {
                "a": {"type": "OS::Heat::None"},
                "v": {"type": "OS::Heat::Value", "properties": {"value": [{"Ref": "p"}, {"Ref": "a"}]}},
                "w": {"type": "OS::Heat::Value", "properties": {"value": {"Ref": "OS::stack_name"}}},
            },
            parameters={"p": {"type": "string", "default": "x"}},
        )
    )
    assert [{"get_param": "p"}, {"get_resource": "a"}] == t.resources["v"].properties["value"]
    assert {"a"} == t.dependencies("v")
    assert {"get_param": "OS::stack_name"} == t.resources["w"].properties["value"]


def test_cfn_functions_are_rewritten_as_their_hot_equivalents() -> None:
    """Fn::Join, Fn::Replace, Fn::Base64, Fn::ResourceFacade and Fn::GetAZs become HOT's own."""
    value = {
        "j": {"Fn::Join": [",", ["a", "b"]]},
        "r": {"Fn::Replace": [{"%x%": "1"}, "x=%x%"]},
        "b": {"Fn::Base64": "text"},
        "f": {"Fn::ResourceFacade": "Metadata"},
        "z": {"Fn::GetAZs": ""},
    }
    t = parse_template(old({"v": {"type": "OS::Heat::Value", "properties": {"value": value}}}))
    assert {
        "j": {"list_join": [",", ["a", "b"]]},
        "r": {"str_replace": {"template": "x=%x%", "params": {"%x%": "1"}}},
        "b": "text",
        "f": {"resource_facade": "metadata"},
        "z": [],
    } == t.resources["v"].properties["value"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([1, ["a", "b"]], "b"),
        (["1", ["a", "b"]], "b"),
        ([5, ["a"]], ""),
        (["k", {"k": 3}], 3),
        ([0, None], ""),
    ],
)
def test_fn_select_picks_as_heat_does(args: list[Any], expected: Any) -> None:
    """Fn::Select: an index into a list, a key into a map; out of range or nothing gives ''."""
    assert expected == select(args, "p")


def test_cfn_functions_are_refused_in_newer_versions_and_unknown_refs_at_their_path() -> None:
    """Fn::Select lives to 2015-04-30, Ref only in 2013-05-23; a Ref to nothing is named."""
    selected = {"v": {"type": "OS::Heat::Value", "properties": {"value": {"Fn::Select": [0, ["a"]]}}}}
    parse_template(old(selected, "2015-04-30"))
    e = error(old(selected, "2015-10-15"))
    assert e.path == "resources.v.properties.value" and "to 2015-04-30" in e.reason
    e = error(old({"v": {"type": "OS::Heat::Value", "properties": {"value": {"Ref": "nope"}}}}))
    assert e.path == "resources.v.properties.value.Ref" and "'nope' is neither" in e.reason
    e = error(old({"v": {"type": "OS::Heat::Value", "properties": {"value": {"Ref": "v"}}}}, "2014-10-16"))
    assert "use get_param or get_resource" in e.reason


def test_heat_stack_parses_its_template_and_checks_its_parameters() -> None:
    """OS::Heat::Stack's template (get_file or inline text) is parsed one level down; parameters are
    checked against it; a region and a computed template are handled as documented."""
    stack = {
        "type": "OS::Heat::Stack",
        "properties": {"template": {"get_file": "c.yaml"}, "parameters": {"x": 1}},
    }
    outputs = {
        "o": {"value": {"get_attr": ["s", "outputs", "o"]}},
        "n": {"value": {"get_attr": ["s", "stack_name"]}},
    }
    parse_template(old({"s": stack}, outputs=outputs), files={"c.yaml": CHILD})
    inline = {"type": "OS::Heat::Stack", "properties": {"template": CHILD, "parameters": {"x": "two"}}}
    e = error(old({"s": inline}))
    assert e.path == "resources.s.properties.parameters.x"
    bad = {
        "type": "OS::Heat::Stack",
        "properties": {"template": "heat_template_version: 2013-05-23\nnope: 1\n"},
    }
    e = error(old({"s": bad}))
    assert e.path == "resources.s.properties.template" and "in template inline" in e.reason
    remote = {"type": "OS::Heat::Stack", "properties": {"template": CHILD, "context": {"region_name": "R2"}}}
    assert "no regions" in error(old({"s": remote})).reason
    e = error(
        old({"s": stack}, outputs={"o": {"value": {"get_attr": ["s", "nope"]}}}), files={"c.yaml": CHILD}
    )
    assert "has no attribute 'nope'" in e.reason


def test_instance_group_and_launch_configuration_parse_and_warn() -> None:
    """The group's ignored properties are warned about; a negative Size and an unknown key are refused."""
    resources: dict[str, Any] = {
        "lc": {
            "type": "AWS::AutoScaling::LaunchConfiguration",
            "properties": {"ImageId": "i", "InstanceType": "t"},
        },
        "g": {
            "type": "OS::Heat::InstanceGroup",
            "properties": {
                "LaunchConfigurationName": {"get_resource": "lc"},
                "Size": 2,
                "AvailabilityZones": [],
            },
            "update_policy": {"RollingUpdate": {"MaxBatchSize": 1, "PauseTime": "PT1M"}},
        },
    }
    t = parse_template(old(resources, outputs={"l": {"value": {"get_attr": ["g", "InstanceList"]}}}))
    assert any("AvailabilityZones" in w for w in t.warnings)
    resources["g"]["properties"]["Size"] = -1
    assert error(old(resources)).path == "resources.g.properties.Size"


@pytest.mark.parametrize(
    ("text", "seconds"), [("PT0S", 0.0), ("PT1M30S", 90.0), ("PT2H", 7200.0), (None, 0.0)]
)
def test_pause_time_is_an_iso_duration(text: str | None, seconds: float) -> None:
    """RollingUpdate's PauseTime is read as CloudFormation writes it."""
    assert seconds == pause_seconds(text, "p")


def test_a_pause_time_that_is_no_duration_is_refused() -> None:
    """PauseTime '5 minutes' names its path."""
    with pytest.raises(TemplateError) as info:
        pause_seconds("5 minutes", "resources.g.update_policy.RollingUpdate.PauseTime")
    assert info.value.path.endswith("PauseTime")


def test_external_id_follows_heats_rules() -> None:
    """external_id needs newton; an external resource may not depend on another; a server or a
    stubbed type takes it (as written, a get_param too)."""
    ext = {"type": "OS::Nova::Server", "external_id": {"get_param": "sid"}}
    params = {"sid": {"type": "string", "default": "srv"}}
    t = parse_template(old({"e": ext}, "newton", parameters=params))
    assert {"get_param": "sid"} == t.resources["e"].external_id
    assert (
        "needs heat_template_version 2016-10-14"
        in error(old({"e": ext}, "2016-04-08", parameters=params)).reason
    )
    both = {
        "a": {"type": "OS::Heat::None"},
        "e": {"type": "OS::Heat::None", "external_id": "x", "depends_on": "a"},
    }
    assert "cannot depend" in error(old(both, "newton")).reason


def test_nova_server_answers_console_urls_and_tags() -> None:
    """console_urls and tags are attributes of OS::Nova::Server (DeployedServer has neither)."""
    outputs = {
        "c": {"value": {"get_attr": ["s", "console_urls", "novnc"]}},
        "t": {"value": {"get_attr": ["s", "tags"]}},
    }
    parse_template(old({"s": {"type": "OS::Nova::Server"}}, outputs=outputs))
    e = error(old({"s": {"type": "OS::Heat::DeployedServer"}}, outputs=outputs))
    assert "has no attribute 'console_urls'" in e.reason
