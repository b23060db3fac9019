"""The `retry` property: checked at parse where literal, normalised into the policy agents run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control import hot


def template(retry: Any, params: str = "") -> str:
    doc = {
        "heat_template_version": "2018-08-31",
        "parameters": json.loads(params or "{}"),
        "resources": {
            "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"config": "x"}},
            "dep": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {"config": {"get_resource": "cfg"}, "server": "s", "retry": retry},
            },
        },
    }
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("retry", "where"),
    [
        ({"retries": 21}, "retries"),
        ({"retries": "many"}, "retries"),
        ({"retries": 1, "retry_on": [0]}, "retry_on[0]"),
        ({"retries": 1, "retry_on": ["sometimes"]}, "retry_on[0]"),
        ({"retries": 1, "backoff": {"initial": -1}}, "backoff.initial"),
        ({"retries": 1, "backoff": {"jitter": 1}}, "backoff.jitter"),
        ({"retries": 1, "attempt_timeout": 0}, "attempt_timeout"),
        ({"tries": 1}, "tries"),
    ],
)
def test_a_bad_literal_policy_is_refused_at_parse_naming_its_path(retry: Any, where: str) -> None:
    """Each bad value is a TemplateError at resources.dep.properties.retry.<where>."""
    with pytest.raises(hot.TemplateError) as info:
        hot.validate(template(retry))
    assert f"resources.dep.properties.retry.{where}" == info.value.path


def test_a_policy_from_a_parameter_is_checked_once_resolved() -> None:
    """get_param parts pass the parse; the resolved value is normalised (or refused) by retry_policy."""
    hot.validate(template({"retries": {"get_param": "n"}}, '{"n": {"type": "number", "default": 2}}'))
    assert {
        "retries": 2,
        "backoff": {"initial": 1.0, "factor": 2.0, "max": 60.0},
        "retry_on": ["failure"],
    } == (hot.retry_policy({"retries": 2}, "r"))
    with pytest.raises(hot.TemplateError, match="not an integer"):
        hot.retry_policy({"retries": 2.5}, "r")


def test_zero_retries_is_no_policy() -> None:
    """retries 0 (or no retry) gives no policy: one attempt, documents unchanged."""
    assert hot.retry_policy({"retries": 0, "retry_on": [3]}, "r") is None
    assert hot.retry_policy(None, "r") is None
