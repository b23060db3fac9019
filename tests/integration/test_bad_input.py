"""Bad input gets a clear 4xx naming what is wrong and where; nothing is half-created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bad_input import CASES, GOOD
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_file, wait_until


@pytest.fixture(scope="module")
def empty_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for all the rejected templates: each case leaves it as empty as it found it."""
    cp = start_control_plane(tmp_path_factory.mktemp("rejected"))
    yield cp
    stop_control_plane(cp)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_template_is_rejected_and_nothing_is_created(empty_plane: ControlPlane, case: str) -> None:
    """Each malformed template or parameter gets 400 naming where; no stack or server appears."""
    control_plane = empty_plane
    template, params, files, where = CASES[case]
    resp = control_plane.create(f"s-{case.replace('_', '-')}", template, params=params, files=files)
    assert 400 == resp.status, resp.body
    error = resp.body["error"]
    assert where in f"{error['where']} {error['message']}"
    assert [] == control_plane.api("GET", "/v1/stacks").body
    assert [] == control_plane.api("GET", "/v1/servers").body


def test_unsupported_type_suggests_resource_registry(control_plane: ControlPlane) -> None:
    """An infrastructure type is refused with a resource_registry hint; the hint works."""
    cp = control_plane
    template = GOOD + "  sg: {type: OS::Neutron::SecurityGroup, properties: {rules: []}}\n"
    resp = cp.create("sg", template)
    assert "resource_registry" in resp.body["error"]["message"]
    env = "resource_registry:\n  OS::Neutron::SecurityGroup: OS::Heat::None\n"
    assert 201 == cp.create("sg", template, environments=[env]).status


def test_oversize_bodies_are_refused(control_plane: ControlPlane) -> None:
    """A template over 512 KiB and a request over the body cap are refused with a size error."""
    cp = control_plane
    big = GOOD + "\ndescription: " + "x" * (600 * 1024) + "\n"
    resp = cp.create("big", big)
    assert resp.status in (400, 413)
    assert "bytes" in resp.body["error"]["message"]
    huge = cp.api("POST", "/v1/stacks", raw=b'{"name": "x", "template": "' + b"y" * (3 * 1024 * 1024) + b'"}')
    assert 413 == huge.status
    assert [] == cp.api("GET", "/v1/stacks").body


def test_request_errors(control_plane: ControlPlane) -> None:
    """Non-JSON bodies, bad names and duplicates are 4xx with a JSON error body."""
    cp = control_plane
    assert 400 == cp.api("POST", "/v1/stacks", raw=b"{not json").status
    assert 400 == cp.api("POST", "/v1/stacks", ["a list"]).status
    assert "name" == cp.create("1bad name", GOOD).body["error"]["where"]
    assert 201 == cp.create("dup", GOOD).status
    assert 409 == cp.create("dup", GOOD).status
    assert 404 == cp.api("GET", "/v1/stacks/nope").status
    assert 404 == cp.api("GET", "/v1/deployments/nope").status
    assert 400 == cp.api("GET", "/v1/stacks/dup/events?after=x").status
    assert 404 == cp.api("GET", "/v1/no/such/route").status


def test_every_operator_route_needs_the_admin_token(control_plane: ControlPlane) -> None:
    """Default deny: no token or a wrong token is 401; the public routes stay open."""
    cp = control_plane
    for method, path in [
        ("GET", "/v1/stacks"),
        ("POST", "/v1/stacks"),
        ("GET", "/v1/deployments"),
        ("GET", "/v1/servers"),
        ("POST", "/v1/servers"),
        ("GET", "/v1/stacks/x/events"),
        ("DELETE", "/v1/stacks/x"),
        ("GET", "/v1/agent/document"),
        ("POST", "/v1/agent/heartbeat"),
    ]:
        assert 401 == cp.api(method, path, {}, token=None).status, path
        assert 401 == cp.api(method, path, {}, token="wrong").status, path
    assert 200 == cp.api("GET", "/openapi.json", token=None).status
    assert 200 == cp.api("GET", "/v1/health", token=None).status


def test_signals_are_scoped_and_checked(control_plane: ControlPlane) -> None:
    """Unknown deployment 404; bad signature 403; another server's credential 403; stale 409."""
    cp = control_plane
    cp.create("sig", GOOD.replace('config: "#!/bin/sh\\n"', 'config: "#!/bin/sh\\nsleep 60\\n"'))
    dep = wait_until(lambda: cp.api("GET", "/v1/deployments?stack=sig").body, "the deployment", 30, 0.1)[0]
    sig = {"deploy_status_code": 0}
    # A wrong signature learns nothing, not even whether the deployment exists.
    assert 403 == cp.api("POST", "/v1/signal/nope/1?sig=00", sig, token=None).status
    assert 403 == cp.api("POST", f"/v1/signal/{dep['id']}/1?sig=00", sig, token=None).status
    assert 401 == cp.api("POST", f"/v1/signal/{dep['id']}/1", sig, token=None).status
    agent_json = cp.agent_dir("sig-srv") / "agent.json"
    wait_file(agent_json, 30)
    own = json.loads(agent_json.read_text())["credential"]
    other = cp.api("POST", "/v1/servers", {"name": "intruder"}).body
    from agent.keys import ensure_keys

    keys = ensure_keys(cp.data_dir.parent / "intruder-keys")
    cred = cp.api(
        "POST", "/v1/agent/enrol", {"token": other["enrol_token"], "public_keys": keys}, token=None
    ).body["credential"]
    assert 403 == cp.api("POST", f"/v1/signal/{dep['id']}/1", sig, token=cred).status
    assert 400 == cp.api("POST", f"/v1/signal/{dep['id']}/1", {"deploy_status_code": []}, token=cred).status
    assert (
        413
        == cp.api(
            "POST", f"/v1/signal/{dep['id']}/1", {"deploy_stdout": "x" * (1024 * 1024 + 10)}, token=cred
        ).status
    )
    shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body
    assert "IN_PROGRESS" == shown["status"]  # none of the above touched it
    assert 409 == cp.api("POST", f"/v1/signal/{dep['id']}/0", sig, token=own).status
    assert 404 == cp.api("POST", "/v1/signal/nope/1", sig, token=own).status
    assert 409 == cp.api("POST", f"/v1/signal/{dep['id']}/2", sig, token=own).status
    assert 200 == cp.api("POST", f"/v1/signal/{dep['id']}/1", sig, token=own).status
    again = cp.api("POST", f"/v1/signal/{dep['id']}/1", sig, token=own)
    assert (200, True) == (again.status, again.body["duplicate"])


def test_cli_prints_errors_and_exits_non_zero(control_plane: ControlPlane, tmp_path: Path) -> None:
    """The CLI shows the API's error (what and where) and exits 1; a missing file is named."""
    cp = control_plane
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("2018-08-31", "2099-01-01"))
    result = cp.cli("stack", "create", "x", "-t", str(bad))
    assert 1 == result.returncode
    assert "heat_template_version" in result.stderr
    missing = cp.cli("stack", "create", "x", "-t", str(tmp_path / "absent.yaml"))
    assert 1 == missing.returncode and "absent.yaml" in missing.stderr
    getfile = tmp_path / "gf.yaml"
    getfile.write_text(GOOD.replace('config: "#!/bin/sh\\n"', "config: {get_file: nothere.sh}"))
    result = cp.cli("stack", "create", "x", "-t", str(getfile))
    assert 1 == result.returncode and "nothere.sh" in result.stderr
