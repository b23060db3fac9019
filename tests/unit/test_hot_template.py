"""Parsing and static validation of HOT templates, and safe YAML loading."""

from __future__ import annotations

import datetime
import gc
import re
from typing import Any

import pytest

from control.hot import (
    MAX_TEMPLATE_BYTES,
    TYPES,
    Environment,
    TemplateError,
    apply_defaults,
    load_yaml,
    parse_template,
)

HEAD = "heat_template_version: 2018-08-31\n"

SCRIPT = """
heat_template_version: 2018-08-31
parameters:
  port: {type: number, default: 80}
resources:
  server:
    type: OS::Heat::DeployedServer
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: {get_file: run.sh}
      inputs: [{name: port, type: Number}]
      outputs: [{name: result}]
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: server}
      input_values: {port: {get_param: port}}
outputs:
  result:
    value: {get_attr: [dep, result]}
"""


def doc(resources: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    """A template as a map; resources given as a map of name -> definition."""
    return {"heat_template_version": "2018-08-31", "resources": resources or {}, **sections}


def error(source: Any, **kwargs: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse_template(source, **kwargs)
    return info.value


def deployment(**props: Any) -> dict[str, Any]:
    return {"type": "OS::Heat::SoftwareDeployment", "properties": {"server": "s1", **props}}


# --- loader --------------------------------------------------------------------------------


def test_error_str_is_path_and_reason():
    """str(TemplateError) is 'path: reason' and both parts are kept."""
    e = TemplateError("resources.web", "bad")
    assert (str(e), e.path, e.reason) == ("resources.web: bad", "resources.web", "bad")


def test_load_yaml_reports_line_and_column():
    """A YAML syntax error names the document and the line and column of the problem."""
    with pytest.raises(TemplateError) as info:
        load_yaml("a: 1\nb: [1, 2\n", "template")
    assert info.value.path == "template"
    assert "line 3 column 1" in info.value.reason


def test_load_yaml_keeps_unquoted_dates_as_text():
    """Unquoted YAML dates and timestamps come back as the text written."""
    data = load_yaml("v: 2018-08-31\nt: 2001-12-14t21:59:43.10-05:00\n", "t")
    assert data == {"v": "2018-08-31", "t": "2001-12-14t21:59:43.10-05:00"}


def test_load_yaml_refuses_oversized_text():
    """Text over MAX_TEMPLATE_BYTES is refused before parsing."""
    with pytest.raises(TemplateError, match="more than the limit"):
        load_yaml("a: " + "x" * MAX_TEMPLATE_BYTES, "template")


def test_load_yaml_takes_a_larger_cap_given():
    """A raised cap (``anneal serve --max-template-bytes``) admits text the default refuses, names itself."""
    text = "a: " + "x" * MAX_TEMPLATE_BYTES
    assert load_yaml(text, "template", 2 * MAX_TEMPLATE_BYTES) == {"a": "x" * MAX_TEMPLATE_BYTES}
    with pytest.raises(TemplateError, match=f"more than the limit of {MAX_TEMPLATE_BYTES // 2}"):
        load_yaml("a: " + "x" * MAX_TEMPLATE_BYTES, "template", MAX_TEMPLATE_BYTES // 2)


def test_load_yaml_node_cap_grows_with_the_size_cap():
    """The node cap is a million or one node per byte of the size cap: text at the cap always fits."""
    text = "[" + "0," * 1_100_000 + "0]"  # 1,100,002 nodes in 2.2 MB, no aliases
    assert len(load_yaml(text, "template", len(text))) == 1_100_001
    # only alias expansion can pass the cap: 60 aliases of a 20,000-item list are 1.2 million nodes
    bomb = "a: &a [" + "0," * 19_999 + "0]\nb: [" + ", ".join(["*a"] * 60) + "]\n"
    with pytest.raises(TemplateError, match="expands to more than 1000000 nodes through aliases"):
        load_yaml(bomb, "template")
    assert len(load_yaml(bomb, "template", 2_000_000)["b"]) == 60


def test_load_yaml_reads_json_text_as_json():
    """Text starting with '{' is read as JSON first (as Heat does): the same data as YAML gives."""
    text = '{"heat_template_version": "2018-08-31", "resources": {"r": {"type": "T", "n": [1, 2.5, null, true]}}}'
    assert load_yaml(text, "template") == load_yaml(text.replace("{", "{ "), "template")
    assert load_yaml(text, "template")["resources"]["r"]["n"] == [1, 2.5, None, True]
    # flow-style YAML that is not JSON still reads as YAML, and bad text gets YAML's error
    assert load_yaml("{a: 1, b: [x]}", "t") == {"a": 1, "b": ["x"]}
    with pytest.raises(TemplateError, match=r"t: invalid YAML at line 1 column \d+"):
        load_yaml('{"a": [1, }', "t")


def test_load_yaml_refuses_deep_json():
    """JSON nested deeper than 100 levels is refused like YAML is."""
    with pytest.raises(TemplateError, match="deeper than 100 levels"):
        load_yaml('{"a": ' + "[" * 150 + "]" * 150 + "}", "template")


def test_load_yaml_leaves_the_garbage_collector_as_it_found_it():
    """The collector is paused while a document is built and resumed after, on success and on error."""
    assert gc.isenabled()
    load_yaml("a: [1, 2]", "t")
    assert gc.isenabled()
    with pytest.raises(TemplateError):
        load_yaml("a: [unclosed", "t")
    assert gc.isenabled()
    gc.disable()
    try:
        load_yaml("a: 1", "t")
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()


def test_load_yaml_refuses_alias_bomb_before_building_it():
    """A billion-laughs document is refused by the event scan, at the alias that overflows."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(TemplateError, match=r"expands to more than .* \(line (\d+) column") as e:
        load_yaml("\n".join(lines), "template")
    # 9**7 nodes overflow the cap: refused on line 7 of 9, so the last lines are never expanded
    line = re.search(r"\(line (\d+) ", str(e.value))
    assert line is not None and line.group(1) == "7"


def test_load_yaml_refuses_too_many_aliases():
    """More than 100 alias nodes are refused."""
    text = "a: &a x\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    with pytest.raises(TemplateError, match="more than 100 aliases"):
        load_yaml(text, "template")


def test_load_yaml_accepts_a_few_aliases():
    """Ordinary anchors and aliases still work."""
    assert load_yaml("a: &x {k: v}\nb: *x\n", "t") == {"a": {"k": "v"}, "b": {"k": "v"}}


def test_load_yaml_refuses_deep_nesting_without_reading_it_all():
    """A document nested far too deep is refused near its start, not after parsing it.

    Our event scan refuses at level 101; libyaml from PyYAML 6.0.4 on refuses at flow
    level 1,001 while scanning ahead, before the scan sees the 101st event.
    """
    with pytest.raises(TemplateError, match=r"deeper than 100|maximum nesting depth") as e:
        load_yaml("[" * 200_000 + "]" * 200_000, "template")
    column = re.search(r"column (\d+)", str(e.value))
    assert column is not None and int(column.group(1)) <= 1_001


def test_load_yaml_refuses_depth_built_from_aliases():
    """An alias that makes a document deeper than 100 levels is refused."""
    deep = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60
    with pytest.raises(TemplateError, match="through an alias"):
        load_yaml(deep, "template")


def test_load_yaml_refuses_recursive_alias():
    """An alias to the collection that contains it is refused."""
    with pytest.raises(TemplateError, match="undefined or recursive"):
        load_yaml("a: &a [*a]\n", "template")


def test_load_yaml_refuses_non_json_tags():
    """Sets, binary and python tags are not accepted."""
    for text in ("!!set {a}", "!!binary aGk=", "!!python/object:os.system {}"):
        with pytest.raises(TemplateError):
            load_yaml(text, "template")


def test_load_yaml_refuses_several_documents():
    """Only one YAML document is accepted."""
    with pytest.raises(TemplateError, match="single document"):
        load_yaml("a: 1\n---\nb: 2\n", "template")


# --- versions and sections -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "version"),
    [
        ("2013-05-23", "2013-05-23"),
        ("2015-10-15", "2015-10-15"),
        ("newton", "2016-10-14"),
        ("ocata", "2017-02-24"),
        ("pike", "2017-09-01"),
        ("queens", "2018-03-02"),
        ("rocky", "2018-08-31"),
        ("'2018-03-02'", "2018-03-02"),
    ],
)
def test_versions_and_release_names_map_to_dates(written, version):
    """Accepted dates stay, release names map to their date."""
    assert parse_template(f"heat_template_version: {written}\n").version == version


def test_unquoted_yaml_date_version_is_accepted():
    """heat_template_version written as a bare YAML date parses."""
    assert parse_template(HEAD).version == "2018-08-31"


def test_date_object_version_is_accepted():
    """A map source holding a datetime.date version is accepted too."""
    assert parse_template({"heat_template_version": datetime.date(2017, 9, 1)}).version == "2017-09-01"


def test_unknown_version_lists_accepted_values():
    """An unknown version is refused with the accepted values."""
    e = error("heat_template_version: 2023-10-01\n")
    assert e.path == "heat_template_version"
    assert "'2023-10-01' is not supported" in e.reason
    assert "2013-05-23" in e.reason and "wallaby" in e.reason


def test_missing_version_is_refused():
    """A template without heat_template_version is refused."""
    assert error("resources: {}\n").path == "heat_template_version"


def test_unknown_section_is_named():
    """A top-level section outside HOT's is refused, naming it."""
    e = error(doc(mappings={}))
    assert e.path == "mappings" and "unknown section" in e.reason


def test_cfn_template_of_another_version_is_refused():
    """A CloudFormation template of a version Heat does not take is refused naming the one it does."""
    assert "'2010-09-09'" in error({"AWSTemplateFormatVersion": "2011-01-01"}).reason


def test_template_must_be_a_map():
    """A YAML list is not a template."""
    assert error("- a\n").path == "template"


def test_deep_map_source_is_refused():
    """A map source nested deeper than YAML input may be is refused."""
    node: dict[str, Any] = {}
    source = doc(outputs={"o": {"value": node}})
    for _ in range(150):
        node["x"] = {}
        node = node["x"]
    assert "deeper than" in error(source).reason


def test_description_must_be_text():
    """A non-string description is refused."""
    assert error(doc(description=[1])).path == "description"


def test_parameter_groups_checked():
    """parameter_groups may only name declared parameters, once each."""
    params = {"a": {"type": "string"}}
    ok = parse_template(doc(parameters=params, parameter_groups=[{"label": "L", "parameters": ["a"]}]))
    assert "a" in ok.parameters
    e = error(doc(parameters=params, parameter_groups=[{"parameters": ["b"]}]))
    assert e.path == "parameter_groups[0].parameters[0]"
    e = error(doc(parameters=params, parameter_groups=[{"parameters": ["a"]}, {"parameters": ["a"]}]))
    assert "more than one group" in e.reason


# --- parameters section ----------------------------------------------------------------------


def test_parameter_definition_fields_are_kept():
    """Type, default, hidden, label, description, immutable and constraints are kept."""
    t = parse_template(
        doc(
            parameters={
                "pw": {
                    "type": "string",
                    "default": "abcdef",
                    "hidden": True,
                    "label": "Password",
                    "description": "root",
                    "immutable": True,
                    "tags": ["x"],
                    "constraints": [{"length": {"min": 6}, "description": "six or more"}],
                }
            }
        )
    )
    p = t.parameters["pw"]
    assert (p.type, p.default, p.has_default, p.hidden, p.label, p.description, p.immutable) == (
        "string",
        "abcdef",
        True,
        True,
        "Password",
        "root",
        True,
    )
    assert p.constraints == ({"length": {"min": 6}, "description": "six or more"},)


def test_parameter_type_is_required():
    """A parameter without a type is refused."""
    assert error(doc(parameters={"p": {"default": 1}})).path == "parameters.p.type"


def test_parameter_unknown_key_is_refused():
    """Unknown keys in a parameter definition are refused."""
    assert error(doc(parameters={"p": {"type": "string", "secret": True}})).path == "parameters.p.secret"


def test_parameter_default_checked_against_type():
    """A default that does not convert to the type is refused."""
    e = error(doc(parameters={"p": {"type": "number", "default": "many"}}))
    assert (e.path, e.reason) == ("parameters.p.default", '"many" is not a number')


def test_parameter_default_checked_against_constraints():
    """A default that breaks a constraint is refused."""
    e = error(
        doc(
            parameters={
                "p": {"type": "number", "default": 0, "constraints": [{"range": {"min": 1, "max": 9}}]}
            }
        )
    )
    assert (e.path, e.reason) == ("parameters.p.default", "0 is not in range 1..9")


def test_constraint_must_fit_parameter_type():
    """A range constraint on a string parameter is refused."""
    e = error(doc(parameters={"p": {"type": "string", "constraints": [{"range": {"min": 1}}]}}))
    assert e.path == "parameters.p.constraints[0]" and "does not apply" in e.reason


@pytest.mark.parametrize(
    "constraint",
    [
        {"length": {}},
        {"range": {"min": "a"}},
        {"range": {"min": 5, "max": 1}},
        {"modulo": {"step": 2}},
        {"modulo": {"step": 0, "offset": 0}},
        {"modulo": {"step": 2, "offset": 3}},
        {"allowed_values": "a"},
        {"allowed_pattern": "("},
        {"custom_constraint": 5},
        {"bogus": 1},
        {"range": {"min": 1}, "length": {"min": 1}},
    ],
)
def test_malformed_constraints_are_refused(constraint):
    """Constraints with a wrong shape or value are refused at parse time."""
    ptype = "string" if ("length" in constraint or "allowed_pattern" in constraint) else "number"
    e = error(doc(parameters={"p": {"type": ptype, "constraints": [constraint]}}))
    assert e.path.startswith("parameters.p.constraints[0]")


def test_custom_constraint_is_accepted_with_a_warning():
    """An unknown custom_constraint is accepted and reported in warnings."""
    t = parse_template(
        doc(parameters={"k": {"type": "string", "constraints": [{"custom_constraint": "nova.keypair"}]}})
    )
    assert t.warnings == (
        "parameters.k.constraints[0]: custom_constraint 'nova.keypair' is not checked by Anneal",
    )


# --- resources -----------------------------------------------------------------------------


def test_script_template_parses():
    """A typical config + deployment + server template parses with its graph."""
    t = parse_template(SCRIPT, files={"run.sh": "echo"})
    assert list(t.resources) == ["server", "cfg", "dep"]
    assert t.dependencies("dep") == {"cfg", "server"}
    assert t.order() == ["server", "cfg", "dep"]
    assert t.resources["dep"].type == "OS::Heat::SoftwareDeployment"
    assert t.outputs["result"].value == {"get_attr": ["dep", "result"]}
    assert t.files == {"run.sh": "echo"} and t.warnings == ()


def test_order_is_topological_and_stable():
    """order() puts dependencies first and otherwise keeps template order."""
    t = parse_template(
        doc(
            {
                "c": {"type": "OS::Heat::None", "depends_on": ["b"]},
                "a": {"type": "OS::Heat::None"},
                "b": {"type": "OS::Heat::None", "properties": {"x": {"get_attr": ["d", "y"]}}},
                "d": {"type": "OS::Heat::None", "metadata": {"m": {"get_resource": "a"}}},
            }
        )
    )
    assert t.order() == ["a", "d", "b", "c"]
    assert t.dependencies("d") == {"a"}


def test_resource_definition_fields_are_kept():
    """metadata, depends_on, deletion_policy, update_policy and condition are kept."""
    t = parse_template(
        doc(
            {
                "a": {"type": "OS::Heat::None"},
                "b": {
                    "type": "OS::Heat::None",
                    "depends_on": "a",
                    "metadata": {"k": "v"},
                    "deletion_policy": "retain",
                    "update_policy": {"p": 1},
                    "condition": True,
                },
            }
        )
    )
    b = t.resources["b"]
    assert (b.depends_on, b.metadata, b.deletion_policy, b.update_policy, b.condition) == (
        ("a",),
        {"k": "v"},
        "Retain",
        {"p": 1},
        True,
    )


def test_bad_deletion_policy_is_refused():
    """deletion_policy outside Delete, Retain, Snapshot is refused."""
    e = error(doc({"a": {"type": "OS::Heat::None", "deletion_policy": "Keep"}}))
    assert e.path == "resources.a.deletion_policy"


def test_resource_name_must_be_simple():
    """Resource names are letters, digits, '_', '-' and '.'."""
    assert error(doc({"a b": {"type": "OS::Heat::None"}})).path == "resources.a b"


def test_resource_unknown_key_is_refused():
    """A misspelt resource key is refused."""
    assert error(doc({"a": {"type": "OS::Heat::None", "propertys": {}}})).path == "resources.a.propertys"


def test_external_id_is_refused_on_a_type_with_nothing_to_adopt():
    """external_id on a random string (nothing here to adopt) is refused at the key, naming what can adopt."""
    e = error(doc({"a": {"type": "OS::Heat::RandomString", "external_id": "x"}}))
    assert e.path == "resources.a.external_id"
    assert "OS::Heat::RandomString has nothing here to adopt" in e.reason and "software config" in e.reason


def test_resource_type_is_required():
    """A resource without a type is refused."""
    assert error(doc({"a": {}})).path == "resources.a.type"


def test_unsupported_infrastructure_type_suggests_registry():
    """An infrastructure type is refused with a resource_registry suggestion."""
    e = error(doc({"sg": {"type": "OS::Neutron::SecurityGroup"}}))
    assert e.path == "resources.sg.type"
    assert "'OS::Neutron::SecurityGroup' is not supported" in e.reason
    assert "OS::Heat::SoftwareDeployment" in e.reason
    assert 'resource_registry: {"OS::Neutron::SecurityGroup": OS::Heat::None}' in e.reason


def test_an_alarm_type_suggests_the_registry_too():
    """An Aodh alarm (no alarm service here) is refused with the resource_registry suggestion."""
    e = error(doc({"cpu_high": {"type": "OS::Aodh::GnocchiAggregationByResourcesAlarm"}}))
    assert 'resource_registry: {"OS::Aodh::GnocchiAggregationByResourcesAlarm": OS::Heat::None}' in e.reason


def test_unsupported_other_type_has_no_registry_suggestion():
    """A non-infrastructure unsupported type lists the supported types only."""
    e = error(doc({"r": {"type": "OS::Heat::SwiftSignal"}}))
    assert "supported types" in e.reason and "resource_registry" not in e.reason


def test_registry_maps_types_before_validation():
    """The environment's resource_registry maps types, keeping the original."""
    env = Environment(resource_registry={"OS::Neutron::*": "OS::Heat::None"})
    t = parse_template(
        doc({"net": {"type": "OS::Neutron::Net", "properties": {"name": "n"}}}), environment=env
    )
    assert (t.resources["net"].type, t.resources["net"].original_type) == (
        "OS::Heat::None",
        "OS::Neutron::Net",
    )
    assert t.warnings == ("resources.net.properties.name: accepted and ignored by OS::Heat::None",)


def test_unknown_property_is_refused():
    """A property the type does not have is refused, listing the known ones."""
    e = error(doc({"d": deployment(conifg="x")}))
    assert e.path == "resources.d.properties.conifg" and "known: config, server" in e.reason


def test_required_property_missing_is_refused():
    """A deployment without server is refused."""
    e = error(doc({"d": {"type": "OS::Heat::SoftwareDeployment"}}))
    assert e.path == "resources.d.properties.server" and "missing" in e.reason


def test_literal_property_type_is_checked():
    """A literal of the wrong type is refused; function calls are not checked."""
    e = error(doc({"d": deployment(input_values=[1])}))
    assert (e.path, e.reason) == ("resources.d.properties.input_values", "expected a map, got a list")
    parse_template(doc({"d": deployment(input_values={"get_param": "OS::stack_name"})}))


def test_allowed_property_values_are_checked():
    """Actions and signal transports must be among the allowed values."""
    e = error(doc({"d": deployment(actions=["CREATE", "REBOOT"])}))
    assert e.path == "resources.d.properties.actions[1]" and "'REBOOT' is not one of" in e.reason
    e = error(doc({"d": deployment(signal_transport="SMOKE")}))
    assert e.path == "resources.d.properties.signal_transport"
    parse_template(doc({"d": deployment(signal_transport="ZAQAR_SIGNAL", timeout=30)}))


def test_nova_compute_properties_are_ignored_with_warnings():
    """OS::Nova::Server compute properties are accepted and reported as ignored."""
    t = parse_template(
        doc(
            {
                "web": {
                    "type": "OS::Nova::Server",
                    "properties": {"image": "cirros", "flavor": "m1", "user_data_format": "SOFTWARE_CONFIG"},
                }
            }
        )
    )
    assert t.warnings == (
        "resources.web.properties.image: ignored (the control plane boots no servers)",
        "resources.web.properties.flavor: ignored (the control plane boots no servers)",
    )


def test_config_input_items_are_checked():
    """SoftwareConfig inputs items are checked key by key with precise paths."""
    cfg = {
        "type": "OS::Heat::SoftwareConfig",
        "properties": {"inputs": [{"name": "a"}, {"name": "b", "type": "Text"}]},
    }
    e = error(doc({"cfg": cfg}))
    assert e.path == "resources.cfg.properties.inputs[1].type"
    cfg["properties"] = {"inputs": [{"type": "String"}]}
    assert error(doc({"cfg": cfg})).path == "resources.cfg.properties.inputs[0].name"
    cfg["properties"] = {"outputs": [{"name": "o", "colour": "red"}]}
    assert error(doc({"cfg": cfg})).path == "resources.cfg.properties.outputs[0].colour"
    cfg["properties"] = {"outputs": [{"name": "o", "error_output": "yes"}], "config": {"k": 1}}
    parse_template(doc({"cfg": cfg}))


def test_depends_on_target_must_exist():
    """depends_on naming an undefined resource is refused."""
    e = error(doc({"a": {"type": "OS::Heat::None", "depends_on": ["b"]}}))
    assert (e.path, e.reason) == ("resources.a.depends_on[0]", "resource 'b' is not defined")


def test_dependency_cycle_is_refused():
    """A cycle through depends_on and get_resource is reported as a path."""
    e = error(
        doc(
            {
                "a": {"type": "OS::Heat::None", "depends_on": "b"},
                "b": {"type": "OS::Heat::None", "properties": {"x": {"get_resource": "a"}}},
            }
        )
    )
    assert (e.path, e.reason) == ("resources", "dependency cycle: a -> b -> a")


def test_self_dependency_is_a_cycle():
    """A resource that refers to itself is a cycle."""
    e = error(doc({"a": {"type": "OS::Heat::None", "properties": {"x": {"get_attr": ["a", "y"]}}}}))
    assert e.reason == "dependency cycle: a -> a"


# --- functions -----------------------------------------------------------------------------


def test_get_resource_target_must_exist():
    """get_resource of an undefined resource is refused at its path."""
    e = error(doc({"d": deployment(config={"get_resource": "nope"})}))
    assert (e.path, e.reason) == (
        "resources.d.properties.config",
        "get_resource: resource 'nope' is not defined",
    )


def test_get_attr_target_must_exist():
    """get_attr of an undefined resource is refused."""
    e = error(doc(outputs={"o": {"value": {"get_attr": ["ghost", "x"]}}}))
    assert (e.path, e.reason) == ("outputs.o.value", "get_attr: resource 'ghost' is not defined")


def test_get_attr_attribute_checked_when_type_lists_them():
    """get_attr of an attribute a type does not have is refused; deployments accept any."""
    resources = {"s": {"type": "OS::Heat::DeployedServer"}, "d": deployment(server={"get_resource": "s"})}
    e = error(doc(resources, outputs={"o": {"value": {"get_attr": ["s", "flavor"]}}}))
    assert e.path == "outputs.o.value" and "has no attribute 'flavor'" in e.reason
    parse_template(
        doc(
            resources,
            outputs={
                "o": {"value": {"get_attr": ["d", "anything", 0]}},
                "p": {"value": {"get_attr": ["s", "networks", "x"]}},
            },
        )
    )


def test_get_attr_needs_an_attribute_name():
    """get_attr with only a resource name is refused."""
    e = error(doc({"a": {"type": "OS::Heat::None"}}, outputs={"o": {"value": {"get_attr": ["a"]}}}))
    assert "get_attr: expects a list of at least 2 arguments" == e.reason


def test_get_param_must_be_declared_or_pseudo():
    """get_param accepts declared and pseudo parameters only."""
    parse_template(doc(outputs={"o": {"value": {"get_param": "OS::stack_id"}}}))
    e = error(doc(outputs={"o": {"value": {"get_param": ["nope", "k"]}}}))
    assert (e.path, e.reason) == ("outputs.o.value", "get_param: parameter 'nope' is not declared")


def test_get_file_must_be_provided():
    """get_file of a path missing from files is refused with its name."""
    e = error(SCRIPT)
    assert (e.path, e.reason) == (
        "resources.cfg.properties.config",
        "get_file: file 'run.sh' was not provided",
    )


def test_cfn_function_after_its_version_is_refused_naming_the_hot_one():
    """Fn::Join in a template newer than 2013-05-23 is refused at its path, naming list_join."""
    e = error(doc(outputs={"o": {"value": {"x": [{"Fn::Join": ["", ["a"]]}]}}}))
    assert e.path == "outputs.o.value.x[0]"
    assert e.reason == (
        "function Fn::Join is only in heat_template_version 2013-05-23 (Heat's rule); "
        "this template is 2018-08-31: use list_join"
    )


def test_a_yaql_expression_that_does_not_parse_is_refused_at_its_path():
    """A literal yaql expression is parsed when the template is, as Heat validates it."""
    e = error(doc(outputs={"o": {"value": {"yaql": {"expression": "$.data.("}}}}))
    assert e.path == "outputs.o.value.yaql.expression" and "bad expression" in e.reason


def test_two_argument_if_needs_wallaby():
    """if with two arguments is refused before 2021-04-16, naming the version; accepted from it on."""
    value = {"if": [True, "x"]}
    e = error(doc(outputs={"o": {"value": value}}))
    assert "needs heat_template_version 2021-04-16 (wallaby)" in e.reason
    parse_template({"heat_template_version": "wallaby", "outputs": {"o": {"value": value}}})


def test_get_input_passes_through():
    """get_input (structured config data) is not a function and is kept as written."""
    cfg = {"type": "OS::Heat::SoftwareConfig", "properties": {"config": {"a": {"get_input": "x"}}}}
    t = parse_template(doc({"cfg": cfg}))
    assert t.resources["cfg"].properties["config"] == {"a": {"get_input": "x"}}


def test_function_argument_shape_is_checked():
    """A call with the wrong argument form is refused statically."""
    e = error(doc(outputs={"o": {"value": {"list_join": ","}}}))
    assert (e.path, e.reason) == ("outputs.o.value", "list_join: expects a list of at least 2 arguments")
    e = error(doc(outputs={"o": {"value": {"str_replace": {"template": "x"}}}}))
    assert "misses ['params']" in e.reason


def test_nested_calls_are_checked():
    """Calls inside function arguments are checked too."""
    e = error(doc(outputs={"o": {"value": {"list_join": [",", [{"get_param": "x"}]]}}}))
    assert e.path == "outputs.o.value.list_join[1][0]"


# --- outputs and conditions --------------------------------------------------------------------


def test_output_needs_value():
    """An output without value is refused."""
    assert error(doc(outputs={"o": {"description": "d"}})).path == "outputs.o"


def test_output_fields_are_kept():
    """An output keeps value, description and condition."""
    t = parse_template(doc(outputs={"o": {"value": 1, "description": "d", "condition": False}}))
    o = t.outputs["o"]
    assert (o.name, o.value, o.description, o.condition) == ("o", 1, "d", False)


def test_conditions_are_validated():
    """Conditions use condition functions, parameters and other conditions."""
    t = parse_template(
        doc(
            {"a": {"type": "OS::Heat::None", "condition": "prod"}},
            parameters={"env": {"type": "string", "default": "dev"}},
            conditions={
                "prod": {"equals": [{"get_param": "env"}, "prod"]},
                "dev": {"not": "prod"},
                "both": {"and": ["prod", {"or": ["dev", True]}]},
                "has": {"contains": ["x", ["x"]]},
            },
            outputs={"o": {"value": {"if": ["prod", 1, 2]}, "condition": {"not": "dev"}}},
        )
    )
    assert list(t.conditions) == ["prod", "dev", "both", "has"]


def test_undefined_condition_is_refused():
    """A resource, if or not naming an undefined condition is refused."""
    assert error(doc({"a": {"type": "OS::Heat::None", "condition": "x"}})).path == "resources.a.condition"
    e = error(doc(outputs={"o": {"value": {"if": ["x", 1, 2]}}}))
    assert (e.path, e.reason) == ("outputs.o.value.if[0]", "condition 'x' is not defined")


def test_resource_functions_are_refused_in_conditions():
    """Conditions cannot use get_resource or other value functions."""
    e = error(
        doc({"a": {"type": "OS::Heat::None"}}, conditions={"c": {"equals": [{"get_resource": "a"}, "x"]}})
    )
    assert e.path == "conditions.c.equals[0]" and "cannot be used in a condition" in e.reason


CONDITION_CALLS = {
    "equals": [{"get_param": "env"}, "prod"],
    "not": "prod",
    "and": ["prod", True],
    "or": [False, "prod"],
}


@pytest.mark.parametrize("name", sorted(CONDITION_CALLS))
def test_condition_functions_are_accepted_where_a_condition_is_read(name: str) -> None:
    """equals/not/and/or: in the conditions section, a resource's and an output's condition, if's condition."""
    call = {name: CONDITION_CALLS[name]}
    t = parse_template(
        doc(
            {
                "a": {
                    "type": "OS::Heat::Value",
                    "condition": call,
                    "properties": {"value": {"if": [call, 1, {"if": [{"not": call}, 2, 3]}]}},
                }
            },
            parameters={"env": {"type": "string", "default": "dev"}},
            conditions={"prod": {"equals": [{"get_param": "env"}, "prod"]}, "c": call},
            outputs={"o": {"value": {"if": [call, 1, 2]}, "condition": call}},
        )
    )
    assert t.conditions["c"] == call and t.resources["a"].condition == call


@pytest.mark.parametrize("name", sorted(CONDITION_CALLS))
@pytest.mark.parametrize(
    ("place", "path"),
    [
        ("property", "resources.a.properties.value"),
        ("nested", "resources.a.properties.value.list_join[1][0]"),
        ("metadata", "resources.a.metadata.m"),
        ("output", "outputs.o.value"),
        ("if branch", "outputs.o.value.if[1]"),
    ],
)
def test_condition_functions_are_refused_elsewhere(name: str, place: str, path: str) -> None:
    """Outside a condition, equals/not/and/or are refused at their path, naming the function."""
    call = {name: CONDITION_CALLS[name]}
    resource: dict[str, Any] = {"type": "OS::Heat::Value", "properties": {"value": 1}}
    outputs: dict[str, Any] = {}
    if place == "property":
        resource["properties"]["value"] = call
    elif place == "nested":
        resource["properties"]["value"] = {"list_join": [",", [call]]}
    elif place == "metadata":
        resource["metadata"] = {"m": call}
    elif place == "output":
        outputs = {"o": {"value": call}}
    else:
        outputs = {"o": {"value": {"if": ["prod", call, "x"]}}}
    e = error(
        doc(
            {"a": resource},
            parameters={"env": {"type": "string", "default": "dev"}},
            conditions={"prod": {"equals": [{"get_param": "env"}, "prod"]}},
            outputs=outputs,
        )
    )
    assert e.path == path
    assert e.reason.startswith(f"{name} is only allowed in conditions")


def test_condition_cycle_is_refused():
    """Conditions that refer to each other in a loop are refused."""
    e = error(doc(conditions={"a": {"not": "b"}, "b": {"and": [True, "a"]}}))
    assert (e.path, e.reason) == ("conditions", "condition cycle: a -> b -> a")


def test_resource_and_file_references_must_be_literal():
    """get_resource, get_attr and get_file arguments cannot be computed."""
    e = error(
        doc(
            {"a": {"type": "OS::Heat::None"}},
            parameters={"p": {"type": "string", "default": "a"}},
            outputs={"o": {"value": {"get_resource": {"get_param": "p"}}}},
        )
    )
    assert (e.path, e.reason) == (
        "outputs.o.value",
        "get_resource: the arguments must be written out, not computed",
    )


def test_apply_defaults_fills_absent_properties():
    """apply_defaults sets absent or null properties to copies of their defaults."""
    spec = TYPES["OS::Heat::SoftwareDeployment"]
    props = apply_defaults(spec, {"server": "s", "actions": None})
    assert props == {"server": "s", "actions": ["CREATE", "UPDATE"]}
    props["actions"].append("DELETE")
    assert spec.properties["actions"].default == ["CREATE", "UPDATE"]
    assert apply_defaults(TYPES["OS::Heat::SoftwareConfig"], {})["group"] == "Heat::Ungrouped"


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("resources:\n  a: {type: OS::Heat::None}\n  a: {type: OS::Heat::Value}\n", "a", 3),
        ('{"parameters": {"p": {"type": "string"}}, "parameters": {}}', "parameters", 1),
        ("outputs:\n  o:\n    value: 1\n    value: 2\n", "value", 4),
    ],
)
def test_load_yaml_refuses_a_key_given_twice_naming_it_and_its_line(text: str, key: str, line: int) -> None:
    """A duplicate key (YAML or JSON text) is refused as Heat refuses it, naming the key and its line."""
    with pytest.raises(TemplateError) as caught:
        load_yaml(text, "template")
    assert f"duplicate key '{key}'" in str(caught.value)
    assert f"line {line}" in str(caught.value)


def test_load_yaml_lets_a_key_override_what_a_merge_brought():
    """A key a `<<` merge brought in may be given again: YAML says the explicit one wins."""
    text = "base: &b {a: 1, c: 3}\nderived:\n  <<: *b\n  a: 2\n"
    assert load_yaml(text, "template")["derived"] == {"a": 2, "c": 3}
