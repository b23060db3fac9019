"""CloudFormation-format templates read as HOT: sections, parameters, functions and error paths."""

from __future__ import annotations

from typing import Any

import pytest

from control.hot import TemplateError, parse_template
from control.hot.cfn import find_in_map, member_list_to_map, select


def cfn(resources: dict[str, Any], **sections: Any) -> dict[str, Any]:
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources, **sections}


def value(v: Any) -> dict[str, Any]:
    return {"Type": "OS::Heat::Value", "Properties": {"value": v}}


def error(source: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse_template(source)
    return info.value


def test_parameters_become_hot_declarations_with_heat_constraint_order() -> None:
    """Type, Default, NoEcho, Min/Max Value and Length (numbers or numeric strings), AllowedValues
    and AllowedPattern become HOT's, each constraint carrying ConstraintDescription."""
    t = parse_template(
        cfn(
            {"v": value("x")},
            Parameters={
                "n": {"Type": "Number", "Default": "3", "MinValue": "1", "MaxValue": 9.5},
                "s": {
                    "Type": "String",
                    "NoEcho": "TRUE",
                    "MaxLength": 4,
                    "AllowedPattern": "[a-z]*",
                    "ConstraintDescription": "lower",
                    "Default": "ab",
                },
                "l": {"Type": "CommaDelimitedList", "Default": "a,b", "AllowedValues": ["a", "b"]},
            },
        )
    )
    n, s, lst = (t.parameters[k] for k in "nsl")
    assert ("number", ({"range": {"min": 1, "max": 9.5}},)) == (n.type, n.constraints)
    assert s.hidden and not n.hidden
    assert (
        {"length": {"max": 4}, "description": "lower"},
        {"allowed_pattern": "[a-z]*", "description": "lower"},
    ) == s.constraints
    assert "comma_delimited_list" == lst.type


def test_a_bad_parameter_is_named_as_the_cfn_template_spells_it() -> None:
    """An unknown key, an unknown Type and a default breaking its constraint name Parameters.NAME.Key."""
    assert "Parameters.p.Typo" == error(cfn({}, Parameters={"p": {"Type": "String", "Typo": 1}})).path
    assert (
        "Parameters.p.Type" == error(cfn({}, Parameters={"p": {"Type": "AWS::EC2::KeyPair::KeyName"}})).path
    )
    bad = cfn({}, Parameters={"p": {"Type": "String", "Default": "x", "AllowedValues": ["y"]}})
    assert "Parameters.p.Default" == error(bad).path


def test_find_in_map_is_looked_up_at_parse_when_written_out_and_at_evaluation_otherwise() -> None:
    """Literal keys give the value itself; a Ref key gives a call on the mapping; a missing key or
    mapping is an error naming the call."""
    maps = {"M": {"a": {"x": 1}, "b": {"x": 2}}}
    t = parse_template(
        cfn(
            {"v": value([{"Fn::FindInMap": ["M", "a", "x"]}, {"Fn::FindInMap": ["M", {"Ref": "k"}, "x"]}])},
            Mappings=maps,
            Parameters={"k": {"Type": "String", "Default": "b"}},
        )
    )
    literal, computed = t.resources["v"].properties["value"]
    assert 1 == literal
    assert {"Fn::FindInMap": [maps["M"], {"get_param": "k"}, "x"]} == computed
    assert 2 == find_in_map([maps["M"], "b", "x"], "p")
    assert "no key 'c'" in error(cfn({"v": value({"Fn::FindInMap": ["M", "c", "x"]})}, Mappings=maps)).reason
    assert (
        "not in Mappings"
        in error(cfn({"v": value({"Fn::FindInMap": ["N", "a", "x"]})}, Mappings=maps)).reason
    )
    with pytest.raises(TemplateError, match="has no 'y'"):
        find_in_map([maps["M"], "a", "y"], "p")


def test_condition_functions_only_in_2010_09_09_and_cfn_only_functions_not_in_hot() -> None:
    """Fn::If, Fn::Equals and the Conditions section are AWSTemplateFormatVersion's only; a HOT
    template calling Fn::GetAtt or Fn::FindInMap is told HOT's equivalent."""
    heat = {"HeatTemplateFormatVersion": "2012-12-12", "Resources": {"v": value({"Fn::If": ["c", 1, 2]})}}
    assert "Fn::If is not supported in a 2012-12-12 template" in error(heat).reason
    assert "Conditions" == error({**heat, "Conditions": {"c": True}}).path
    hot = {
        "heat_template_version": "2013-05-23",
        "resources": {
            "v": {"type": "OS::Heat::Value", "properties": {"value": {"Fn::GetAtt": ["v", "value"]}}}
        },
    }
    assert "HOT has get_attr" in error(hot).reason


def test_errors_after_the_rewrite_name_cfn_keys_even_for_dotted_resource_names() -> None:
    """A problem found in the HOT form is reported at Resources.NAME.Properties..., the resource
    name kept whole when it holds a dot."""
    bad = cfn({"a.b": {"Type": "OS::Heat::SoftwareConfig", "Properties": {"nope": 3}}})
    assert error(bad).path.startswith("Resources.a.b.Properties.nope")
    assert "Resources.a.b.Typo" == error(cfn({"a.b": {"Type": "OS::Heat::None", "Typo": 1}})).path
    assert (
        "Resources.x.DependsOn[0]" == error(cfn({"x": {"Type": "OS::Heat::None", "DependsOn": ["y"]}})).path
    )


def test_member_list_to_map_and_select_of_json_text_as_heat() -> None:
    """Fn::MemberListToMap pairs '.member.N.Key'/'.member.N.Value'; Fn::Select reads a string as JSON."""
    members = [".member.0.Key=a", ".member.0.Value=1", ".member.1.Key=b", ".member.1.Value=2"]
    assert {"a": "1", "b": "2"} == member_list_to_map(["Key", "Value", members], "p")
    assert "y" == select([1, '["x", "y"]'], "p") and "v" == select(["k", '{"k": "v"}'], "p")
    with pytest.raises(TemplateError, match="JSON"):
        select([0, "not json"], "p")


def test_pseudo_parameters_and_unknown_sections() -> None:
    """Ref AWS::StackName reads ours, AWS::StackId Heat's ARN of the stack, AWS::Region is Heat's
    default; a stray section or a second version key is refused naming it."""
    t = parse_template(
        cfn({"v": value([{"Ref": "AWS::StackName"}, {"Ref": "AWS::StackId"}, {"Ref": "AWS::Region"}])})
    )
    name, arn, region = t.resources["v"].properties["value"]
    assert ({"get_param": "OS::stack_name"}, "ap-southeast-1") == (name, region)
    parts = ["arn:openstack:heat::", "OS::project_id", ":stacks/", "OS::stack_name", "/", "OS::stack_id"]
    assert parts == [p if isinstance(p, str) else p["get_param"] for p in arn["list_join"][1]]
    assert "Transform" == error(cfn({}, Transform="AWS::Serverless")).path
    assert "HeatTemplateFormatVersion" == error(cfn({}, HeatTemplateFormatVersion="2012-12-12")).path


def test_warnings_name_the_cfn_path() -> None:
    """A property accepted and ignored is warned about at Resources.NAME.Properties.KEY."""
    t = parse_template(cfn({"g": {"Type": "OS::Nova::Server", "Properties": {"image": "cirros"}}}))
    assert any(w.startswith("Resources.g.Properties.image: ") for w in t.warnings), t.warnings


def test_a_hot_function_in_a_cfn_template_is_refused_naming_its_path_and_the_cfn_one() -> None:
    """get_param, get_attr, list_join... are HOT's: in an AWSTemplateFormatVersion template each is
    refused where it is written, naming the CFN function to write instead (or that there is none)."""
    params = {"P": {"Type": "String", "Default": "x"}}
    found = error(cfn({"v": value({"x": [{"get_param": "P"}]})}, Parameters=params))
    assert "Resources.v.Properties.value.x[0].get_param" == found.path
    assert "write Ref" in found.reason and "plain data" in found.reason
    found = error(cfn({"v": value(1)}, Outputs={"o": {"Value": {"get_attr": ["v", "value"]}}}))
    assert ("Outputs.o.Value.get_attr", True) == (found.path, "write Fn::GetAtt" in found.reason)
    found = error(cfn({"v": value({"yaql": {"expression": "1"}})}))
    assert "Resources.v.Properties.value.yaql" == found.path and "no such function" in found.reason
    heat_format = {
        "HeatTemplateFormatVersion": "2012-12-12",
        "Resources": {"v": value({"list_join": ["", []]})},
    }
    assert "write Fn::Join" in error(heat_format).reason


INNER = """AWSTemplateFormatVersion: 2010-09-09
Outputs:
  Address: {Value: here}
  Port: {Value: 80}
"""


def nested_stack(attribute: str, url: Any = "inner.yaml") -> dict[str, Any]:
    """A CFN parent with one AWS::CloudFormation::Stack and an output reading Fn::GetAtt [Inner, attribute]."""
    return cfn(
        {"Inner": {"Type": "AWS::CloudFormation::Stack", "Properties": {"TemplateURL": url}}},
        Outputs={"Seen": {"Value": {"Fn::GetAtt": ["Inner", attribute]}}},
    )


def test_getatt_of_a_nested_stacks_outputs_names_an_output_of_its_template() -> None:
    """Fn::GetAtt [Inner, Outputs.NAME]: NAME must be an output of TemplateURL's template; else the
    error names the get_attr's path in the parent, the file and the outputs it has."""
    files = {"inner.yaml": INNER}
    assert "Inner" in parse_template(nested_stack("Outputs.Port"), files=files).resources
    with pytest.raises(TemplateError) as info:
        parse_template(nested_stack("Outputs.Adress"), files=files)
    assert "Outputs.Seen.Value" == info.value.path
    assert "template inner.yaml has no output 'Adress'; its outputs: Address, Port" in info.value.reason
    with pytest.raises(TemplateError) as info:
        parse_template(
            nested_stack("Outputs.Port"), files={"inner.yaml": "AWSTemplateFormatVersion: 2010-09-09\n"}
        )
    assert "has no output 'Port'; its outputs: none" in info.value.reason


def test_getatt_of_a_nested_stack_is_checked_in_a_hot_parent_too() -> None:
    """A HOT parent's get_attr [inner, Outputs.NAME] of an AWS::CloudFormation::Stack is checked the same way."""
    hot = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "inner": {"type": "AWS::CloudFormation::Stack", "properties": {"TemplateURL": "i.yaml"}}
        },
        "outputs": {"a": {"value": {"get_attr": ["inner", "Outputs.Address"]}}},
    }
    assert parse_template(hot, files={"i.yaml": INNER}).outputs["a"]
    hot["outputs"] = {"a": {"value": {"get_attr": ["inner", "Outputs.Host", "x"]}}}
    with pytest.raises(TemplateError) as info:
        parse_template(hot, files={"i.yaml": INNER})
    assert ("outputs.a.value", True) == (info.value.path, "no output 'Host'" in info.value.reason)
