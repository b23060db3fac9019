"""Small templates that would build gigabytes, and patterns that backtrack forever, are refused.

Every function has a per-call cap and a whole template's evaluation a budget
(`--max-evaluation-bytes`), both counted before anything is built: the 400 names the call's
path and the control plane's peak memory stays bounded. allowed_pattern is matched in a
worker thread with a time bound, so the event loop answers other requests meanwhile.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, Response, start_control_plane, stop_control_plane

KB = "k" * 1024
#: The parameters the cases read (22 KiB): the template stays small, what it builds does not.
PARAMS = {
    "kb": {"type": "string", "default": KB},
    "commas": {"type": "string", "default": "," * 1024},
    "list": {"type": "comma_delimited_list", "default": ",".join([KB[:20]] * 1000)},
}


def template(resources: dict[str, Any]) -> str:
    return json.dumps({"heat_template_version": "2018-08-31", "parameters": PARAMS, "resources": resources})


def value(expr: Any) -> dict[str, Any]:
    return {"type": "OS::Heat::Value", "properties": {"value": expr}}


KB_PARAM = {"get_param": "kb"}
#: 1 MiB built by one str_replace (under the per-call cap).
MEGABYTE = {"str_replace": {"template": "x" * 1024, "params": {"x": KB_PARAM}}}

#: case -> (resources, where the 400 must point)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    # A placeholder spliced 1,000 times into each of 300 copies: 300 MB from a 3 KB template.
    "repeat_substitution": (
        {"bomb": value({"repeat": {"for_each": {"%i%": [KB_PARAM] * 300}, "template": "%i%" * 1000}})},
        "resources.bomb.properties.value",
    ),
    "str_replace": (
        {"bomb": value({"str_replace": {"template": "x" * 9000, "params": {"x": KB_PARAM}}})},
        "resources.bomb.properties.value",
    ),
    # A 1 KiB delimiter between 10,000 items.
    "list_join": (
        {
            "bomb": value(
                {
                    "list_join": [
                        KB_PARAM,
                        {"repeat": {"for_each": {"%i%": list(range(10_000))}, "template": "a"}},
                    ]
                }
            )
        },
        "resources.bomb.properties.value",
    ),
    "map_merge": (
        {"bomb": value({"map_merge": [{f"k{i}": MEGABYTE} for i in range(10)]})},
        "resources.bomb.properties.value",
    ),
    "list_concat": (
        {"bomb": value({"list_concat": [{"get_param": "list"}] * 300})},
        "resources.bomb.properties.value",
    ),
    "str_split": (
        {
            "bomb": value(
                {
                    "str_split": [
                        ",",
                        {"str_replace": {"template": "x" * 5000, "params": {"x": {"get_param": "commas"}}}},
                    ]
                }
            )
        },
        "resources.bomb.properties.value",
    ),
    # Nested: each call under its cap, the template over its budget: the call that crosses it is named.
    "nested_over_the_total": (
        {
            f"bomb{i:02d}": value(
                {"list_join": ["", {"repeat": {"for_each": {"%i%": [1, 2, 3, 4]}, "template": MEGABYTE}}]}
            )
            for i in range(20)
        },
        "resources.bomb",
    ),
    # yaql's own quotas allow 1.8 MB per expression (200 strings of 9,000): 40 are over the budget.
    "yaql": (
        {f"bomb{i:02d}": value({"yaql": {"expression": "range(200).select('x' * 9000)"}}) for i in range(40)},
        "resources.bomb",
    ),
    # A group copies its properties to each member: 2,000 members of 1 MiB inputs.
    "group_members": (
        {
            "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "true"}},
            "group": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {
                    "config": {"get_resource": "cfg"},
                    "input_values": {"big": MEGABYTE},
                    "servers": {
                        "map_merge": {
                            "repeat": {
                                "for_each": {"%i%": list(range(2000))},
                                "template": {"s%i%": "server-id"},
                            }
                        }
                    },
                },
            },
        },
        "resources.group.properties.servers",
    ),
}


def peak_rss_kib(cp: ControlPlane) -> int:
    """The control plane's peak resident memory so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{cp.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/PID/status")


@pytest.fixture(scope="module")
def hostile_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = start_control_plane(tmp_path_factory.mktemp("cp"), defaults=())
    yield cp
    stop_control_plane(cp)


def test_every_hostile_case_is_refused_naming_the_call_with_memory_bounded(hostile_cp: ControlPlane) -> None:
    """Each case gets a 400 naming its call's path, stores nothing, and peak RSS grows by under 400 MB."""
    cp = hostile_cp
    before = peak_rss_kib(cp)
    for case, (resources, where) in CASES.items():
        text = template(resources)
        assert len(text) < 110 * 1024, case  # as small as the 103 KiB template that took 2.1 GB
        resp = cp.create(case.replace("_", "-"), text)
        assert 400 == resp.status, (case, resp.body)
        error = resp.body["error"]
        assert error["where"].startswith(where), (case, error)
        bounds = ("would exceed the cap", "evaluation budget", "yaql expressions took longer than")
        assert any(bound in error["message"] for bound in bounds), error  # yaql's: time, on a slow machine
        assert 404 == cp.api("GET", f"/v1/stacks/{case.replace('_', '-')}").status
    grown_mb = (peak_rss_kib(cp) - before) / 1024
    assert grown_mb < 400, f"peak RSS grew by {grown_mb:.0f} MB"
    assert [] == cp.api("GET", "/v1/stacks").body


def test_the_budget_is_the_operators_to_set(tmp_path: Path) -> None:
    """`--max-evaluation-bytes 2M` refuses 4 MiB that the default accepts, naming the option."""
    four_mb = template({f"mb{i}": value(MEGABYTE) for i in range(4)})
    (tmp_path / "small").mkdir()
    (tmp_path / "default").mkdir()
    cp = start_control_plane(tmp_path / "small", "--max-evaluation-bytes", "2M", defaults=())
    try:
        refused = cp.create("four", four_mb)
        assert 400 == refused.status, refused.body
        assert refused.body["error"]["where"].startswith("resources.mb")
        assert "--max-evaluation-bytes" in refused.body["error"]["message"]
    finally:
        stop_control_plane(cp)
    cp = start_control_plane(tmp_path / "default", defaults=())
    try:
        cp.create_stack("four", four_mb)
        value_len = len(cp.api("GET", "/v1/stacks/four/resources").body)
        assert 4 == value_len
    finally:
        stop_control_plane(cp)


PATTERN = """
heat_template_version: 2018-08-31
parameters:
  word:
    type: string
    constraints: [{allowed_pattern: "%s"}]
resources:
  none: {type: OS::Heat::None}
"""


def test_a_backtracking_pattern_is_refused_naming_it_while_health_answers(hostile_cp: ControlPlane) -> None:
    """(a|a)+ against 29 a's and a '!' is refused naming the parameter and pattern; health answers meanwhile."""
    cp = hostile_cp
    answer: list[Response] = []
    create = threading.Thread(
        target=lambda: answer.append(cp.create("redos", PATTERN % "(a|a)+", params={"word": "a" * 29 + "!"}))
    )
    create.start()
    healthy = 0
    while create.is_alive() and healthy < 1000:  # bounded: the pattern's time bound ends the create
        if cp.api("GET", "/v1/health", token=None).status == 200 and create.is_alive():
            healthy += 1
    create.join(60)
    assert healthy > 0, "no health request was answered while the pattern was matched"
    error = answer[0].body["error"]
    assert (400, "parameters.word") == (answer[0].status, error["where"]), error
    assert "(a|a)+" in error["message"] and "backtracks" in error["message"]


def test_a_slow_yaql_expression_is_refused_at_create_naming_it(hostile_cp: ControlPlane) -> None:
    """A join of two 150-item lists runs past yaql's time bound: a 400 naming the call, nothing stored."""
    slow = "let(x => range(150).toList()) -> $x.join($x, true, [$1, $2]).len()"
    resp = hostile_cp.create("slow-yaql", template({"slow": value({"yaql": {"expression": slow}})}))
    assert 400 == resp.status, resp.body
    error = resp.body["error"]
    assert ("resources.slow.properties.value", True) == (
        error["where"],
        "took longer than" in error["message"],
    )
    assert 404 == hostile_cp.api("GET", "/v1/stacks/slow-yaql").status


def test_nested_quantifiers_are_matched_not_frozen_on(hostile_cp: ControlPlane) -> None:
    """(a+)+, which froze Python's re for 13.6 s on 29 characters, gives the plain constraint error."""
    cp = hostile_cp
    refused = cp.create("nested", PATTERN % "(a+)+", params={"word": "a" * 29 + "!"})
    assert (400, "parameters.word") == (refused.status, refused.body["error"]["where"])
    assert "does not match the pattern '(a+)+'" in refused.body["error"]["message"]
    cp.create_stack("nested", PATTERN % "(a+)+", params={"word": "a" * 29})


def _nested(parameters: dict[str, Any], resources: dict[str, Any]) -> str:
    return json.dumps(
        {"heat_template_version": "2018-08-31", "parameters": parameters, "resources": resources}
    )


def child(bomb: bool) -> str:
    """A nested template: a word from a short list, 1,000 copies of kb, and (*bomb*) 300,000."""
    resources = {
        "built": value({"str_replace": {"template": "x" * 1000, "params": {"x": {"get_param": "kb"}}}}),
        "named": {"type": "OS::Heat::Value", "properties": {"value": {"get_param": "name"}}},
    }
    if bomb:
        resources["bomb"] = value(
            {"repeat": {"for_each": {"%i%": [{"get_param": "kb"}] * 300}, "template": "%i%" * 1000}}
        )
    parameters = {
        "kb": {"type": "string", "default": "k"},
        "word": {"type": "string", "default": "a", "constraints": [{"allowed_values": ["a", "b"]}]},
        "name": {"type": "string", "default": "ok"},
        "ref": {"type": "string", "default": "none"},
    }
    return _nested(parameters, resources)


SERVER_CHILD = _nested(
    {"name": {"type": "string"}},
    {"srv": {"type": "OS::Heat::DeployedServer", "properties": {"name": {"get_param": "name"}}}},
)


def _top(resources: dict[str, Any]) -> str:
    return json.dumps(
        {
            "heat_template_version": "2018-08-31",
            "parameters": {
                "word": {"type": "string", "default": "c"},
                "kb": {"type": "string", "default": KB},
            },
            "resources": {"anchor": {"type": "OS::Heat::None"}, **resources},
        }
    )


#: case -> (resources of the top template, where the 400 points, what its message says)
NESTED_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "bomb": (
        {"nest": {"type": "child.yaml", "properties": {"kb": {"get_param": "kb"}}}},
        "resources.nest",
        "would exceed the cap",
    ),
    "constraint": (
        {"nest": {"type": "child.yaml", "properties": {"word": {"get_param": "word"}}}},
        "resources.nest.properties.word",
        'template child.yaml: "c" is not one of ["a", "b"]',
    ),
    "server-name": (
        {
            "nest": {
                "type": "server.yaml",
                "properties": {"name": {"str_replace": {"template": "a b", "params": {}}}},
            }
        },
        "resources.nest",
        "in template server.yaml: resources.srv.properties.name: a server name starts with a letter",
    ),
    # 100 members of a template each building 1 MiB (the bomb's kb is 1 byte there: under its cap).
    "group": (
        {
            "group": {
                "type": "OS::Heat::ResourceGroup",
                "properties": {
                    "count": 100,
                    "resource_def": {"type": "child.yaml", "properties": {"kb": KB}},
                },
            }
        },
        "resources.group.properties.resource_def",
        "evaluation budget",
    ),
}


def test_a_nested_templates_bad_input_is_refused_at_create_naming_the_resource(
    hostile_cp: ControlPlane,
) -> None:
    """A nested template's budget, parameter constraint and server name are checked at create: a 400 naming the path."""
    cp = hostile_cp
    for case, (resources, where, says) in NESTED_CASES.items():
        # in the group, without the bomb, each member builds 1 MiB: the 100 together are over
        files = {"child.yaml": child(bomb=case != "group"), "server.yaml": SERVER_CHILD}
        resp = cp.api(
            "POST", "/v1/stacks", {"name": f"n-{case}", "template": _top(resources), "files": files}
        )
        assert 400 == resp.status, (case, resp.body)
        error = resp.body["error"]
        assert (where, True) == (error["where"], says in error["message"]), (case, error)
        assert 404 == cp.api("GET", f"/v1/stacks/n-{case}").status


def test_a_nested_template_given_what_resources_make_is_accepted(hostile_cp: ControlPlane) -> None:
    """Values only known once resources exist (get_resource, get_attr) are placeholders: the stack is created."""
    cp = hostile_cp
    props = {"name": {"get_attr": ["anchor", "show"]}, "ref": {"get_resource": "anchor"}}
    template = _top({"nest": {"type": "child.yaml", "properties": props}})
    stack = cp.create_stack("n-placeholders", template, files={"child.yaml": child(bomb=False)})
    assert "CREATE_COMPLETE" == stack["status"]
