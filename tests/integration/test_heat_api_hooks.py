"""Breakpoints (Heat's environment ``hooks``) driven by the real openstack CLI: `stack hook poll` and `hook clear`.

The greeter's script appends to a log, so the log says whether the paused deployment ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import PROJECT, OpenStack, start_heat_plane, write_template
from tests.support.waiting import wait_until

LOGGED = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  rev: {type: string, default: r1}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: hooked-box}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: LOG}, {name: REV}]
      config: |
        #!/bin/sh
        echo "$deploy_action $REV" >> "$LOG"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      input_values: {LOG: {get_param: log}, REV: {get_param: rev}}
"""

HOOKS = """
resource_registry:
  resources:
    dep: {hooks: [pre-create, pre-update]}
    "bo*": {hooks: post-create}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-hooks"))
    yield cp, url
    stop_control_plane(cp)


def _status(osc: OpenStack, stack: str) -> str:
    return str(osc.json("stack", "show", stack)["stack_status"])


def _pending(osc: OpenStack, stack: str) -> list[dict[str, Any]]:
    found = osc.json("stack", "hook", "poll", stack)
    assert isinstance(found, list)
    return found


def test_a_hooked_resource_waits_for_hook_clear_on_create_and_on_update(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """pre-create and pre-update pause `dep` (nothing runs, `hook poll` lists it) until `hook clear`."""
    cp, url = plane
    osc = OpenStack(cp, f"{url}/v1/{PROJECT}")
    log = tmp_path / "runs.log"
    template = write_template(tmp_path, "logged.yaml", LOGGED)
    env = write_template(tmp_path, "hooks.yaml", HOOKS)
    osc.ok("stack", "create", "-t", template, "-e", env, "--parameter", f"log={log}", "hooked")
    wait_until(
        lambda: _paused(osc, "CREATE", "pre-create"), "dep never paused at pre-create", 60, interval=0.5
    )
    pending = _pending(osc, "hooked")
    assert ["dep"] == [p["Resource Name"] for p in pending], pending
    assert "CREATE paused until Hook pre-create is cleared" == pending[0]["Resource Status Reason"]
    assert "INIT_COMPLETE" == pending[0]["Resource Status"]  # as Heat shows a resource not created yet
    assert "CREATE_IN_PROGRESS" == _status(osc, "hooked")
    assert not log.exists()  # paused: the deployment was not published, its script did not run
    warnings = osc.json("stack", "event", "list", "hooked")
    assert any("post-create does not pause" in json.dumps(e) for e in warnings), warnings

    osc.ok("stack", "hook", "clear", "--pre-create", "hooked", "dep")
    wait_until(lambda: _settled(osc) == "CREATE_COMPLETE", "create did not finish after the clear", 90)
    assert "CREATE_COMPLETE" == _status(osc, "hooked")
    assert ["CREATE r1"] == log.read_text().splitlines()
    cleared = [e for e in osc.json("stack", "event", "list", "hooked") if e["resource_name"] == "dep"]
    assert "Hook pre-create is cleared" in [e["resource_status_reason"] for e in cleared], cleared

    osc.ok("stack", "update", "--existing", "--parameter", "rev=r2", "hooked")
    wait_until(
        lambda: _paused(osc, "UPDATE", "pre-update"), "dep never paused at pre-update", 60, interval=0.5
    )
    pending = _pending_update(osc)
    assert ["dep"] == [p["Resource Name"] for p in pending]
    assert ["CREATE r1"] == log.read_text().splitlines()  # not yet
    again = osc.run("stack", "hook", "clear", "--pre-create", "hooked", "dep")  # not the pending one
    assert again.returncode != 0 and "not pending" in again.stderr, again
    done = cp.cli("stack", "resource", "signal", "hooked", "dep", "--data", '{"unset_hook": "pre-update"}')
    assert 0 == done.returncode, done.stdout + done.stderr
    wait_until(lambda: _settled(osc) == "UPDATE_COMPLETE", "update did not finish after the clear", 90)
    assert "UPDATE_COMPLETE" == _status(osc, "hooked")
    assert ["CREATE r1", "UPDATE r2"] == log.read_text().splitlines()


def _paused(osc: OpenStack, action: str, hook: str) -> bool:
    """Whether the stack's events (plain HTTP: what the wait polls) say dep paused at *hook*."""
    reason = f"{action} paused until Hook {hook} is cleared"
    events = osc.get("/stacks/hooked/events")["events"]
    return any(e["resource_name"] == "dep" and e["resource_status_reason"] == reason for e in events)


def _settled(osc: OpenStack) -> str:
    """The stack's status over plain HTTP once it has left IN_PROGRESS (what the wait polls), else ""."""
    status = str(osc.get("/stacks/hooked")["stack"]["stack_status"])
    return "" if status.endswith("IN_PROGRESS") else status


def _pending_update(osc: OpenStack) -> list[dict[str, Any]]:
    found = osc.json("stack", "hook", "poll", "hooked")  # heatclient picks the hook by the stack's action
    assert isinstance(found, list)
    return [p for p in found if "pre-update" in json.dumps(p)]
