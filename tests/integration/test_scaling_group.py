"""OS::Heat::AutoScalingGroup scaled by its policies' URLs with curl, members with real local agents.

Each member is a server with one deployment that appends "<member> <action>" to a log, so
the log says which members' hooks ran; a removed member's DELETE line is written by its
own agent, before the control plane releases that agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import curl
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

MEMBER = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: LOG}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "$WHO $deploy_action" >> "$LOG"
        printf '%s' "$WHO" > "$heat_outputs_path.said"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {WHO: {get_param: OS::stack_name}, LOG: {get_param: log}}
outputs:
  said: {value: {get_attr: [dep, said]}}
"""

SCALING = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      resource: {type: member.yaml, properties: {log: {get_param: log}}}
  up:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: {get_resource: asg}, adjustment_type: change_in_capacity, scaling_adjustment: 1}
  down:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: {get_resource: asg}, adjustment_type: change_in_capacity, scaling_adjustment: -1}
  slow_up:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: exact_capacity
      scaling_adjustment: 3
      cooldown: 600
outputs:
  up_url: {value: {get_attr: [up, signal_url]}}
  down_url: {value: {get_attr: [down, alarm_url]}}
  slow_url: {value: {get_attr: [slow_up, signal_url]}}
  size: {value: {get_attr: [asg, current_size]}}
  said: {value: {get_attr: [asg, outputs_list, said]}}
  oldest: {value: {get_attr: [asg, resource.0.said]}}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("scaling"))
    yield plane
    stop_control_plane(plane)


def _scaled(cp: ControlPlane, size: int, stack: str = "auto") -> dict[str, Any]:
    """Wait until the group is COMPLETE again at *size* members; the stack's outputs."""

    def settled() -> dict[str, Any] | None:
        rows = {r["name"]: r for r in cp.api("GET", f"/v1/stacks/{stack}/resources").body}
        if rows["asg"]["status"].endswith("IN_PROGRESS"):
            return None
        out = cp.outputs(stack)
        return out if out["size"] == size else None

    return wait_until(settled, f"group not at {size} members; log: {cp.log}", 180)


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_policy_urls_scale_the_group_up_and_down(cp: ControlPlane, tmp_path: Path) -> None:
    """curl on the up URL adds a member (a new agent, its CREATE runs); on the down URL the oldest
    member's DELETE runs on its agent and then the member, its server and agent go; min_size,
    max_size and a cooldown say no change; a URL for another resource is refused."""
    (tmp_path / "member.yaml").write_text(MEMBER)
    (tmp_path / "scaling.yaml").write_text(SCALING)
    log = tmp_path / "runs.log"
    done = cp.cli(
        "stack", "create", "auto", "-t", str(tmp_path / "scaling.yaml"), "-P", f"log={log}", "--wait"
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    out = cp.outputs("auto")
    assert 1 == out["size"] and [line.split()[0] for line in _lines(log)] == out["said"]
    first = out["said"][0]

    assert "scaling from 1 to 2" in curl.post(out["up_url"])["result"]
    out = _scaled(cp, 2)
    second = out["said"][1]
    assert [first, second] == out["said"] and first == out["oldest"]
    assert [f"{first} CREATE", f"{second} CREATE"] == _lines(log)
    assert "CREATE_COMPLETE" == cp.api("GET", "/v1/stacks/auto?summary=true").body["status"]

    done = cp.cli("stack", "resource", "signal", "auto", "up")
    assert 0 == done.returncode and "scaling from 2 to 3" in done.stdout, done.stdout + done.stderr
    third = _scaled(cp, 3)["said"][2]
    assert "stays at 3" in curl.post(out["up_url"])["result"]

    servers = {s["name"] for s in cp.api("GET", "/v1/servers").body}
    assert "scaling from 3 to 2" in curl.post(out["down_url"], '{"current": "alarm"}')["result"]
    out = _scaled(cp, 2)
    assert [second, third] == out["said"]  # the oldest went
    assert f"{first} DELETE" == _lines(log)[-1]
    gone = servers - {s["name"] for s in cp.api("GET", "/v1/servers").body}
    assert 1 == len(gone) and first in next(iter(gone))
    assert not (cp.data_dir / "agents" / next(iter(gone))).exists()  # its agent was released

    assert "scaling from 2 to 1" in curl.post(out["down_url"])["result"]
    out = _scaled(cp, 1)
    assert "stays at 1" in curl.post(out["down_url"])["result"]
    assert "scaling from 1 to 3" in curl.post(out["slow_url"])["result"]
    out = _scaled(cp, 3)
    assert "in its cooldown" in curl.post(out["down_url"])["result"]
    events = cp.api("GET", "/v1/stacks/auto/events").body
    assert any(
        e["resource_name"] == "down" and e["action"] == "SIGNAL" and "cooldown" in e["reason"] for e in events
    )

    wrong = out["up_url"].replace(cp.url, "").replace("/up?", "/down?")
    assert 403 == cp.api("POST", wrong, token=None).status
    assert 404 == cp.api("POST", "/v1/stacks/auto/resources/nope/signal", {}).status
    assert 400 == cp.api("POST", "/v1/stacks/auto/resources/asg/signal", {}).status

    before = len(_lines(log))
    update = ["stack", "update", "auto", "-t", str(tmp_path / "scaling.yaml"), "-P", f"log={log}", "--wait"]
    done = cp.cli(*update)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert 3 == cp.outputs("auto")["size"] and before == len(_lines(log))  # an update keeps the size
    done = cp.cli("stack", "delete", "auto", "--wait")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert 3 == len([line for line in _lines(log)[before:] if line.endswith("DELETE")])


def test_an_update_right_after_a_signal_keeps_the_new_member_and_a_suspended_stack_refuses(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A stack update sent while the group is scaling waits for it and keeps the new member (no
    hook runs twice); an alarm's "ok" notification changes nothing; a suspended stack's policy
    answers 409 and the group stays as it was."""
    (tmp_path / "member.yaml").write_text(MEMBER)
    (tmp_path / "scaling.yaml").write_text(SCALING)
    log = tmp_path / "runs.log"
    create = ["stack", "create", "busy", "-t", str(tmp_path / "scaling.yaml"), "-P", f"log={log}", "--wait"]
    done = cp.cli(*create)
    assert 0 == done.returncode, done.stdout + done.stderr
    up_url = cp.outputs("busy")["up_url"]

    assert "scaling from 1 to 2" in curl.post(up_url)["result"]
    # Set in the signal's own transaction; it ends only after a new agent has started and run a hook.
    rows = {r["name"]: r for r in cp.api("GET", "/v1/stacks/busy/resources").body}
    assert "UPDATE_IN_PROGRESS" == rows["asg"]["status"], rows["asg"]
    update = ["stack", "update", "busy", "-t", str(tmp_path / "scaling.yaml"), "-P", f"log={log}", "--wait"]
    done = cp.cli(*update)
    assert 0 == done.returncode, done.stdout + done.stderr
    out = _scaled(cp, 2, "busy")
    assert sorted(f"{who} CREATE" for who in out["said"]) == sorted(_lines(log))
    assert "UPDATE_COMPLETE" == cp.api("GET", "/v1/stacks/busy?summary=true").body["status"]

    assert "not 'alarm'" in curl.post(up_url, '{"current": "ok", "previous": "alarm"}')["result"]
    assert 2 == cp.outputs("busy")["size"]

    done = cp.cli("stack", "suspend", "busy", "--wait")
    assert 0 == done.returncode, done.stdout + done.stderr
    refused = curl.post(up_url)
    assert "takes no signals" in json.dumps(refused), refused
    assert 409 == cp.api("POST", "/v1/stacks/busy/resources/up/signal", {}).status
    assert 2 == cp.outputs("busy")["size"]
    done = cp.cli("stack", "resume", "busy", "--wait")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "scaling from 2 to 3" in curl.post(up_url)["result"]
    assert 3 == len(_scaled(cp, 3, "busy")["said"])
    cp.delete_stack("busy")
    assert 3 == len([line for line in _lines(log) if line.endswith("DELETE")])
