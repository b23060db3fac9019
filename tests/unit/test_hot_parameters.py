"""Parameter values: precedence, conversion, constraints, and condition values."""

from __future__ import annotations

from typing import Any

import pytest

from control.hot import (
    Environment,
    TemplateError,
    condition_values,
    parse_template,
    resolve_parameters,
)
from control.hot.template import Template


def template(parameters: dict[str, Any], **sections: Any) -> Template:
    return parse_template({"heat_template_version": "2018-08-31", "parameters": parameters, **sections})


def value(ptype: str, given: Any, **definition: Any) -> Any:
    """The converted value of one parameter of ``ptype`` given ``given``."""
    t = template({"p": {"type": ptype, **definition}})
    return resolve_parameters(t, Environment(), {"p": given}).values["p"]


def failure(ptype: str, given: Any, **definition: Any) -> TemplateError:
    with pytest.raises(TemplateError) as info:
        value(ptype, given, **definition)
    return info.value


# --- precedence ----------------------------------------------------------------------------------


def test_precedence_given_environment_defaults_template():
    """given > environment parameters > parameter_defaults > template default."""
    t = template({n: {"type": "string", "default": "tmpl"} for n in "abcd"})
    env = Environment(
        parameters={"a": "env", "b": "env"}, parameter_defaults={"a": "pd", "b": "pd", "c": "pd"}
    )
    params = resolve_parameters(t, env, {"a": "given"})
    assert params.values == {"a": "given", "b": "env", "c": "pd", "d": "tmpl"}
    assert params.warnings == ()


def test_undeclared_given_parameter_is_refused():
    """A given parameter the template does not declare is an error."""
    with pytest.raises(TemplateError) as info:
        resolve_parameters(template({}), Environment(), {"ghost": 1})
    assert (info.value.path, info.value.reason) == ("parameters.ghost", "not declared by the template")


def test_undeclared_environment_parameter_is_refused():
    """An environment parameter the template does not declare is an error."""
    with pytest.raises(TemplateError) as info:
        resolve_parameters(template({}), Environment(parameters={"ghost": 1}), {})
    assert info.value.path == "parameters.ghost"


def test_undeclared_parameter_defaults_are_ignored_with_a_warning():
    """parameter_defaults for names the template lacks are ignored (Heat), with one warning."""
    params = resolve_parameters(template({}), Environment(parameter_defaults={"z": 1, "y": 2}), {})
    assert params.values == {}
    assert params.warnings == ("parameter_defaults: not declared by the template, ignored: y, z",)


def test_missing_value_without_default_is_refused():
    """A parameter with no value anywhere is an error."""
    with pytest.raises(TemplateError) as info:
        resolve_parameters(template({"p": {"type": "string"}}), Environment(), {})
    assert (info.value.path, info.value.reason) == ("parameters.p", "no value given and no default")


def test_null_given_value_falls_back():
    """A null given value counts as not given."""
    t = template({"p": {"type": "string", "default": "d"}})
    assert resolve_parameters(t, Environment(), {"p": None}).values == {"p": "d"}


def test_hidden_parameters_are_listed():
    """Parameters declared hidden are named in Parameters.hidden."""
    t = template(
        {"pw": {"type": "string", "hidden": True, "default": "x"}, "u": {"type": "string", "default": "u"}}
    )
    assert resolve_parameters(t, Environment(), {}).hidden == {"pw"}


# --- conversions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [("80", 80), (" 80 ", 80), ("1.5", 1.5), ("2.0", 2), (3, 3), (2.0, 2), (0.25, 0.25), ("-7", -7)],
)
def test_number_conversion(given, expected):
    """Numbers become int when integral, else float; strings are parsed."""
    converted = value("number", given)
    assert converted == expected and type(converted) is type(expected)


@pytest.mark.parametrize("given", ["eighty", "", True, [1], {"a": 1}, "nan", "inf"])
def test_number_conversion_errors(given):
    """Non-numeric values are refused for number parameters."""
    assert failure("number", given).reason.endswith("is not a number")


def test_string_conversion():
    """Scalars become strings; maps and lists are refused."""
    assert value("string", "x") == "x"
    assert value("string", 5) == "5"
    assert value("string", 1.5) == "1.5"
    assert failure("string", {"a": 1}).reason == '{"a": 1} is not a string'
    assert failure("string", [1]).reason == "[1] is not a string"


def test_comma_delimited_list_conversion():
    """Strings split on ',' and are stripped; lists are accepted."""
    assert value("comma_delimited_list", "one, two ,three") == ["one", "two", "three"]
    assert value("comma_delimited_list", "") == []
    assert value("comma_delimited_list", ["a", 1]) == ["a", "1"]
    assert value("comma_delimited_list", 80) == ["80"]
    assert failure("comma_delimited_list", {"a": 1}).reason.endswith("is not a comma-delimited list")


def test_json_conversion():
    """JSON strings are parsed; maps and lists are accepted as they are."""
    assert value("json", '{"a": [1, 2]}') == {"a": [1, 2]}
    assert value("json", "[1]") == [1]
    assert value("json", {"k": "v"}) == {"k": "v"}
    assert value("json", [1, 2]) == [1, 2]
    assert failure("json", "{bad").reason == '"{bad" is not a JSON map or list'
    assert failure("json", "5").reason == '"5" is not a JSON map or list'


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("true", True),
        ("YES", True),
        ("on", True),
        ("1", True),
        ("t", True),
        ("y", True),
        (True, True),
        ("false", False),
        ("No", False),
        ("OFF", False),
        ("0", False),
        ("f", False),
        ("n", False),
        (False, False),
        (1, True),
        (0, False),
    ],
)
def test_boolean_conversion(given, expected):
    """The usual true/false words, in any case, and booleans are accepted."""
    assert value("boolean", given) is expected


def test_boolean_conversion_errors():
    """Other words are refused for boolean parameters."""
    assert failure("boolean", "maybe").reason == '"maybe" is not a boolean'
    assert failure("boolean", 2).reason == "2 is not a boolean"


def test_hidden_value_is_not_shown_in_errors():
    """A hidden parameter's value never appears in a message."""
    e = failure("number", "s3cr3t", hidden=True)
    assert "s3cr3t" not in str(e) and e.reason == "the value is not a number"
    e = failure("string", "s3cr3t", hidden=True, constraints=[{"length": {"min": 8}}])
    assert "s3cr3t" not in str(e)


# --- constraints ---------------------------------------------------------------------------------


def test_range_constraint():
    """range bounds are inclusive; the message names value and range."""
    constraints = [{"range": {"min": 1, "max": 65535}}]
    assert value("number", 65535, constraints=constraints) == 65535
    e = failure("number", 70000, constraints=constraints)
    assert str(e) == "parameters.p: 70000 is not in range 1..65535"
    assert failure("number", 0, constraints=[{"range": {"min": 1}}]).reason == "0 is not in range 1.."


def test_length_constraint():
    """length applies to strings, lists and JSON values."""
    constraints = [{"length": {"min": 2, "max": 3}}]
    assert value("string", "abc", constraints=constraints) == "abc"
    assert (
        failure("string", "abcd", constraints=constraints).reason
        == 'the length of "abcd" is 4, not in range 2..3'
    )
    assert failure("comma_delimited_list", "a", constraints=constraints).reason.startswith("the length of")
    assert value("json", {"a": 1, "b": 2}, constraints=constraints) == {"a": 1, "b": 2}


def test_modulo_constraint():
    """modulo needs value % step == offset."""
    constraints = [{"modulo": {"step": 2, "offset": 1}}]
    assert value("number", 7, constraints=constraints) == 7
    assert failure("number", 8, constraints=constraints).reason == "8 is not a multiple of 2 with offset 1"


def test_allowed_values_constraint():
    """allowed_values compares in the parameter's type and checks each list item."""
    assert value("string", "m1", constraints=[{"allowed_values": ["m1", "m2"]}]) == "m1"
    assert failure("string", "m3", constraints=[{"allowed_values": ["m1", "m2"]}]).reason == (
        '"m3" is not one of ["m1", "m2"]'
    )
    assert value("number", "2", constraints=[{"allowed_values": ["1", "2"]}]) == 2
    assert value("comma_delimited_list", "a,b", constraints=[{"allowed_values": ["a", "b", "c"]}]) == [
        "a",
        "b",
    ]
    assert (
        failure("comma_delimited_list", "a,d", constraints=[{"allowed_values": ["a"]}]).path == "parameters.p"
    )
    assert value("boolean", "yes", constraints=[{"allowed_values": [True]}]) is True


def test_allowed_pattern_constraint():
    """allowed_pattern must match the whole value."""
    constraints = [{"allowed_pattern": "[A-Z][a-z]+"}]
    assert value("string", "Abc", constraints=constraints) == "Abc"
    assert failure("string", "Abc1", constraints=constraints).reason == (
        "\"Abc1\" does not match the pattern '[A-Z][a-z]+'"
    )


def test_constraint_description_is_the_message():
    """A constraint's description replaces the default message."""
    constraints = [{"range": {"max": 10}, "description": "at most ten please"}]
    e = failure("number", 11, constraints=constraints)
    assert str(e) == "parameters.p: at most ten please"


def test_custom_constraint_does_not_block_values():
    """custom_constraint is not checked at resolve time."""
    assert value("string", "k", constraints=[{"custom_constraint": "nova.keypair"}]) == "k"


# --- condition values ----------------------------------------------------------------------------


def test_condition_values_use_parameters_and_each_other():
    """condition_values evaluates every condition, following references."""
    t = template(
        {"env": {"type": "string", "default": "prod"}, "debug": {"type": "boolean", "default": "no"}},
        conditions={
            "later": {"and": ["is_prod", {"not": "debug_on"}]},
            "is_prod": {"equals": [{"get_param": "env"}, "prod"]},
            "debug_on": {"get_param": "debug"},
            "always": True,
            "named": {"equals": [{"get_param": "OS::stack_name"}, "s1"]},
            "has": {"contains": ["prod", ["dev", "prod"]]},
        },
    )
    params = resolve_parameters(t, Environment(), {})
    assert condition_values(t, params, stack_name="s1", stack_id="id") == {
        "later": True,
        "is_prod": True,
        "debug_on": False,
        "always": True,
        "named": True,
        "has": True,
    }


def test_condition_values_refuse_non_boolean():
    """A condition that evaluates to something else than a boolean is an error."""
    t = template({"n": {"type": "number", "default": 1}}, conditions={"c": {"get_param": "n"}})
    with pytest.raises(TemplateError) as info:
        condition_values(t, resolve_parameters(t, Environment(), {}))
    assert info.value.path == "conditions.c"


def test_condition_values_empty():
    """A template without conditions has no condition values."""
    t = template({})
    assert condition_values(t, resolve_parameters(t, Environment(), {})) == {}
