"""Functions, conditions and the template version: each exists only from the version that brought it."""

from __future__ import annotations

from typing import Any

import pytest

from control.hot import TemplateError, parse_template
from control.hot.functions import CONDITION_ONLY, FUNCTIONS, SINCE
from control.hot.versions import DATES

# One well-formed call of each function that came after 2013-05-23.
CALLS: dict[str, Any] = {
    "digest": ["sha256", "x"],
    "repeat": {"for_each": {"%x%": ["a"]}, "template": "%x%"},
    "str_split": [",", "a,b"],
    "map_merge": [{"a": 1}],
    "map_replace": [{"a": 1}, {"keys": {"a": "b"}}],
    "if": [True, "a", "b"],
    "equals": ["a", "a"],
    "not": True,
    "and": [True, False],
    "or": [True, False],
    "filter": [["a"], ["a", "b"]],
    "str_replace_strict": {"template": "a", "params": {"a": "b"}},
    "make_url": {"host": "h"},
    "list_concat": [["a"]],
    "list_concat_unique": [["a"]],
    "str_replace_vstrict": {"template": "a", "params": {"a": "b"}},
    "contains": ["a", ["a"]],
    "yaql": {"expression": "$.data", "data": 1},
}


def with_call(version: str, name: str, where: str = "value") -> dict[str, Any]:
    """The call as the resource's property value, or as the condition of an `if` there."""
    call = {name: CALLS[name]}
    value = {"if": [call, "a", "b"]} if where == "if" else call
    resource = {"type": "OS::Heat::Value", "properties": {"value": value}}
    return {"heat_template_version": version, "resources": {"web": resource}}


def before(version: str) -> str:
    return DATES[DATES.index(version) - 1]


def test_every_later_function_has_a_call_here():
    """The table covers every supported function that is not in 2013-05-23."""
    assert set(SINCE) == set(CALLS) and set(SINCE) <= FUNCTIONS


@pytest.mark.parametrize("name", sorted(SINCE))
def test_function_is_accepted_from_its_version_on(name: str) -> None:
    """From the version that introduced it, the call parses (and in every later one)."""
    where = "if" if name in CONDITION_ONLY else "value"  # equals & co. exist only in conditions
    for version in DATES[DATES.index(SINCE[name]) :]:
        parse_template(with_call(version, name, where))


@pytest.mark.parametrize("name", sorted(SINCE))
def test_function_in_an_older_version_names_function_version_and_path(name: str) -> None:
    """One version too early: the error names the function, both versions and the resource path."""
    old = before(SINCE[name])
    with pytest.raises(TemplateError) as info:
        parse_template(with_call(old, name))
    assert info.value.path == "resources.web.properties.value"
    assert f"{name} needs heat_template_version {SINCE[name]}" in info.value.reason
    assert f"this template is {old}" in info.value.reason


def test_release_name_is_given_with_the_version():
    """A function newer than the template's version is refused naming the version it needs and its release."""
    with pytest.raises(TemplateError, match=r"if needs heat_template_version 2016-10-14 \(newton\)"):
        parse_template(with_call("2016-04-08", "if"))


def test_release_name_in_the_template_is_its_date():
    """`ocata` is 2017-02-24: filter parses, contains (pike) does not."""
    parse_template(with_call("ocata", "filter"))
    with pytest.raises(TemplateError, match="this template is 2017-02-24"):
        parse_template(with_call("ocata", "contains"))


def test_nested_call_is_checked_at_its_own_path():
    """A late function inside an old one is refused where it is written."""
    nested = {"list_join": [",", {"str_split": [",", "a,b"]}]}
    doc = {
        "heat_template_version": "2015-04-30",
        "resources": {"web": {"type": "OS::Heat::Value", "properties": {"value": nested}}},
    }
    with pytest.raises(TemplateError) as info:
        parse_template(doc)
    assert info.value.path == "resources.web.properties.value.list_join[1]"
    assert "str_split needs heat_template_version 2015-10-15" in info.value.reason


def test_condition_function_in_conditions_is_checked_too():
    """contains in a `conditions` entry needs 2017-09-01 even though conditions came in 2016-10-14."""
    doc = {
        "heat_template_version": "2017-02-24",
        "parameters": {"env": {"type": "string", "default": "prod"}},
        "conditions": {"prod": {"contains": [{"get_param": "env"}, ["prod", "live"]]}},
        "resources": {},
    }
    with pytest.raises(TemplateError) as info:
        parse_template(doc)
    assert info.value.path == "conditions.prod"
    assert "contains needs heat_template_version 2017-09-01 (pike)" in info.value.reason


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"conditions": {"on": True}}, "conditions"),
        ({"resources": {"web": {"type": "OS::Heat::None", "condition": True}}}, "resources.web.condition"),
        ({"outputs": {"o": {"value": 1, "condition": True}}}, "outputs.o.condition"),
    ],
)
def test_conditions_need_newton(section: dict[str, Any], path: str) -> None:
    """The conditions section and the `condition` keys came with 2016-10-14."""
    doc = {"heat_template_version": "2016-04-08", "resources": {}, **section}
    with pytest.raises(TemplateError) as info:
        parse_template(doc)
    assert info.value.path == path
    assert "needs heat_template_version 2016-10-14 (newton)" in info.value.reason
    parse_template({**doc, "heat_template_version": "2016-10-14"})


def test_functions_of_2013_work_in_every_version():
    """get_param, get_resource, get_attr, get_file, str_replace and list_join have no minimum."""
    doc = {
        "heat_template_version": "2013-05-23",
        "parameters": {"p": {"type": "string", "default": "x"}},
        "resources": {
            "a": {"type": "OS::Heat::Value", "properties": {"value": {"get_file": "f"}}},
            "b": {
                "type": "OS::Heat::Value",
                "properties": {
                    "value": {
                        "list_join": [
                            ",",
                            [
                                {"get_param": "p"},
                                {"get_resource": "a"},
                                {"get_attr": ["a", "value"]},
                                {"str_replace": {"template": "t", "params": {"t": "u"}}},
                            ],
                        ]
                    }
                },
            },
        },
    }
    parse_template(doc, files={"f": "text"})
