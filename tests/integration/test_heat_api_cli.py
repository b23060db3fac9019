"""Heat's Orchestration API v1: the real openstack CLI (admin_token auth) drives stacks on Anneal unchanged.

Software configs and deployments: test_heat_api_software.py; Heat's error body and list paging over plain
HTTP: test_heat_api_http.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import GREETER, PROJECT, OpenStack, start_heat_plane, write_template
from tests.support.waiting import wait_until

BROKEN = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: broken-box}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo "about to fail"
        echo "boom: disk on fire" >&2
        exit 4
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: box}}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-api"))
    yield cp, url
    stop_control_plane(cp)


@pytest.fixture(scope="module")
def cp(plane: tuple[ControlPlane, str]) -> ControlPlane:
    """The module's control plane."""
    return plane[0]


@pytest.fixture(scope="module")
def osc(plane: tuple[ControlPlane, str]) -> OpenStack:
    """The real openstack CLI pointed at the Heat endpoint of PROJECT with the admin token."""
    return OpenStack(plane[0], f"{plane[1]}/v1/{PROJECT}")


def _show(osc: OpenStack, stack: str) -> dict[str, Any]:
    found = osc.json("stack", "show", stack)
    assert isinstance(found, dict)
    return found


def test_stack_create_wait_list_show_outputs_and_delete(osc: OpenStack, tmp_path: Path) -> None:
    """`stack create --wait` runs the script; list, show and `output show --all` read its result; delete removes it."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-one"})
    created = osc.ok("stack", "create", "-t", path, "--parameter", "who=operator", "--wait", "one")
    assert "CREATE_COMPLETE" in created
    assert "[one.dep]: CREATE_COMPLETE" in created  # the events the wait printed
    listed = osc.json("stack", "list")
    row = next(s for s in listed if s["Stack Name"] == "one")
    assert row["Stack Status"] == "CREATE_COMPLETE"
    shown = _show(osc, "one")
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert shown["description"] == "one script on one server"
    assert shown["parameters"]["who"] == "operator"
    assert shown["parameters"]["OS::project_id"] == PROJECT
    assert shown["links"][0]["href"].endswith(f"/v1/{PROJECT}/stacks/one/{shown['id']}")
    outputs = osc.json("stack", "output", "show", "--all", "one")
    greeting = outputs["greeting"]
    greeting = json.loads(greeting) if isinstance(greeting, str) else greeting
    assert greeting["output_value"] == "hello operator"
    assert greeting["description"] == "what the script said"
    osc.ok("stack", "delete", "--yes", "--wait", "one")
    assert "one" not in [s["Stack Name"] for s in osc.json("stack", "list")]
    gone = osc.run("stack", "show", "one")
    assert gone.returncode != 0 and "Stack not found: one" in gone.stderr


def test_update_existing_keeps_parameters_and_replaces_a_resource_marked_unhealthy(
    osc: OpenStack, tmp_path: Path
) -> None:
    """`resource mark unhealthy` leaves dep CHECK_FAILED; `stack update --existing --parameter` keeps the other
    parameters and the template, replaces dep (a new deployment runs) and the output follows the new value."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-two"})
    osc.ok(
        "stack", "create", "-t", path, "--parameter", "who=first", "--parameter", "pause=0", "--wait", "two"
    )
    before = osc.json("stack", "resource", "show", "two", "dep")
    osc.ok("stack", "resource", "mark", "unhealthy", "two", "dep", "disk replaced")
    marked = osc.json("stack", "resource", "show", "two", "dep")
    assert marked["resource_status"] == "CHECK_FAILED" and marked["resource_status_reason"] == "disk replaced"
    updated = osc.ok("stack", "update", "--existing", "--parameter", "who=second", "--wait", "two")
    assert "UPDATE_COMPLETE" in updated
    shown = _show(osc, "two")
    assert shown["parameters"]["who"] == "second" and shown["parameters"]["pause"] == "0"
    value = osc.json("stack", "output", "show", "two", "greeting")
    assert value["output_value"] == "hello second"
    events = osc.ok("stack", "event", "list", "--nested-depth", "2", "two")
    assert "[two.dep]: CHECK_FAILED  disk replaced" in events and "[two]: UPDATE_COMPLETE" in events
    resources = {r["resource_name"]: r for r in osc.json("stack", "resource", "list", "two")}
    assert set(resources) == {"box", "cfg", "dep"}
    assert resources["dep"]["resource_status"] == "CREATE_COMPLETE"  # a new deployment, created in the update
    assert resources["dep"]["physical_resource_id"] != before["physical_resource_id"]
    assert resources["dep"]["resource_type"] == "OS::Heat::SoftwareDeployment"


def test_cancel_without_rollback_fails_a_create_in_progress(osc: OpenStack, tmp_path: Path) -> None:
    """`stack cancel --no-rollback` on a create waiting for its script ends it CREATE_FAILED, cancelled."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-cancel"})
    osc.ok("stack", "create", "-t", path, "--parameter", "pause=60", "slow")
    osc.ok("stack", "cancel", "--no-rollback", "slow")
    shown = _show(osc, "slow")
    assert (
        shown["stack_status"] == "CREATE_FAILED" and shown["stack_status_reason"] == "Stack CREATE cancelled"
    )
    refused = osc.run("stack", "cancel", "slow")  # cancel_update: only an update in progress
    assert refused.returncode != 0


def test_resource_signal_completes_a_deployment_waiting_on_its_server(osc: OpenStack, tmp_path: Path) -> None:
    """`stack resource signal` with outputs completes a deployment still running: the stack takes the signalled outputs."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-three"})
    osc.ok("stack", "create", "-t", path, "--parameter", "pause=60", "three")
    wait_until(
        lambda: osc.under("three", "/resources/dep")["resource"]["resource_status"] == "CREATE_IN_PROGRESS",
        "dep never started",
        60,
        interval=0.5,
    )
    data = json.dumps({"greeting": "by hand", "deploy_stdout": "signalled", "deploy_status_code": 0})
    osc.ok("stack", "resource", "signal", "three", "dep", "--data", data)
    wait_until(
        lambda: osc.get("/stacks/three")["stack"]["stack_status"] != "CREATE_IN_PROGRESS",
        "the signal did not settle the stack",
        60,
        interval=0.5,
    )
    assert _show(osc, "three")["stack_status"] == "CREATE_COMPLETE"
    # The wait saw dep CREATE_IN_PROGRESS over HTTP and the signal went at once (its script sleeps 60 s);
    # the CLI shows what the signal did.
    assert osc.json("stack", "resource", "show", "three", "dep")["resource_status"] == "CREATE_COMPLETE"
    assert osc.json("stack", "output", "show", "three", "greeting")["output_value"] == "by hand"
    refused = osc.run("stack", "resource", "signal", "three", "box")
    assert (
        refused.returncode != 0
        and "only software deployments and resources that take signals" in refused.stderr
    )


def test_failed_create_exits_nonzero_and_failures_list_names_the_resource(
    osc: OpenStack, tmp_path: Path
) -> None:
    """A failing script: `stack create --wait` exits 1 on CREATE_FAILED; `stack failures list --long` names dep
    and prints its deployment's stdout and stderr."""
    path = write_template(tmp_path, "broken.yaml", BROKEN)
    failed = osc.run("stack", "create", "-t", path, "--wait", "broken")
    assert failed.returncode != 0
    assert "CREATE_FAILED" in failed.stdout + failed.stderr
    report = osc.ok("stack", "failures", "list", "--long", "broken")
    assert "broken.dep:" in report
    assert "resource_type: OS::Heat::SoftwareDeployment" in report
    assert "status: CREATE_FAILED" in report
    assert "about to fail" in report and "boom: disk on fire" in report


def test_a_stack_made_through_one_api_is_seen_through_the_other(
    cp: ControlPlane, osc: OpenStack, tmp_path: Path
) -> None:
    """A stack created with `anneal`'s REST API shows in `openstack stack show`, and one created there in Anneal's API."""
    cp.create_stack("native", GREETER % {"server": "cli-native"}, params={"who": "native"})
    seen = _show(osc, "native")
    assert seen["stack_status"] == "CREATE_COMPLETE"
    assert seen["outputs"][0]["output_value"] == "hello native"
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-heat"})
    osc.ok(
        "stack", "create", "-t", path, "--parameter", "who=heat", "--wait", "--tags", "blue,green", "viaheat"
    )
    stack = cp.api("GET", "/v1/stacks/viaheat").body
    assert stack["status"] == "CREATE_COMPLETE" and stack["tags"] == ["blue", "green"]
    assert cp.outputs("viaheat")["greeting"] == "hello heat"
    tagged = osc.json("stack", "list", "--tags", "green")
    assert [s["Stack Name"] for s in tagged] == ["viaheat"]


def test_suspend_resume_and_check_through_stack_actions(osc: OpenStack, tmp_path: Path) -> None:
    """`stack suspend/resume/check --wait` end SUSPEND_COMPLETE, RESUME_COMPLETE, CHECK_COMPLETE; dep ran SUSPEND."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-four"})
    osc.ok("stack", "create", "-t", path, "--wait", "four")
    for action, state in (
        ("suspend", "SUSPEND_COMPLETE"),
        ("resume", "RESUME_COMPLETE"),
        ("check", "CHECK_COMPLETE"),
    ):
        out = osc.ok("stack", action, "--wait", "four", "-f", "json")
        rows = json.loads(out[out.index("[\n") :])  # after the events the wait printed
        assert [r["Stack Status"] for r in rows] == [state], action
    events = osc.ok("stack", "event", "list", "four")
    assert "[four.dep]: SUSPEND_COMPLETE" in events and "[four.dep]: RESUME_COMPLETE" in events
    assert "[four]: CHECK_COMPLETE  Stack CHECK completed successfully" in events
    refused = osc.run("stack", "resume", "four")
    assert refused.returncode != 0 and "only a suspended stack resumes" in refused.stderr


def test_update_dry_run_lists_what_would_change_and_changes_nothing(osc: OpenStack, tmp_path: Path) -> None:
    """`stack update --dry-run` sorts the resources into Heat's categories; the stack is left as it was."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-preview"})
    osc.ok("stack", "create", "-t", path, "--wait", "preview")
    before = _show(osc, "preview")
    changed = GREETER.replace('echo "greeting $WHO"', 'echo "hi $WHO"') % {"server": "cli-preview"}
    new = write_template(
        tmp_path,
        "changed.yaml",
        changed.replace("resources:\n", "resources:\n  extra: {type: OS::Heat::None}\n"),
    )
    found = osc.json("stack", "update", "--dry-run", "-t", new, "--parameter", "who=dry", "preview")
    names = {kind: sorted(r["resource_name"] for r in json_list(found[kind])) for kind in found}
    assert names["added"] == ["extra"]
    assert names["replaced"] == ["cfg"]  # a config's text changed: a new config
    assert names["updated"] == ["dep"]  # its input changed: it runs again in place
    assert names["unchanged"] == ["box"] and names["deleted"] == []
    after = _show(osc, "preview")
    assert after["stack_status"] == "CREATE_COMPLETE" and after["parameters"]["who"] == "world"
    assert after["updated_time"] == before["updated_time"]


def json_list(value: Any) -> list[dict[str, Any]]:
    """A `-f json` column holding a JSON list, as text or already parsed."""
    return json.loads(value) if isinstance(value, str) else list(value)


SCALED = """
heat_template_version: 2018-08-31
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      resource: {type: OS::Heat::RandomString, properties: {length: 8}}
  up:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: {get_resource: asg}, adjustment_type: change_in_capacity, scaling_adjustment: 1}
outputs:
  size: {value: {get_attr: [asg, current_size]}}
"""


def test_resource_signal_to_a_scaling_policy_scales_its_group(
    osc: OpenStack, plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """`openstack stack resource signal STACK POLICY` adjusts the group, as Heat's does; the group grows by one."""
    path = write_template(tmp_path, "scaled.yaml", SCALED)
    osc.ok("stack", "create", "-t", path, "--wait", "scaled")

    def size() -> Any:
        return osc.json("stack", "output", "show", "scaled", "size")["output_value"]

    assert 1 == size()
    osc.ok("stack", "resource", "signal", "scaled", "up")
    wait_until(
        lambda: osc.under("scaled", "/outputs/size")["output"]["output_value"] == 2,
        "the group did not grow to 2",
        60,
        interval=0.5,
    )
    assert 2 == size()
    events = osc.json("stack", "event", "list", "scaled", "--resource", "up")
    assert any("SIGNAL" in json.dumps(e) for e in events), events
    stack_id = _show(osc, "scaled")["id"]
    request = urllib.request.Request(
        f"{plane[1]}/v1/{PROJECT}/stacks/scaled/{stack_id}/resources/up/signal",
        data=b"[1, 2]",  # heatclient refuses a non-object itself; the API must too
        headers={"X-Auth-Token": plane[0].token, "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert 400 == refused.value.code and "JSON object" in refused.value.read().decode()
    assert 2 == size()
