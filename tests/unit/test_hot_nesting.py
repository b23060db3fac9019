"""Template resources at parse time: files, depth cap, parameters as properties, outputs as attributes."""

from __future__ import annotations

import pytest

from control.hot import (
    Environment,
    Nesting,
    Template,
    TemplateError,
    nesting,
    parse_environment,
    parse_template,
)
from control.hot.files import canonical, closure, key_for, lookup
from control.hot.loader import load_yaml

HEAD = "heat_template_version: 2018-08-31\n"
CHILD = HEAD + (
    "parameters:\n  size: {type: number, constraints: [{range: {min: 1, max: 9}}]}\n"
    "  label: {type: string, default: x}\n"
    "resources:\n  inner: {type: OS::Heat::Value, properties: {value: {get_param: size}}}\n"
    "outputs:\n  doubled: {value: {get_attr: [inner, value]}}\n"
)


def parse(text: str, files: dict[str, str], env: Environment | None = None, depth: int = 5) -> Template:
    return parse_template(text, files=files, environment=env, nesting=Nesting(0, depth))


def error(text: str, files: dict[str, str], env: Environment | None = None, depth: int = 5) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse(text, files, env, depth)
    return info.value


def test_a_template_type_parses_its_template_and_keys_it_by_file():
    """A type naming a template in the files becomes a resource of that template."""
    t = parse(HEAD + "resources:\n  box: {type: child.yaml, properties: {size: 3}}\n", {"child.yaml": CHILD})
    box = t.resources["box"]
    assert ("child.yaml", "child.yaml") == (box.type, box.original_type)
    assert box.nested is not None and set(box.nested.outputs) == {"doubled"}


def test_a_registry_alias_names_the_template():
    """An OS::TripleO::*-style alias in the resource_registry maps to the template."""
    env = parse_environment("resource_registry: {'OS::TripleO::Box': child.yaml}\n")
    t = parse(
        HEAD + "resources:\n  box: {type: OS::TripleO::Box, properties: {size: 3}}\n",
        {"child.yaml": CHILD},
        env,
    )
    assert ("child.yaml", "OS::TripleO::Box") == (t.resources["box"].type, t.resources["box"].original_type)


@pytest.mark.parametrize(
    ("props", "path", "says"),
    [
        ("{size: 3, colour: red}", "resources.box.properties.colour", "has no parameter 'colour'"),
        ("{label: y}", "resources.box.properties.size", "is required"),
        ("{size: 12}", "resources.box.properties.size", "9"),
        ("{size: many}", "resources.box.properties.size", "number"),
    ],
)
def test_properties_are_checked_against_the_templates_parameters(props: str, path: str, says: str) -> None:
    """Unknown, missing and out-of-range properties are refused at the property's path."""
    e = error(HEAD + f"resources:\n  box: {{type: child.yaml, properties: {props}}}\n", {"child.yaml": CHILD})
    assert e.path == path and says in e.reason


def test_parameter_defaults_satisfy_a_required_parameter():
    """A nested parameter without a default may come from the environment's parameter_defaults."""
    env = Environment(parameter_defaults={"size": 2})
    parse(HEAD + "resources:\n  box: {type: child.yaml}\n", {"child.yaml": CHILD}, env)


def test_attributes_are_outputs_stack_id_and_nested_resources():
    """get_attr on a template resource may name an output, OS::stack_id or resource.<name>.<attr>."""
    outputs = (
        "outputs:\n  a: {value: {get_attr: [box, doubled]}}\n  b: {value: {get_attr: [box, OS::stack_id]}}\n"
    )
    outputs += "  c: {value: {get_attr: [box, resource.inner.value]}}\n"
    base = HEAD + "resources:\n  box: {type: child.yaml, properties: {size: 3}}\n"
    parse(base + outputs, {"child.yaml": CHILD})
    e = error(base + "outputs:\n  a: {value: {get_attr: [box, tripled]}}\n", {"child.yaml": CHILD})
    assert e.path == "outputs.a.value" and "no output 'tripled'" in e.reason and "doubled" in e.reason
    e = error(base + "outputs:\n  a: {value: {get_attr: [box, resource.nope.x]}}\n", {"child.yaml": CHILD})
    assert "has no resource 'nope'" in e.reason


def test_a_problem_inside_a_nested_template_names_both_paths():
    """An error in the nested template is reported at the resource's type, with the inner path."""
    bad = HEAD + "resources:\n  inner: {type: OS::Heat::Value, properties: {valeu: 1}}\n"
    e = error(HEAD + "resources:\n  box: {type: bad.yaml}\n", {"bad.yaml": bad})
    assert e.path == "resources.box.type"
    assert "in template bad.yaml: resources.inner.properties.valeu" in e.reason


def test_a_missing_template_says_how_it_travels():
    """A template type not in the files is refused, saying files carry it."""
    e = error(HEAD + "resources:\n  box: {type: gone.yaml}\n", {})
    assert e.path == "resources.box.type" and "'gone.yaml' was not provided" in e.reason


def test_depth_is_capped_by_the_operators_setting():
    """Three levels parse under a cap of 3 and are refused under a cap of 2, naming the limit."""
    files = {
        "a.yaml": HEAD + "resources:\n  b: {type: b.yaml}\n",
        "b.yaml": HEAD + "resources:\n  c: {type: c.yaml}\n",
        "c.yaml": HEAD + "resources:\n  v: {type: OS::Heat::None}\n",
    }
    top = HEAD + "resources:\n  a: {type: a.yaml}\n"
    parse(top, files, depth=3)
    e = error(top, files, depth=2)
    assert e.path == "resources.a.type" and "more than the limit of 2" in e.reason


def test_per_resource_mapping_applies_inside_the_nested_stack():
    """resources: {outer: {inner: {Type: t}}} maps a type for the resource inner of outer's stack."""
    child = HEAD + "resources:\n  inner: {type: OS::Custom::Thing}\n"
    env = parse_environment(
        "resource_registry:\n  resources:\n    outer:\n      inner: {OS::Custom::Thing: OS::Heat::None}\n"
    )
    t = parse(HEAD + "resources:\n  outer: {type: child.yaml}\n", {"child.yaml": child}, env)
    inner = t.resources["outer"].nested
    assert inner is not None and inner.resources["inner"].type == "OS::Heat::None"
    e = error(HEAD + "resources:\n  other: {type: child.yaml}\n", {"child.yaml": child}, env)
    assert "OS::Custom::Thing" in e.reason


def test_names_in_a_nested_template_are_relative_to_it():
    """A nested template's get_file and template names are keys relative to its own directory."""
    source = {
        "resources": {
            "a": {"type": "leaf.yaml", "properties": {"x": {"get_file": "../s.sh"}}},
            "g": {"type": "OS::Heat::ResourceGroup", "properties": {"resource_def": {"type": "m.yaml"}}},
            "u": {"type": "file:///srv/u.yaml"},
        }
    }
    out = canonical(source, "lib/mid.yaml")
    assert out["resources"]["a"]["type"] == "lib/leaf.yaml"
    assert out["resources"]["a"]["properties"]["x"] == {"get_file": "s.sh"}
    assert out["resources"]["g"]["properties"]["resource_def"]["type"] == "lib/m.yaml"
    assert out["resources"]["u"]["type"] == "file:///srv/u.yaml"
    assert key_for("file:///srv/t/a.yaml", "b.yaml") == "file:///srv/t/b.yaml"
    assert key_for("~/t/a.yaml", "../b.yaml") == "~/b.yaml"


def test_lookup_accepts_keys_written_either_way():
    """./x and x name the same file, whichever way the client keyed it."""
    assert lookup({"x.sh": ""}, "./x.sh") == "x.sh"
    assert lookup({"./x.sh": ""}, "x.sh") == "./x.sh"
    assert lookup({"x.sh": ""}, "y.sh") is None


def test_closure_is_what_a_nested_template_reaches():
    """A nested stack carries the templates and files its template reaches, and nothing else."""
    files = {
        "lib/mid.yaml": HEAD + "resources:\n  l: {type: leaf.yaml}\n",
        "lib/leaf.yaml": HEAD
        + "resources:\n  v: {type: OS::Heat::Value, properties: {value: {get_file: v.txt}}}\n",
        "lib/v.txt": "value",
        "other.sh": "unrelated",
    }
    assert set(closure(files, ["lib/mid.yaml"], load_yaml)) == {"lib/mid.yaml", "lib/leaf.yaml", "lib/v.txt"}


def test_a_member_template_is_read_once_for_equal_text_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The members of a group read their template file once (the same text), a changed text anew."""
    reads: list[str] = []

    def counted(text: str, what: str, *args: object) -> object:
        reads.append(what)
        return load_yaml(text, what)

    monkeypatch.setattr(nesting, "load_yaml", counted)
    monkeypatch.setattr(nesting, "_READ", type(nesting._READ)())  # nothing read by other tests
    first = [nesting.load_nested({"m.yaml": CHILD}, "m.yaml", f"resources.g{i}") for i in range(50)]
    changed = nesting.load_nested({"m.yaml": CHILD + "description: two\n"}, "m.yaml", "resources.h")
    assert ["files[m.yaml]", "files[m.yaml]"] == reads
    assert all(f == first[0] for f in first), first
    assert "two" == changed[1]["description"] and "description" not in first[0][1]


def test_the_files_of_a_nested_stack_are_computed_once_per_files_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """Members made from one stack's files share its closure; another map of files is read anew."""
    walked: list[tuple[str, ...]] = []

    def counted(files: dict[str, str], roots: tuple[str, ...], load: object) -> dict[str, str]:
        walked.append(roots)
        return closure(files, roots, load_yaml)

    monkeypatch.setattr(nesting, "closure", counted)
    monkeypatch.setattr(nesting, "_CLOSURES", {})
    files = {"m.yaml": CHILD, "other.sh": "unrelated"}
    found = [nesting.child_files(files, ["m.yaml"], Environment()) for _ in range(50)]
    again = nesting.child_files(dict(files), ["m.yaml"], Environment())
    assert [("m.yaml",), ("m.yaml",)] == walked
    assert all({"m.yaml": CHILD} == f for f in [*found, again]), found


def _group(member: str, extra: str = "") -> str:
    return (
        HEAD
        + f"resources:\n  g:\n    type: OS::Heat::ResourceGroup\n    properties:\n      count: 2\n{extra}      resource_def: {member}\n"
    )


def test_a_groups_member_definition_is_checked_as_a_resource():
    """resource_def's type and properties are checked as a member's, %index% replaced."""
    parse(_group("{type: child.yaml, properties: {size: 3, label: 'n-%index%'}}"), {"child.yaml": CHILD})
    e = error(_group("{type: child.yaml, properties: {size: 3, colour: red}}"), {"child.yaml": CHILD})
    assert e.path == "resources.g.properties.resource_def.properties.colour"
    e = error(_group("{type: OS::Heat::Value, properties: {valeu: 1}}"), {})
    assert e.path == "resources.g.properties.resource_def.properties.valeu"
    e = error(_group("{type: OS::Nope::Thing}"), {})
    assert e.path == "resources.g.properties.resource_def.type"


def test_group_members_count_towards_the_depth_cap():
    """A group's member template is one level below the group's own nested stack."""
    files = {"child.yaml": CHILD}
    parse(_group("{type: child.yaml, properties: {size: 3}}"), files, depth=2)
    e = error(_group("{type: child.yaml, properties: {size: 3}}"), files, depth=1)
    assert "more than the limit of 1" in e.reason


def test_a_negative_count_is_refused():
    """count must not be negative."""
    e = error(
        HEAD
        + "resources:\n  g: {type: OS::Heat::ResourceGroup, properties: {count: -1, resource_def: {type: OS::Heat::None}}}\n",
        {},
    )
    assert e.path == "resources.g.properties.count"


ASG = (
    HEAD + "resources:\n  asg:\n    type: OS::Heat::AutoScalingGroup\n    properties:\n"
    "      min_size: {low}\n      max_size: 3\n      desired_capacity: {want}\n"
    "      resource: {{type: child.yaml, properties: {{size: 2}}}}\n"
)


def test_scaling_group_sizes_and_attributes_are_checked():
    """min_size <= desired_capacity <= max_size; its attributes are Heat's and resource.<i>.<attr>."""
    files = {"child.yaml": CHILD}
    ok = ASG.format(low=1, want=2)
    parse(
        ok
        + "outputs:\n  a: {value: {get_attr: [asg, resource.0.doubled]}}\n  b: {value: {get_attr: [asg, current_size]}}\n",
        files,
    )
    assert error(ASG.format(low=1, want=5), files).path == "resources.asg.properties.desired_capacity"
    assert error(ASG.format(low=4, want=4), files).path == "resources.asg.properties.max_size"
    e = error(ok + "outputs:\n  a: {value: {get_attr: [asg, doubled]}}\n", files)
    assert "has no attribute 'doubled'" in e.reason


def test_min_adjustment_step_needs_a_percent_adjustment():
    """min_adjustment_step is refused unless adjustment_type is percent_change_in_capacity."""
    policy = (
        ASG.format(low=1, want=1) + "  up:\n    type: OS::Heat::ScalingPolicy\n    properties:\n"
        "      {auto_scaling_group_id: {get_resource: asg}, adjustment_type: change_in_capacity,"
        " scaling_adjustment: 1, min_adjustment_step: 2}\n"
    )
    e = error(policy, {"child.yaml": CHILD})
    assert e.path == "resources.up.properties.min_adjustment_step"
