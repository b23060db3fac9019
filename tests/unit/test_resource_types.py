"""SoftwareComponent, StructuredConfig/Deployment, SoftwareDeploymentGroup and RandomString.

Their static checks, RandomString generation, get_input substitution, component picking.
"""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agent import component, wire
from control import hot
from control.engine import stackdef
from control.errors import BadRequestError
from control.hot import TemplateError, parse_template
from control.resources.deploy import substitute_inputs
from control.resources.randomstring import CLASSES, generate


def doc(resources: dict[str, Any], **sections: Any) -> dict[str, Any]:
    return {"heat_template_version": "2018-08-31", "resources": resources, **sections}


def error(resources: dict[str, Any]) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        parse_template(doc(resources))
    return info.value


def comp(*configs: dict[str, Any]) -> dict[str, Any]:
    return {"c": {"type": "OS::Heat::SoftwareComponent", "properties": {"configs": list(configs)}}}


# ------------------------------------------------------------------ SoftwareComponent


def test_component_with_distinct_actions_parses():
    """Configs with disjoint actions (custom names too) are a valid component."""
    t = parse_template(
        doc(
            comp(
                {"actions": ["CREATE"], "tool": "script", "config": "a"},
                {"actions": ["UPDATE", "BACKUP"], "tool": "puppet", "config": "b"},
            )
        )
    )
    assert "OS::Heat::SoftwareComponent" == t.resources["c"].type


def test_component_action_in_two_configs_is_an_error_naming_the_entry():
    """UPDATE twice: the error names configs[1].actions and the entry that has it first."""
    e = error(
        comp(
            {"actions": ["CREATE", "UPDATE"], "tool": "script"},
            {"actions": ["DELETE"], "tool": "script"},
            {"actions": ["UPDATE"], "tool": "script"},
        )
    )
    assert "resources.c.properties.configs[2].actions" == e.path
    assert "UPDATE" in e.reason and "configs[0]" in e.reason


def test_component_default_actions_count_as_create_and_update():
    """An entry without actions means CREATE and UPDATE, so a second CREATE clashes."""
    e = error(comp({"tool": "script"}, {"actions": ["CREATE"], "tool": "script"}))
    assert "resources.c.properties.configs[1].actions" == e.path


def test_component_needs_configs_and_a_tool_per_config():
    """configs is required and not empty; each entry needs its tool; unknown keys are named."""
    e = error(comp())
    assert "resources.c.properties.configs" == e.path and "at least one" in e.reason
    e = error({"c": {"type": "OS::Heat::SoftwareComponent", "properties": {}}})
    assert "resources.c.properties.configs" == e.path
    e = error(comp({"actions": ["CREATE"]}))
    assert "resources.c.properties.configs[0].tool" == e.path
    e = error(comp({"tool": "script", "script": "x"}))
    assert "resources.c.properties.configs[0].script" == e.path


# ------------------------------------------------------------------ Structured and groups


def test_structured_deployment_validate_mode_is_lax_or_strict():
    """input_values_validate other than LAX/STRICT names the property."""
    e = error(
        {
            "d": {
                "type": "OS::Heat::StructuredDeployment",
                "properties": {"server": "s", "input_values_validate": "SOMETIMES"},
            }
        }
    )
    assert "resources.d.properties.input_values_validate" == e.path


def test_group_needs_servers_and_checks_its_update_policy():
    """A group without servers, or with an unknown policy key, is refused at the right path."""
    e = error({"g": {"type": "OS::Heat::SoftwareDeploymentGroup", "properties": {"config": "x"}}})
    assert "resources.g.properties.servers" == e.path
    e = error(
        {
            "g": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {"servers": {}},
                "update_policy": {"rolling_update": {"max_batch": 2}},
            }
        }
    )
    assert "resources.g.update_policy.rolling_update.max_batch" == e.path
    e = error(
        {
            "g": {
                "type": "OS::Heat::StructuredDeploymentGroup",
                "properties": {"servers": {}},
                "update_policy": {"batch_create": {"pause_time": "soon"}},
            }
        }
    )
    assert "resources.g.update_policy.batch_create.pause_time" == e.path
    e = error(
        {
            "g": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {"servers": {}},
                "update_policy": {"blue_green": {}},
            }
        }
    )
    assert "resources.g.update_policy.blue_green" == e.path
    e = error(
        {
            "g": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {"servers": {}},
                "update_policy": {"canary": {"size": 2}},
            }
        }
    )
    assert "resources.g.update_policy.canary.size" == e.path


def test_group_old_names_are_accepted():
    """OS::Heat::SoftwareDeployments and StructuredDeployments are Heat's hidden aliases."""
    t = parse_template(
        doc(
            {
                "g": {"type": "OS::Heat::SoftwareDeployments", "properties": {"servers": {}}},
                "h": {"type": "OS::Heat::StructuredDeployments", "properties": {"servers": {}}},
            }
        )
    )
    assert ("OS::Heat::SoftwareDeploymentGroup", "OS::Heat::StructuredDeploymentGroup") == (
        t.resources["g"].type,
        t.resources["h"].type,
    )


def test_get_input_substitution_nested_lax_and_strict():
    """Maps {get_input: NAME} anywhere become the value; LAX gives null; STRICT names the path."""
    config = {
        "a": {"get_input": "x"},
        "b": [1, {"c": {"get_input": "y"}}],
        "d": {"get_input": "nope"},
        "e": {"get_input": "x", "other": 1},
    }
    out = substitute_inputs(config, "get_input", {"x": 5, "y": [1]}, False, "cfg")
    assert {"a": 5, "b": [1, {"c": [1]}], "d": None, "e": {"get_input": "x", "other": 1}} == out
    with pytest.raises(BadRequestError) as info:
        substitute_inputs(config, "get_input", {"x": 5, "y": [1]}, True, "cfg")
    assert "cfg.d" == info.value.where and "'nope'" in info.value.message
    assert {"k": 5} == substitute_inputs({"k": {"my_key": "x"}}, "my_key", {"x": 5}, True, "cfg")


# ------------------------------------------------------------------ RandomString


def random(**props: Any) -> dict[str, Any]:
    return {"r": {"type": "OS::Heat::RandomString", "properties": props}}


@pytest.mark.parametrize(
    ("props", "path"),
    [
        ({"length": 0}, "resources.r.properties.length"),
        ({"length": 513}, "resources.r.properties.length"),
        (
            {
                "length": 3,
                "character_classes": [{"class": "digits", "min": 2}, {"class": "letters", "min": 2}],
            },
            "resources.r.properties.length",
        ),
        ({"character_classes": [{"class": "emoji"}]}, "resources.r.properties.character_classes[0].class"),
        (
            {"character_sequences": [{"sequence": ""}]},
            "resources.r.properties.character_sequences[0].sequence",
        ),
        (
            {"character_sequences": [{"sequence": "ab", "min": 0}]},
            "resources.r.properties.character_sequences[0].min",
        ),
        ({"sequence": "hex"}, "resources.r.properties.sequence"),
    ],
)
def test_random_string_bad_properties_name_the_path(props: dict[str, Any], path: str) -> None:
    """Each bad RandomString property is refused at its own path."""
    assert path == error(random(**props)).path


def test_random_string_defaults_to_32_letters_and_digits():
    """No properties: 32 characters from letters and digits."""
    value = generate({}, "r")
    assert 32 == len(value) and set(value) <= set(string.ascii_letters + string.digits)


def test_random_string_meets_every_minimum_and_uses_only_its_pools():
    """Over many draws every class and sequence minimum holds and no other character appears."""
    props = {
        "length": 8,
        "character_classes": [{"class": "digits", "min": 3}],
        "character_sequences": [{"sequence": "#%", "min": 2}, {"sequence": "xy", "min": 1}],
    }
    seen = set()
    for _ in range(300):
        value = generate(props, "r")
        assert 8 == len(value)
        assert sum(c.isdigit() for c in value) >= 3
        assert sum(c in "#%" for c in value) >= 2 and sum(c in "xy" for c in value) >= 1
        seen |= set(value)
    assert seen == set(string.digits + "#%xy")  # the rest is drawn from the union of the pools


def test_random_string_sequence_stands_for_a_class():
    """The deprecated `sequence` picks the class when no classes or sequences are given."""
    assert set(generate({"sequence": "octdigits", "length": 64}, "r")) <= set(string.octdigits)


def test_random_string_values_differ():
    """Two draws of 32 characters are (with overwhelming probability) different."""
    assert generate({}, "r") != generate({}, "r")


# ------------------------------------------------------------------ the agent's component pick


def item(config: Any, action: str, group: str = "component") -> wire.DeploymentItem:
    return wire.DeploymentItem(
        id="i",
        name="n",
        group=group,
        creation_time="t",
        config=config,
        inputs=(wire.InputItem(name="deploy_action", value=action),),
    )


CONFIGS = {
    "configs": [
        {"actions": ["CREATE"], "tool": "script", "config": "c"},
        {"actions": ["UPDATE", "DELETE"], "tool": "puppet", "config": "u"},
    ]
}


def test_agent_picks_the_components_config_for_the_action():
    """The entry listing deploy_action gives the config and, as the group, its tool."""
    chosen = component.pick(item(CONFIGS, "DELETE"))
    assert chosen is not None and ("puppet", "u", "i") == (chosen.group, chosen.config, chosen.id)
    chosen = component.pick(item(CONFIGS, "CREATE"))
    assert chosen is not None and ("script", "c") == (chosen.group, chosen.config)


def test_agent_runs_nothing_for_an_action_no_config_lists():
    """SUSPEND is in no entry: nothing to run (Heat's agent skips it too)."""
    assert component.pick(item(CONFIGS, "SUSPEND")) is None
    assert component.pick(item({"configs": "not a list"}, "CREATE")) is None


def test_agent_leaves_other_groups_alone():
    """A script item is run as it is."""
    plain = item("echo", "CREATE", group="script")
    assert plain is component.pick(plain)


def test_get_attr_of_an_undeclared_output_is_a_warning_for_structured_and_components():
    """get_attr of an output the (structured or component) config does not declare is warned of, by path."""
    for cfg_type, props in (
        ("OS::Heat::StructuredConfig", {"config": {"a": 1}, "outputs": [{"name": "ok"}]}),
        ("OS::Heat::SoftwareComponent", {"configs": [{"tool": "script"}], "outputs": [{"name": "ok"}]}),
    ):
        dep_type = (
            "OS::Heat::StructuredDeployment" if "Structured" in cfg_type else "OS::Heat::SoftwareDeployment"
        )
        template = doc(
            {
                "cfg": {"type": cfg_type, "properties": props},
                "d": {"type": dep_type, "properties": {"config": {"get_resource": "cfg"}, "server": "s"}},
            },
            outputs={
                "good": {"value": {"get_attr": ["d", "ok"]}},
                "bad": {"value": {"get_attr": ["d", "nope"]}},
            },
        )
        defn = stackdef.build(template, {}, hot.Environment(), {}, stack_name="s", stack_id="i")
        (warning,) = hot.check_types(defn.template)
        assert warning.startswith("outputs.bad.value: ") and "'nope'" in warning and "null" in warning


# ------------------------------------------------------------------ properties (hypothesis)

_classes = st.lists(
    st.fixed_dictionaries({"class": st.sampled_from(sorted(CLASSES)), "min": st.integers(1, 4)}), max_size=3
)
_sequences = st.lists(
    st.fixed_dictionaries({"sequence": st.text(min_size=1, max_size=5), "min": st.integers(1, 4)}), max_size=3
)


@given(classes=_classes, sequences=_sequences, extra=st.integers(0, 20))
def test_random_string_property_minimums_and_alphabet(classes, sequences, extra):
    """For any classes and sequences: the length is exact, each minimum holds, nothing foreign appears."""
    needed = sum(c["min"] for c in classes + sequences)
    props = {"length": max(needed, 1) + extra, "character_classes": classes, "character_sequences": sequences}
    value = generate(props, "r")
    assert len(value) == props["length"]
    pools = [CLASSES[c["class"]] for c in classes] + [s["sequence"] for s in sequences]
    if not pools:
        pools = [CLASSES["lettersdigits"]]
    assert set(value) <= set("".join(pools))
    for pool, entry in zip(pools, classes + sequences, strict=False):
        assert sum(ch in pool for ch in value) >= entry["min"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@given(config=_json)
def test_get_input_substitution_leaves_data_without_references_unchanged(config):
    """A config with no {get_input: ...} node comes out equal to what went in, in both modes."""
    assume("get_input" not in repr(config))
    assert config == substitute_inputs(config, "get_input", {"x": 1}, True, "cfg")
