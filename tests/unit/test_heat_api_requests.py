"""Heat's request bodies and template catalogue as Anneal reads them: translation, options, versions, types."""

from __future__ import annotations

from typing import Any

import pytest

from control.api.heat_v1.translate import anneal_body
from control.errors import BadRequestError, NotFoundError
from control.services import catalogue
from control.services.stack_events import _statuses
from control.services.stack_listing import _tags_match
from control.services.stack_request import parse_request, tags_given, timeout_given

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "resources": {"n": {"type": "OS::Heat::None"}},
}


def test_environment_files_are_merged_in_order_from_files_and_win_over_environment() -> None:
    """With environment_files, Heat merges those files from `files` in order and ignores `environment`."""
    body = anneal_body(
        {
            "template": TEMPLATE,
            "files": {"a.yaml": "parameters: {x: 1}", "b.yaml": "parameters: {x: 2}"},
            "environment_files": ["a.yaml", "b.yaml"],
            "environment": {"parameters": {"x": 3}},
        }
    )
    assert body["environments"] == ["parameters: {x: 1}", "parameters: {x: 2}"]
    merged = parse_request(body, 1 << 20).environment
    assert merged.parameters == {"x": 2}


def test_an_environment_object_becomes_one_environment_text() -> None:
    """Heat's `environment` object (what the client merged) is one environment, read as any environment file."""
    body = anneal_body({"template": TEMPLATE, "environment": {"parameter_defaults": {"y": "z"}}})
    assert parse_request(body, 1 << 20).environment.parameter_defaults == {"y": "z"}


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"template_url": "http://x/t.yaml"}, "template_url"),
        ({"template": TEMPLATE, "files_container": "c"}, "files_container"),
        ({"template": TEMPLATE, "environment_files": ["missing.yaml"]}, "environment_files"),
        ({}, "template"),
        ({"template": TEMPLATE, "disable_rollback": "maybe"}, "disable_rollback"),
    ],
)
def test_unsupported_or_malformed_create_fields_are_refused_naming_the_field(
    body: dict[str, Any], where: str
) -> None:
    """template_url, files_container, a missing environment file, no template, a bad flag: 400 naming the field."""
    with pytest.raises(BadRequestError) as e:
        anneal_body(body)
    assert e.value.where == where


def test_patch_needs_no_template_and_tags_text_becomes_a_list() -> None:
    """PATCH keeps the stack's template when none is sent; `--tags a,b` arrives as text and is split."""
    body = anneal_body({"tags": "blue, green", "disable_rollback": "false"}, existing=True)
    assert "template" not in body and body["existing"] is True
    assert body["tags"] == ["blue", "green"] and body["disable_rollback"] is False


@pytest.mark.parametrize(
    ("tags", "ok"), [(["a", "b"], True), (["a,b"], False), (["x" * 81], False), ("a", False), ([""], False)]
)
def test_tags_are_strings_of_at_most_80_characters_without_commas(tags: Any, ok: bool) -> None:
    """Heat's tag rules: a list of non-empty strings, each at most 80 characters, no comma."""
    if ok:
        assert tags_given({"tags": tags}) == tags
    else:
        with pytest.raises(BadRequestError):
            tags_given({"tags": tags})


@pytest.mark.parametrize(("value", "minutes"), [(5, 5), ("7", 7), (None, None)])
def test_timeout_mins_takes_whole_minutes(value: Any, minutes: int | None) -> None:
    """timeout_mins is a positive whole number, as a number or its text; absent is None."""
    assert timeout_given({"timeout_mins": value}) == minutes


@pytest.mark.parametrize("value", [0, -1, 1.5, "soon", True])
def test_timeout_mins_refuses_what_is_not_a_positive_whole_number(value: Any) -> None:
    """Zero, negative, fractional, text and booleans are refused naming timeout_mins."""
    with pytest.raises(BadRequestError) as e:
        timeout_given({"timeout_mins": value})
    assert e.value.where == "timeout_mins"


def test_tag_filters_combine_as_heats_do() -> None:
    """tags: all of them; tags_any: one of them; not_tags: not all of them; not_tags_any: none of them."""
    tags = {"blue", "green"}
    assert _tags_match(tags, {"tags": ["blue", "green"]})
    assert not _tags_match(tags, {"tags": ["blue", "red"]})
    assert _tags_match(tags, {"tags_any": ["red", "green"]})
    assert not _tags_match(tags, {"not_tags": ["blue", "green"]})
    assert _tags_match(tags, {"not_tags": ["blue", "red"]})
    assert not _tags_match(tags, {"not_tags_any": ["red", "green"]})


def test_event_status_filter_takes_a_status_or_an_action_and_status() -> None:
    """`COMPLETE` filters on the status; `CREATE_COMPLETE` on the action too; anything else is refused."""
    assert _statuses(["COMPLETE"]) == (set(), {"COMPLETE"})
    assert _statuses(["CREATE_COMPLETE", "DELETE_IN_PROGRESS"]) == (
        {"CREATE", "DELETE"},
        {"COMPLETE", "IN_PROGRESS"},
    )
    with pytest.raises(BadRequestError):
        _statuses(["DONE"])


def test_template_functions_follow_the_version_that_brought_them() -> None:
    """A 2013-05-23 template has no repeat; rocky has filter; condition functions only when asked for."""
    old = {f["functions"] for f in catalogue.template_functions("heat_template_version.2013-05-23", False)}
    rocky = {f["functions"] for f in catalogue.template_functions("heat_template_version.rocky", False)}
    with_conditions = {
        f["functions"] for f in catalogue.template_functions("heat_template_version.rocky", True)
    }
    assert "get_param" in old and "repeat" not in old
    assert {"repeat", "filter", "if"} <= rocky and "equals" not in rocky
    assert {"equals", "and", "or", "not"} <= with_conditions
    with pytest.raises(NotFoundError):
        catalogue.template_functions("heat_template_version.2099-01-01", False)


def test_cloudformation_versions_are_listed_with_their_functions() -> None:
    """Both CFN version keys are cfn versions; 2012-12-12 has no Fn::If, 2010-09-09 its condition
    functions only when asked for."""
    cfn = {v["version"] for v in catalogue.template_versions() if v["type"] == "cfn"}
    assert {"AWSTemplateFormatVersion.2010-09-09", "HeatTemplateFormatVersion.2012-12-12"} == cfn
    heat = {
        f["functions"] for f in catalogue.template_functions("HeatTemplateFormatVersion.2012-12-12", True)
    }
    aws = {f["functions"] for f in catalogue.template_functions("AWSTemplateFormatVersion.2010-09-09", False)}
    conditions = catalogue.template_functions("AWSTemplateFormatVersion.2010-09-09", True)
    assert {"Ref", "Fn::GetAtt", "Fn::FindInMap"} <= heat and "Fn::If" not in heat
    assert "Fn::If" in aws and "Fn::Equals" not in aws
    assert {"Fn::Equals", "Fn::Not"} <= {f["functions"] for f in conditions}


def test_resource_type_schema_and_generated_template_name_every_property() -> None:
    """A type's schema lists its properties with defaults; its HOT template maps each to a parameter."""
    schema = catalogue.resource_schema("OS::Heat::SoftwareConfig")
    assert schema["properties"]["group"]["default"] == "Heat::Ungrouped"
    assert schema["attributes"] == {"config": {"description": ""}}
    hot = catalogue.type_template("OS::Heat::SoftwareConfig", "hot")
    properties = hot["resources"]["SoftwareConfig"]["properties"]  # named after the type's last part, as Heat
    assert hot["resources"]["SoftwareConfig"]["type"] == "OS::Heat::SoftwareConfig"
    assert properties["group"] == {"get_param": "group"} and "group" in hot["parameters"]
    with pytest.raises(NotFoundError):
        catalogue.resource_schema("OS::Nova::Flavor")
    assert catalogue.resource_types("Software", False) == sorted(
        t for t in catalogue.resource_types(None, False) if "Software" in t
    )
