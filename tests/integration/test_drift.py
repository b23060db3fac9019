"""Drift on the host: `stack check` runs the hooks' checks on the servers, `stack converge` re-applies what drifted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.hookrun import TOOL_PATHS, require
from tests.support.openstack import heat_request, start_heat_plane
from tests.support.waiting import wait_until

SCRIPTS = """
heat_template_version: 2018-08-31
parameters:
  dir: {type: string}
  server: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: {get_param: server}}}
  counted_cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}]
      options: {check: "#!/bin/sh\\ntest -s \\"$DIR/runs\\" || { echo 'runs: missing'; exit 1; }\\n"}
      config: |
        #!/bin/sh
        echo run >> "$DIR/runs"
  counted:
    type: OS::Heat::SoftwareDeployment
    properties: {name: 20-counted, config: {get_resource: counted_cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir}}}
  plain_cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}]
      config: "#!/bin/sh\\necho run >> \\"$DIR/plain-runs\\"\\n"
  plain:
    type: OS::Heat::SoftwareDeployment
    properties: {name: 30-plain, config: {get_resource: plain_cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir}}}
"""
TEMPLATE = (
    SCRIPTS
    + """
  motd_cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: puppet
      inputs: [{name: dir}]
      config: |
        file { "${facts['dir']}/motd": ensure => file, content => "managed by puppet\\n" }
  motd:
    type: OS::Heat::SoftwareDeployment
    properties: {name: 10-motd, config: {get_resource: motd_cfg}, server: {get_resource: box},
                 input_values: {dir: {get_param: dir}}}
"""
)


EVERY_SECOND = "deployment_defaults: {converge_interval: 1}\n"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """A control plane whose agents find puppet, with Heat's API; that API's root URL."""
    require(TOOL_PATHS["ANNEAL_PUPPET"])
    cp, heat_url = start_heat_plane(
        tmp_path_factory.mktemp("drift"), env={k: str(v) for k, v in TOOL_PATHS.items()}
    )
    yield cp, heat_url
    stop_control_plane(cp)


@pytest.fixture
def cp(plane: tuple[ControlPlane, str]) -> ControlPlane:
    return plane[0]


def _create(cp: ControlPlane, name: str, work: Path, template: str = TEMPLATE, **extra: Any) -> None:
    params = {"dir": str(work), "server": f"{name}-box"}
    resp = cp.api("POST", "/v1/stacks", {"name": name, "template": template, "parameters": params, **extra})
    assert 201 == resp.status, resp.body
    stack = cp.wait_stack(name, timeout=180)
    assert "CREATE_COMPLETE" == stack["status"], stack["status_reason"]


def _host(cp: ControlPlane, name: str) -> dict[str, str]:
    report = cp.api("GET", f"/v1/stacks/{name}/check").body
    return {h["resource"]: h["state"] for h in report["host"]}


def test_a_file_removed_behind_puppets_back_is_drift_and_converge_restores_only_it(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """check: drifted with puppet's diff once the file is gone; converge re-runs puppet alone; then in sync."""
    _create(cp, "drift", tmp_path)
    motd = tmp_path / "motd"
    assert "managed by puppet\n" == motd.read_text()
    motd.unlink()
    found = cp.cli("stack", "check", "drift", "--timeout", "120")
    assert 1 == found.returncode, found.stdout + found.stderr
    assert "drifted  motd" in found.stdout
    assert "current_value 'absent', should be 'file' (noop)" in found.stdout
    assert not motd.exists()  # the check changed nothing
    out = cp.cli("stack", "converge", "drift", "--wait", "--timeout", "180")
    assert 0 == out.returncode, out.stdout + out.stderr
    assert "managed by puppet\n" == motd.read_text()
    assert ["run"] == (tmp_path / "runs").read_text().splitlines()  # the script never ran again
    events = cp.api("GET", "/v1/stacks/drift/events").body
    assert ["motd"] == [e["resource_name"] for e in events if "re-applied by converge" in e["reason"]]
    again = cp.cli("stack", "check", "drift", "--timeout", "120")
    assert 0 == again.returncode, again.stdout + again.stderr
    assert {"motd": "in_sync", "counted": "in_sync", "plain": "unknown"} == _host(cp, "drift")
    assert "no check program" in again.stdout


def test_a_script_check_program_reports_drift_with_its_output(cp: ControlPlane, tmp_path: Path) -> None:
    """A script config's options.check exiting 1 is drifted, its stdout the diff; ledger-only runs no check."""
    _create(cp, "scriptdrift", tmp_path, SCRIPTS)
    (tmp_path / "runs").unlink()
    ledger = cp.cli("stack", "check", "scriptdrift", "--ledger-only")
    assert 0 == ledger.returncode, ledger.stdout  # the ledgers still agree: only the host knows
    found = cp.cli("stack", "check", "scriptdrift", "--timeout", "120", "--format", "json")
    assert 1 == found.returncode, found.stdout + found.stderr
    assert "drifted" == _host(cp, "scriptdrift")["counted"]
    report = cp.api("GET", "/v1/stacks/scriptdrift/check").body
    (drift,) = [d for d in report["drift"] if d["kind"] == "drifted"]
    assert ("counted", "runs: missing\n") == (drift["resource"], drift["diff"])


def _converged(cp: ControlPlane, name: str, runs: Path) -> list[str]:
    """Wait until the stack's drift was re-applied by converge; the resources it re-applied."""

    def reapplied() -> list[str] | None:
        events = cp.api("GET", f"/v1/stacks/{name}/events").body
        found = sorted({e["resource_name"] for e in events if "re-applied by converge" in e["reason"]})
        return found if found and runs.exists() else None

    return wait_until(reapplied, f"the drift was not converged; log: {cp.log}", 120, 0.5)


def test_converge_interval_converges_a_drift_without_the_operator(cp: ControlPlane, tmp_path: Path) -> None:
    """deployment_defaults.converge_interval: the drifted script is re-applied by itself; the unknown one never re-runs."""
    _create(cp, "autoconv", tmp_path, SCRIPTS, environments=[EVERY_SECOND])
    runs = tmp_path / "runs"
    runs.unlink()
    assert ["counted"] == _converged(cp, "autoconv", runs)
    assert ["run"] == runs.read_text().splitlines()
    assert ["run"] == (tmp_path / "plain-runs").read_text().splitlines()  # unknown: left alone
    refused = cp.api(
        "POST",
        "/v1/stacks",
        {
            "name": "badconv",
            "template": SCRIPTS,
            "environments": ["deployment_defaults: {converge_interval: 0}\n"],
        },
    )
    assert 400 == refused.status, refused.body
    assert "deployment_defaults.converge_interval" in str(refused.body)


def test_heats_check_action_waits_for_the_servers_and_fails_on_drift(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """Heat's CHECK (the same checks): CHECK_IN_PROGRESS until the answers, then CHECK_FAILED naming the drift."""
    cp, heat_url = plane
    _create(cp, "heatcheck", tmp_path, SCRIPTS)
    (tmp_path / "runs").unlink()
    stack_id = cp.api("GET", "/v1/stacks/heatcheck").body["id"]
    status, body = heat_request(
        cp, heat_url, "POST", f"/stacks/heatcheck/{stack_id}/actions", {"check": None}
    )
    assert 202 == status, body
    assert "CHECK_IN_PROGRESS" == cp.api("GET", "/v1/stacks/heatcheck").body["status"]
    final = cp.wait_stack("heatcheck", timeout=120)
    assert "CHECK_FAILED" == final["status"], final
    assert "counted: drifted (the check exited 1)" in final["status_reason"]


def test_check_results_are_checked_field_by_field_and_stale_ones_dropped(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A malformed result is a 400 naming its field; one for an older check is acknowledged and not kept."""
    _create(cp, "beats", tmp_path, SCRIPTS)
    credential = json.loads((cp.agent_dir("beats-box") / "agent.json").read_text())["credential"]
    dep = cp.api("GET", "/v1/deployments/beats%2Fcounted").body
    result = {
        "item": dep["derived_config_id"],
        "deployment_id": dep["id"],
        "generation": dep["generation"],
        "check": 7,
        "state": "drifted",
        "diff": "-a +b",
        "reason": "made up",
        "at": 1.0,
    }
    bad = cp.api(
        "POST", "/v1/agent/heartbeat", {"checks": [{**result, "state": "sideways"}]}, token=credential
    )
    assert 400 == bad.status and "checks[0].state" in json.dumps(bad.body), bad.body
    stale = cp.api("POST", "/v1/agent/heartbeat", {"checks": [result]}, token=credential)
    assert 200 == stale.status and [f"{dep['derived_config_id']}:7"] == stale.body["checks"], stale.body
    assert {} == _host(cp, "beats")  # never asked: nothing kept


def test_converge_interval_rounds_go_on_after_a_restart(tmp_path: Path) -> None:
    """A drift made while the control plane was down is converged after it starts again, asked by no one."""
    (tmp_path / "cp").mkdir()
    cp = start_control_plane(tmp_path / "cp")
    try:
        work = tmp_path / "work"
        work.mkdir()
        _create(cp, "durable", work, SCRIPTS, environments=[EVERY_SECOND])
        stop_control_plane(cp)
        (work / "runs").unlink()
        cp = start_control_plane(tmp_path / "cp", port=cp.port)
        assert ["counted"] == _converged(cp, "durable", work / "runs")
    finally:
        stop_control_plane(cp)
