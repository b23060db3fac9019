"""Overlapping updates, If-Match, cancel, timeouts, rollback, check/converge, events: real agents."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, Response, start_control_plane, stop_control_plane
from tests.support.waiting import wait_file, wait_log, wait_until

GATED = """
heat_template_version: 2018-08-31
parameters:
  dir: {type: string}
  rev: {type: string, default: r1}
  server: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: {get_param: server}}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}, {name: REV}, {name: STEP}]
      outputs: [{name: rev}]
      config: |
        #!/bin/sh
        touch "$DIR/started-$STEP-$REV"
        i=0
        while [ ! -e "$DIR/go-$STEP-$REV" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
        echo "$STEP $REV $deploy_action" >> "$DIR/runs"
        [ -e "$DIR/fail-$STEP-$REV" ] && { echo "failing $STEP $REV" >&2; exit 3; }
        printf '%s' "$REV" > "$heat_outputs_path.rev"
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {name: 10-first, config: {get_resource: cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir}, REV: {get_param: rev}, STEP: first}}
  second:
    type: OS::Heat::SoftwareDeployment
    depends_on: [first]
    properties: {name: 20-second, config: {get_resource: cfg}, server: {get_resource: box},
                 input_values: {DIR: {get_param: dir}, REV: {get_param: rev}, STEP: second}}
outputs:
  rev: {value: {get_attr: [second, rev]}}
"""


def _runs(work: Path) -> list[str]:
    path = work / "runs"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("ops"), "--work-lease", "3", "--heartbeat-lease", "6")
    yield plane
    stop_control_plane(plane)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


def _create(cp: ControlPlane, name: str, work: Path, **extra: object) -> None:
    body = {
        "name": name,
        "template": GATED,
        "parameters": {"dir": str(work), "server": f"{name}-box"},
        **extra,
    }
    resp = cp.api("POST", "/v1/stacks", body)
    assert 201 == resp.status, resp.body


def _ledger_reported(cp: ControlPlane, *servers: str) -> None:
    """Wait for a heartbeat of each of *servers* sent from now on, its ledger report with every item finished."""
    since = time.time()

    def reported(server: str) -> bool:
        status = cp.api("GET", f"/v1/servers/{server}").body.get("agent_status") or {}
        items = (status.get("ledger") or {}).values()
        return status.get("reported_at", 0) > since and all(i[2] in ("finished", "signalled") for i in items)

    for server in servers:
        wait_until(partial(reported, server), f"no ledger report from {server}; log: {cp.log}", 30, 0.1)


def _update(cp: ControlPlane, name: str, work: Path, rev: str, **extra: object) -> Response:
    body = {"template": GATED, "parameters": {"dir": str(work), "server": f"{name}-box", "rev": rev}, **extra}
    return cp.api("PUT", f"/v1/stacks/{name}", body)


def test_update_while_update_runs_supersedes_it(cp: ControlPlane, work: Path) -> None:
    """r2 is accepted while r1's first deployment runs: it finishes, r1's second never starts, r3 wins."""
    _create(cp, "overlap", work)
    (work / "go-first-r1").touch()
    (work / "go-second-r1").touch()
    assert "CREATE_COMPLETE" == cp.wait_stack("overlap")["status"]
    assert 202 == _update(cp, "overlap", work, "r2").status
    wait_file(work / "started-first-r2")
    resp = _update(cp, "overlap", work, "r3")  # while first runs r2
    assert 202 == resp.status, resp.body
    assert "UPDATE_IN_PROGRESS" == resp.body["status"]
    (work / "go-first-r2").touch()
    wait_file(work / "started-first-r3")
    (work / "go-first-r3").touch()
    wait_file(work / "started-second-r3")
    (work / "go-second-r3").touch()
    final = cp.wait_stack("overlap")
    assert "UPDATE_COMPLETE" == final["status"], final
    assert "r3" == cp.outputs("overlap")["rev"]
    runs = _runs(work)
    assert "second r2 UPDATE" not in runs  # nothing more of the superseded traversal started
    assert [
        "first r1 CREATE",
        "second r1 CREATE",
        "first r2 UPDATE",
        "first r3 UPDATE",
        "second r3 UPDATE",
    ] == runs


def test_update_reuses_a_superseded_result_that_is_still_valid(cp: ControlPlane, work: Path) -> None:
    """An update that does not change what a running deployment gets reuses its result."""
    _create(cp, "reuse", work)
    (work / "go-first-r1").touch()
    wait_file(work / "started-second-r1")
    # Same template and parameters: everything the running create does is still what is wanted.
    resp = _update(cp, "reuse", work, "r1")
    assert 202 == resp.status, resp.body
    (work / "go-second-r1").touch()
    assert "UPDATE_COMPLETE" == cp.wait_stack("reuse")["status"]
    assert ["first r1 CREATE", "second r1 CREATE"] == _runs(work)


def test_if_match_gives_409_when_the_stack_changed(cp: ControlPlane, work: Path) -> None:
    """An update naming an old version (body, If-Match header or `--if-match`) gets 409, changing nothing."""
    _create(cp, "ifmatch", work)
    version = cp.api("GET", "/v1/stacks/ifmatch").body["version"]
    (work / "go-first-r1").touch()
    (work / "go-second-r1").touch()
    assert 202 == _update(cp, "ifmatch", work, "r1", if_match=version).status
    stale = _update(cp, "ifmatch", work, "r2", if_match=version)
    assert 409 == stale.status
    assert f"not {version}" in stale.body["error"]["message"]
    header = cp.api(
        "PUT",
        "/v1/stacks/ifmatch",
        {"template": GATED, "parameters": {"dir": str(work), "server": "ifmatch-box"}},
        headers={"If-Match": f'"{version}"'},
    )
    assert 409 == header.status
    assert "UPDATE_COMPLETE" == cp.wait_stack("ifmatch")["status"]
    cli = cp.cli(
        "stack",
        "update",
        "ifmatch",
        "-t",
        str(_template_file(work)),
        "-P",
        f"dir={work}",
        "-P",
        "server=ifmatch-box",
        "--if-match",
        str(version),
    )
    assert 1 == cli.returncode
    assert "HTTP 409" in cli.stderr


def _template_file(work: Path) -> Path:
    path = work / "gated.yaml"
    path.write_text(GATED)
    return path


def test_cancel_fails_deployments_and_the_agent_stops_the_hook(cp: ControlPlane, work: Path) -> None:
    """`stack cancel` fails the stack and its running deployment; the agent stops the hook before its end."""
    _create(cp, "cancel", work)
    wait_file(work / "started-first-r1")
    out = cp.cli("stack", "cancel", "cancel")
    assert 0 == out.returncode, out.stderr
    stack = cp.api("GET", "/v1/stacks/cancel").body
    assert "CREATE_FAILED" == stack["status"]
    assert "cancelled" in stack["status_reason"]
    deps = cp.api("GET", "/v1/deployments?stack=cancel").body
    first = next(d for d in deps if d["name"] == "10-first")
    assert "FAILED" == first["status"]
    assert "cancelled" in first["status_reason"]
    # The agent stops the hook: it never reaches its end even once released.
    wait_log(cp.agent_dir("cancel-box") / "agent.log", "status code 143", 30)
    (work / "go-first-r1").touch()
    time.sleep(1.0)
    assert [] == _runs(work)
    assert not (work / "started-second-r1").exists()
    again = cp.api("POST", "/v1/stacks/cancel/cancel")
    assert 409 == again.status


def test_timeout_fails_the_deployment_with_its_reason(cp: ControlPlane, work: Path) -> None:
    """A deployment past its timeout fails 'timed out after 2 s', and the stack's reason says so."""
    text = GATED.replace("name: 10-first, config:", "name: 10-first, timeout: 2, config:")
    body = {"name": "slow", "template": text, "parameters": {"dir": str(work), "server": "slow-box"}}
    assert 201 == cp.api("POST", "/v1/stacks", body).status
    final = cp.wait_stack("slow", timeout=120)
    assert "CREATE_FAILED" == final["status"]
    deps = cp.api("GET", "/v1/deployments?stack=slow").body
    first = next(d for d in deps if d["name"] == "10-first")
    assert first["status_reason"].startswith("timed out after 2 s")
    assert "timed out after 2 s" in final["status_reason"]


def test_rollback_returns_a_failed_update_to_the_previous_template(cp: ControlPlane, work: Path) -> None:
    """A failed update with rollback returns the stack to its previous template and re-applies its inputs."""
    _create(cp, "rollback", work)
    for step in ("first", "second"):
        (work / f"go-{step}-r1").touch()
    assert "CREATE_COMPLETE" == cp.wait_stack("rollback")["status"]
    for step in ("first", "second"):
        (work / f"go-{step}-r2").touch()
    (work / "fail-second-r2").touch()
    assert 202 == _update(cp, "rollback", work, "r2", rollback=True).status
    final = cp.wait_stack("rollback", timeout=120)
    assert "ROLLBACK_COMPLETE" == final["status"], final
    assert "r1" == final["parameters"]["rev"]
    assert "r1" == cp.outputs("rollback")["rev"]
    runs = _runs(work)
    assert runs[:4] == ["first r1 CREATE", "second r1 CREATE", "first r2 UPDATE", "second r2 UPDATE"]
    assert "first r1 UPDATE" in runs[4:]  # the previous inputs applied again


def test_rollback_of_a_failed_create_removes_what_it_made(cp: ControlPlane, work: Path) -> None:
    """A failed create with rollback ends ROLLBACK_COMPLETE with no resource left."""
    (work / "go-first-r1").touch()
    (work / "fail-first-r1").touch()
    _create(cp, "rbcreate", work, rollback=True)
    final = cp.wait_stack("rbcreate", timeout=120)
    assert "ROLLBACK_COMPLETE" == final["status"], final
    assert [] == cp.api("GET", "/v1/stacks/rbcreate/resources").body


def test_check_reports_drift_and_converge_reapplies_it(cp: ControlPlane, work: Path) -> None:
    """`stack check` reports a failed deployment as drift; `stack converge` re-applies only it."""
    (work / "go-first-r1").touch()
    (work / "go-second-r1").touch()
    (work / "fail-second-r1").touch()
    _create(cp, "drift", work)
    assert "CREATE_FAILED" == cp.wait_stack("drift")["status"]
    _ledger_reported(cp, "drift-box")
    check = cp.cli("stack", "check", "drift")
    assert 1 == check.returncode, check.stdout
    assert "failed" in check.stdout and "second" in check.stdout
    (work / "fail-second-r1").unlink()
    out = cp.cli("stack", "converge", "drift", "--wait", "--timeout", "120")
    assert 0 == out.returncode, out.stdout + out.stderr
    assert "CONVERGE_COMPLETE" == cp.api("GET", "/v1/stacks/drift").body["status"]
    assert 2 == _runs(work).count("second r1 CREATE")  # failed once, re-applied once
    assert 1 == _runs(work).count("first r1 CREATE")  # in sync: left alone
    _ledger_reported(cp, "drift-box")
    report = cp.api("GET", "/v1/stacks/drift/check").body
    assert report["in_sync"], report


def test_check_reports_a_silent_server(cp: ControlPlane, work: Path) -> None:
    """`stack check` reports a server whose agent stopped sending heartbeats as silent."""
    (work / "go-first-r1").touch()
    (work / "go-second-r1").touch()
    _create(cp, "silent", work)
    assert "CREATE_COMPLETE" == cp.wait_stack("silent")["status"]
    pid = int((cp.agent_dir("silent-box") / "agent.pid").read_text())
    os.kill(pid, signal.SIGSTOP)  # frozen: no heartbeats
    try:

        def silent() -> dict[str, Any] | None:
            report = cp.api("GET", "/v1/stacks/silent/check").body
            return report if "silent" in [d["kind"] for d in report["drift"]] else None

        report = wait_until(silent, "not silent past the 6 s heartbeat lease of this control plane", 30)
        assert ["silent"] == [d["kind"] for d in report["drift"]], report
    finally:
        os.kill(pid, signal.SIGCONT)


def test_events_carry_generations_follow_and_outlive_the_stack(cp: ControlPlane, work: Path) -> None:
    """Events carry generations, `events --follow` ends with the stack, and events outlive its deletion."""
    for step in ("first", "second"):
        (work / f"go-{step}-r1").touch()
    _create(cp, "events", work)
    follow = cp.cli("stack", "events", "events", "--follow", timeout=120)
    assert 0 == follow.returncode, follow.stderr
    assert "CREATE_COMPLETE" in follow.stdout
    events = cp.api("GET", "/v1/stacks/events/events").body
    results = [e for e in events if e["deployment_id"] and e["status"] == "COMPLETE"]
    assert 2 == len(results) and all(e["generation"] == 1 for e in results)
    # A brand-new deployment's IN_PROGRESS event names its first generation too.
    started = [e for e in events if e["deployment_id"] and e["status"] == "IN_PROGRESS"]
    assert ["first", "second"] == sorted(e["resource_name"] for e in started)
    assert all(e["generation"] == 1 for e in started), started
    last = events[-1]["id"]
    assert [] == cp.api("GET", f"/v1/stacks/events/events?after={last}&wait=1").body  # nothing new
    cp.delete_stack("events")
    after = cp.api("GET", "/v1/stacks/events/events").body
    assert len(after) > len(events)
    assert ("DELETE", "COMPLETE") == (after[-1]["action"], after[-1]["status"])


GROUP = """
heat_template_version: 2018-08-31
parameters:
  dir: {type: string}
resources:
  a: {type: OS::Heat::DeployedServer, properties: {name: conv-a}}
  b: {type: OS::Heat::DeployedServer, properties: {name: conv-b}}
  members:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {a: {get_resource: a}, b: {get_resource: b}}
      input_values: {DIR: {get_param: dir}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}]
      outputs: [{name: who}]
      config: |
        #!/bin/sh
        echo "$deploy_resource_name $deploy_action" >> "$DIR/runs"
        [ -e "$DIR/fail-$deploy_resource_name" ] && { echo "failing $deploy_resource_name" >&2; exit 3; }
        printf '%s' "$deploy_resource_name" > "$heat_outputs_path.who"
outputs:
  who: {value: {get_attr: [members, who]}}
"""


def test_converge_reapplies_a_failed_group_member_only(cp: ControlPlane, work: Path) -> None:
    """A group member failed on its server: converge runs it again, leaves the healthy one alone."""
    (work / "fail-b").touch()
    resp = cp.api(
        "POST", "/v1/stacks", {"name": "convgroup", "template": GROUP, "parameters": {"dir": str(work)}}
    )
    assert 201 == resp.status, resp.body
    assert "CREATE_FAILED" == cp.wait_stack("convgroup")["status"]
    # b's failure fails the stack at once; a, on its own server, may still be running.
    wait_until(lambda: sorted(_runs(work)) == ["a CREATE", "b CREATE"], f"runs: {_runs(work)}", 60)
    wait_until(
        lambda: (
            {d["resource_name"]: d["status"] for d in cp.api("GET", "/v1/deployments?stack=convgroup").body}
            == {"a": "COMPLETE", "b": "FAILED"}
        ),
        "a COMPLETE and b FAILED",
        60,
    )
    _ledger_reported(cp, "conv-a", "conv-b")
    drift = cp.api("GET", "/v1/stacks/convgroup/check").body["drift"]
    assert [("failed", "b")] == [(d["kind"], d["resource"]) for d in drift], drift

    (work / "fail-b").unlink()
    out = cp.cli("stack", "converge", "convgroup", "--wait", "--timeout", "120")
    assert 0 == out.returncode, out.stdout + out.stderr
    assert "CONVERGE_COMPLETE" == cp.api("GET", "/v1/stacks/convgroup").body["status"]
    assert ["a CREATE", "b CREATE", "b CREATE"] == sorted(_runs(work))
    assert {"a": "a", "b": "b"} == cp.outputs("convgroup")["who"]
    events = cp.api("GET", "/v1/stacks/convgroup/events").body
    reapplied = [e for e in events if "re-applied by converge" in e["reason"]]
    assert [2] == [e["generation"] for e in reapplied], reapplied
    _ledger_reported(cp, "conv-a", "conv-b")
    report = cp.api("GET", "/v1/stacks/convgroup/check").body
    assert report["in_sync"], report


def test_converge_finishes_the_batches_a_failed_member_held_back(cp: ControlPlane, work: Path) -> None:
    """batch_create 1: a fails, b never starts; converge re-runs a, then the group goes on to b."""
    batched = (
        GROUP.replace(
            "    type: OS::Heat::SoftwareDeploymentGroup\n",
            "    type: OS::Heat::SoftwareDeploymentGroup\n    update_policy: {batch_create: {max_batch_size: 1}}\n",
        )
        .replace("conv-a", "batch-a")
        .replace("conv-b", "batch-b")
    )
    (work / "fail-a").touch()
    body = {"name": "convbatch", "template": batched, "parameters": {"dir": str(work)}}
    assert 201 == cp.api("POST", "/v1/stacks", body).status
    assert "CREATE_FAILED" == cp.wait_stack("convbatch")["status"]
    assert ["a CREATE"] == _runs(work)
    _ledger_reported(cp, "batch-a")
    (work / "fail-a").unlink()
    out = cp.cli("stack", "converge", "convbatch", "--wait", "--timeout", "120")
    assert 0 == out.returncode, out.stdout + out.stderr
    assert "CONVERGE_COMPLETE" == cp.api("GET", "/v1/stacks/convbatch").body["status"]
    assert ["a CREATE", "a CREATE", "b CREATE"] == _runs(work)
    assert {"a": "a", "b": "b"} == cp.outputs("convbatch")["who"]
