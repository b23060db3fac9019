"""Heat's API over plain HTTP: its error body, and lists that page, sort and filter as Heat's."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import GREETER, heat_request, start_heat_plane
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-api"))
    yield cp, url
    stop_control_plane(cp)


def test_errors_carry_heats_error_body(plane: tuple[ControlPlane, str]) -> None:
    """A missing stack, a missing token and a bad body answer Heat's error body with an empty traceback."""
    cp, heat_url = plane
    status, body = heat_request(cp, heat_url, "GET", "/stacks/nope/0000")
    assert status == 404
    assert set(body) == {"code", "title", "explanation", "error"}
    assert body["code"] == 404 and body["title"] == "Not Found"
    assert body["error"]["type"] == "EntityNotFound" and body["error"]["traceback"] is None
    assert "nope" in body["error"]["message"]
    assert heat_request(cp, heat_url, "GET", "/stacks", token=None)[0] == 401
    assert heat_request(cp, heat_url, "GET", "/stacks", token="not-the-token")[0] == 401
    status, body = heat_request(
        cp, heat_url, "POST", "/stacks", {"stack_name": "x", "template_url": "http://example.invalid/t.yaml"}
    )
    assert status == 400 and "template_url is not supported" in body["error"]["message"]
    bad = {"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::Nope"}}}
    status, body = heat_request(cp, heat_url, "POST", "/stacks", {"stack_name": "x", "template": bad})
    assert (
        status == 400
        and body["error"]["type"] == "StackValidationFailed"
        and "resources.a" in body["error"]["message"]
    )
    status, body = heat_request(cp, heat_url, "GET", "/stacks?limit=ten")
    assert status == 400 and "limit" in body["error"]["message"]
    status, body = heat_request(cp, heat_url, "PATCH", "/stacks")
    assert status == 405 and body["title"] == "Method Not Allowed"
    status, body = heat_request(cp, heat_url, "GET", "/no/such/route")
    assert status == 404 and body["error"]["traceback"] is None
    status, body = heat_request(cp, heat_url, "DELETE", "/software_configs/no-such-config")
    assert status == 404 and "no-such-config" in body["error"]["message"]


def test_lists_page_sort_and_filter_as_heats_do(plane: tuple[ControlPlane, str]) -> None:
    """Stacks page by limit and marker in the sort asked for; events filter by status and name and page by marker."""
    cp, heat_url = plane
    for name in ("page-b", "page-a"):
        cp.create_stack(name, GREETER % {"server": f"cli-{name}"})
    status, body = heat_request(
        cp, heat_url, "GET", "/stacks?sort_keys=stack_name&sort_dir=asc&limit=1&name=page-a&name=page-b"
    )
    assert status == 200 and [s["stack_name"] for s in body["stacks"]] == ["page-a"]
    marker = body["stacks"][0]["id"]
    assert body["links"][0]["rel"] == "next" and f"marker={marker}" in body["links"][0]["href"]
    status, body = heat_request(
        cp,
        heat_url,
        "GET",
        f"/stacks?sort_keys=stack_name&sort_dir=asc&name=page-a&name=page-b&marker={marker}",
    )
    assert [s["stack_name"] for s in body["stacks"]] == ["page-b"]
    status, body = heat_request(
        cp, heat_url, "GET", "/stacks?status=CREATE_COMPLETE&name=page-a&with_count=true"
    )
    assert body["count"] == 1
    stack = f"/stacks/page-a/{marker}"
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/events?sort_dir=asc")
    everything = [e["id"] for e in body["events"]]
    assert len(everything) >= 5 and everything == sorted(everything, key=int)
    status, body = heat_request(
        cp, heat_url, "GET", f"{stack}/events?sort_dir=asc&limit=2&marker={everything[1]}"
    )
    assert [e["id"] for e in body["events"]] == everything[2:4]
    status, body = heat_request(
        cp, heat_url, "GET", f"{stack}/events?resource_status=CREATE_COMPLETE&resource_name=dep"
    )
    assert [(e["resource_name"], e["resource_status"]) for e in body["events"]] == [
        ("dep", "CREATE_COMPLETE")
    ]
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/resources?type=OS::Heat::SoftwareConfig")
    assert [r["resource_name"] for r in body["resources"]] == ["cfg"]
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/resources?with_detail=true&name=dep")
    assert "deploy_stdout" in body["resources"][0]["attributes"]
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/resources/dep/events")
    assert {e["resource_name"] for e in body["events"]} == {"dep"}
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/resources/box/metadata")
    assert [d["name"] for d in body["metadata"]["deployments"]] == ["page-a-cfg"]
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/template")
    assert body["description"] == "one script on one server"
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/environment")
    assert set(body) >= {"parameters", "parameter_defaults", "resource_registry"}
    status, body = heat_request(cp, heat_url, "GET", f"{stack}/resources?colour=red")
    assert status == 400 and "colour" in body["error"]["message"]


def test_heats_test_resource_fails_when_told_and_replaces_on_update_replace(
    plane: tuple[ControlPlane, str],
) -> None:
    """OS::Heat::TestResource: `fail: true` ends the create CREATE_FAILED naming it; `update_replace` makes a new one."""
    cp, heat_url = plane

    def stack(name: str, props: dict[str, object], method: str = "POST", path: str = "/stacks") -> str:
        template = {
            "heat_template_version": "2016-04-08",
            "resources": {"t": {"type": "OS::Heat::TestResource", "properties": props}},
        }
        status, body = heat_request(cp, heat_url, method, path, {"stack_name": name, "template": template})
        assert status in (201, 202), body
        return f"/stacks/{name}"

    def settled(path: str) -> dict[str, Any]:
        def state() -> dict[str, Any] | None:
            shown: dict[str, Any] = heat_request(cp, heat_url, "GET", path)[1]["stack"]
            return None if shown["stack_status"].endswith("_IN_PROGRESS") else shown

        return wait_until(state, f"{path} never settled")

    failing = settled(stack("told-to-fail", {"fail": True}))
    assert (
        failing["stack_status"] == "CREATE_FAILED"
        and "Test Resource failed t" in failing["stack_status_reason"]
    )
    path = stack("replaced", {"value": "one"})
    first = settled(path)
    assert first["stack_status"] == "CREATE_COMPLETE"
    before = heat_request(cp, heat_url, "GET", f"{path}/{first['id']}/resources/t")[1]["resource"]
    stack("replaced", {"value": "two", "update_replace": True}, "PUT", f"{path}/{first['id']}")
    assert settled(path)["stack_status"] == "UPDATE_COMPLETE"
    after = heat_request(cp, heat_url, "GET", f"{path}/{first['id']}/resources/t")[1]["resource"]
    assert after["attributes"]["output"] == "two"
    assert after["physical_resource_id"] != before["physical_resource_id"]


def test_a_cloudformation_template_over_heats_api_shows_its_description_and_metadata(
    plane: tuple[ControlPlane, str],
) -> None:
    """A CFN-format template created as `openstack stack create` sends it: the stack shows its
    Description and a resource's Metadata answers from the CFN text, as Heat's do."""
    cp, heat_url = plane
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "written the CloudFormation way",
        "Resources": {
            "v": {"Type": "OS::Heat::Value", "Metadata": {"role": "web"}, "Properties": {"value": 1}}
        },
    }
    status, body = heat_request(
        cp, heat_url, "POST", "/stacks", {"stack_name": "cfn-api", "template": template}
    )
    assert 201 == status, body
    path = f"/stacks/cfn-api/{body['stack']['id']}"

    def shown() -> dict[str, Any] | None:
        stack: dict[str, Any] = heat_request(cp, heat_url, "GET", path)[1]["stack"]
        return None if stack["stack_status"].endswith("_IN_PROGRESS") else stack

    stack = wait_until(shown, f"{path} never settled")
    assert ("CREATE_COMPLETE", "written the CloudFormation way") == (
        stack["stack_status"],
        stack["description"],
    )
    assert (200, {"metadata": {"role": "web"}}) == heat_request(
        cp, heat_url, "GET", f"{path}/resources/v/metadata"
    )


def test_heat_api_requests_are_counted_in_the_metrics(plane: tuple[ControlPlane, str]) -> None:
    """Requests to Heat's listener appear in /metrics by Heat's route template, method and status."""
    cp, heat_url = plane
    assert heat_request(cp, heat_url, "GET", "/stacks")[0] == 200
    assert heat_request(cp, heat_url, "GET", "/stacks/metric-nope/0000")[0] == 404
    request = urllib.request.Request(f"{cp.url}/metrics", headers={"Authorization": f"Bearer {cp.token}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        text = resp.read().decode()
    found = {
        (s.labels.get("route"), s.labels.get("method"), s.labels.get("status")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "anneal_http_requests_total"
    }
    assert found.get(("/v1/{project_id}/stacks", "GET", "200"), 0) >= 1
    assert found.get(("/v1/{project_id}/stacks/{stack_name}/{stack_id}", "GET", "404"), 0) >= 1
