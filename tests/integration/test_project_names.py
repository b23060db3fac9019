"""Stack and server names are unique per project: two projects each run a stack `web` on a server `web-0`.

One real `anneal serve` with Heat's API and local agents. Each project's member makes and reads
its own `web`; neither learns of the other's; an admin names the project when both have the
name; deleting one leaves the other running.
"""

from __future__ import annotations

import http.client
import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import start_heat_plane
from tests.support.processes import command
from tests.support.templates import said_stack
from tests.support.waiting import wait_until

PROJECTS = ("alpha", "beta")


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str, dict[str, str]]]:
    """The control plane, its Heat URL and each project's member token, once both stacks `web` are up."""
    cp, heat = start_heat_plane(tmp_path_factory.mktemp("names"))
    try:
        tokens = {p: _token(cp, p) for p in PROJECTS}
        template = said_stack("HTTP", server_name="web-0")
        for project, token in tokens.items():
            body = {"name": "web", "template": template, "parameters": {"message": project}}
            made = cp.api("POST", "/v1/stacks", body, token=token)
            assert 201 == made.status, made.body
        for token in tokens.values():
            assert "CREATE_COMPLETE" == _settled(cp, token, "web")["status"]
        yield cp, heat, tokens
    finally:
        stop_control_plane(cp)


def _token(cp: ControlPlane, project: str) -> str:
    made = cp.api("POST", "/v1/tokens", {"project": project, "role": "member", "name": f"{project}-member"})
    assert 201 == made.status, made.body
    return str(made.body["token"])


def _settled(cp: ControlPlane, token: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = cp.api("GET", f"/v1/stacks/{name}?summary=true", token=token)
        return found.body if found.status == 200 and "IN_PROGRESS" not in found.body["status"] else None

    return wait_until(done, f"stack {name} did not settle; log: {cp.log}", 120)


def _outputs(cp: ControlPlane, token: str, name: str) -> dict[str, Any]:
    found = cp.api("GET", f"/v1/stacks/{name}/outputs", token=token)
    assert 200 == found.status, found.body
    return {o["output_key"]: o["output_value"] for o in found.body}


def test_each_project_runs_its_own_web_on_its_own_agent_and_sees_only_it(
    planes: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """Both stacks `web` ran their script on their own server `web-0`; each member lists and reads its own only."""
    cp, _, tokens = planes
    seen = {}
    for project, token in tokens.items():
        stacks = cp.api("GET", "/v1/stacks", token=token).body
        servers = cp.api("GET", "/v1/servers", token=token).body
        deployments = cp.api("GET", "/v1/deployments?stack=web", token=token).body
        seen[project] = {
            "said": _outputs(cp, token, "web")["said"],
            "stacks": [s["name"] for s in stacks],
            "servers": [(s["name"], s["status"]) for s in servers],
            "deployments": [d["status"] for d in deployments],
            "server id": servers[0]["id"],
        }
    assert seen["alpha"]["server id"] != seen["beta"]["server id"]
    for project in PROJECTS:
        seen[project].pop("server id")
        expected = {
            "said": f"said {project}",
            "stacks": ["web"],
            "servers": [("web-0", "ENROLLED")],
            "deployments": ["COMPLETE"],
        }
        assert expected == seen[project]


def test_the_same_name_twice_in_one_project_is_a_409_naming_it(
    planes: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """A second `web` or `web-0` in alpha is refused by name; alpha's refusal names no other project."""
    cp, _, tokens = planes
    again = cp.api(
        "POST", "/v1/stacks", {"name": "web", "template": said_stack("HTTP")}, token=tokens["alpha"]
    )
    server = cp.api("POST", "/v1/servers", {"name": "web-0"}, token=tokens["alpha"])
    assert (409, 409) == (again.status, server.status)
    assert "stack 'web' already exists" in again.body["error"]["message"] and "beta" not in str(again.body)
    assert "server 'web-0' already exists" in server.body["error"]["message"]


def test_an_admin_names_the_project_when_several_have_the_name(
    planes: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """The admin token's `web` is ambiguous (409 naming both projects) until ?project= or the CLI's --project says."""
    cp, _, tokens = planes
    ambiguous = cp.api("GET", "/v1/stacks/web")
    assert 409 == ambiguous.status
    assert "alpha, beta" in ambiguous.body["error"]["message"], ambiguous.body
    beta_id = cp.api("GET", "/v1/stacks/web", token=tokens["beta"]).body["id"]
    assert beta_id == cp.api("GET", "/v1/stacks/web?project=beta").body["id"]
    shown = subprocess.run(
        [command("anneal"), "--project", "beta", "stack", "show", "web", "-f", "json"],
        env=cp.env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert 0 == shown.returncode and beta_id in shown.stdout, shown.stderr


def _heat_lookup(heat: str, token: str, project: str, name: str) -> tuple[int, str]:
    url = urlsplit(heat)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        conn.request("GET", f"/v1/{project}/stacks/{name}", headers={"X-Auth-Token": token})
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("Location") or ""
    finally:
        conn.close()


def test_heats_lookup_by_name_redirects_within_the_paths_project(
    planes: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """`GET /v1/{project}/stacks/web` redirects (302) to that project's own stack, for its member and the admin."""
    cp, heat, tokens = planes
    ids = {p: cp.api("GET", "/v1/stacks/web", token=t).body["id"] for p, t in tokens.items()}
    for project, token in tokens.items():
        for who in (token, cp.token):
            status, location = _heat_lookup(heat, who, project, "web")
            assert (302, f"/v1/{project}/stacks/web/{ids[project]}") == (status, urlsplit(location).path)


def test_deleting_one_projects_web_leaves_the_others_running(
    planes: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """alpha deletes its `web` (its deployment and server go); beta's stack, server and outputs stay."""
    cp, _, tokens = planes
    gone = cp.api("DELETE", "/v1/stacks/web", token=tokens["alpha"])
    assert 202 == gone.status, gone.body
    wait_until(
        lambda: cp.api("GET", "/v1/stacks/web", token=tokens["alpha"]).status == 404,
        f"alpha's web was not deleted; log: {cp.log}",
        120,
    )
    assert [] == cp.api("GET", "/v1/servers", token=tokens["alpha"]).body
    assert "CREATE_COMPLETE" == _settled(cp, tokens["beta"], "web")["status"]
    assert "said beta" == _outputs(cp, tokens["beta"], "web")["said"]
    assert ["web-0"] == [s["name"] for s in cp.api("GET", "/v1/servers", token=tokens["beta"]).body]
    assert "web" == cp.api("GET", "/v1/stacks/web").body["name"]  # the admin's name is unique again
