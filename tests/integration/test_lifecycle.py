"""Lifecycle with real agents: actions a deployment lists, suspend/resume, components, replacement.

Every config appends `ACTION NAME` to a log file the test reads, so each assertion
is about what really ran on the servers, in which order, and how often.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import software_deployment

RECORD = """#!/bin/sh
echo "$deploy_action $NAME" >> "$LOG"
printf '%s' "$NAME-$deploy_action" > "$heat_outputs_path.result"
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("lifecycle"))
    yield plane
    stop_control_plane(plane)


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


LOGGED = "LOG: {get_param: log}"


def config(name: str = "cfg", extra_inputs: str = "") -> str:
    return f"""
  {name}:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: NAME}}, {{name: LOG}}{extra_inputs}]
      outputs: [{{name: result}}]
      config: {{get_param: script}}
"""


HEADER = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  script: {type: string}
"""

ACTIONS = (
    HEADER
    + """
resources:
  srv: {type: OS::Heat::DeployedServer}
"""
    + config()
    + software_deployment(
        "every", f"NAME: every, {LOGGED}", actions="CREATE, UPDATE, DELETE, SUSPEND, RESUME"
    )
    + software_deployment("plain", f"NAME: plain, {LOGGED}")
    + software_deployment("on_suspend", f"NAME: on_suspend, {LOGGED}", actions="SUSPEND")
    + software_deployment(
        "after",
        f"NAME: after, {LOGGED}, SEEN: {{get_attr: [every, result]}}",
        actions="SUSPEND, RESUME",
        depends_on="every",
    )
)


def test_deployments_run_only_for_the_actions_they_list(cp: ControlPlane, tmp_path: Path) -> None:
    """create, suspend, resume, delete: each deployment runs exactly the actions it lists."""
    log = tmp_path / "runs.log"
    params = {"log": str(log), "script": RECORD}
    cp.create_stack("acts", ACTIONS, params=params)
    assert ["CREATE every", "CREATE plain"] == sorted(runs(log))

    suspended = cp.cli("stack", "suspend", "acts", "--wait", "--timeout", "120")
    assert 0 == suspended.returncode, suspended.stdout + suspended.stderr
    assert "SUSPEND_COMPLETE" == cp.api("GET", "/v1/stacks/acts").body["status"]
    suspend_runs = runs(log)[2:]
    assert ["SUSPEND after", "SUSPEND every", "SUSPEND on_suspend"] == sorted(suspend_runs)
    assert suspend_runs.index("SUSPEND after") < suspend_runs.index("SUSPEND every")  # dependents first

    again = cp.api("POST", "/v1/stacks/acts/suspend")
    assert (409, "name") == (again.status, again.body["error"]["where"])
    update = cp.api("PUT", "/v1/stacks/acts", {"template": ACTIONS, "parameters": params})
    assert 409 == update.status and "resume it before updating" in update.body["error"]["message"]

    cp.stack_action("acts", "resume")
    assert ["RESUME every", "RESUME after"] == runs(log)[5:]  # dependencies first
    refused = cp.api("POST", "/v1/stacks/acts/resume")
    assert 409 == refused.status and "only a suspended stack resumes" in refused.body["error"]["message"]

    cp.delete_stack("acts")
    assert ["DELETE every"] == runs(log)[7:]


def test_update_runs_only_what_changed(cp: ControlPlane, tmp_path: Path) -> None:
    """A stack update re-runs the deployments whose inputs changed and no other."""
    log = tmp_path / "runs.log"
    params = {"log": str(log), "script": RECORD}
    cp.create_stack("diff", ACTIONS, params=params)
    changed = ACTIONS.replace("{NAME: plain,", "{NAME: plain, EXTRA: x,")
    assert changed != ACTIONS
    cp.update_stack("diff", changed, params)
    assert ["CREATE every", "CREATE plain", "UPDATE plain"] == sorted(runs(log))
    cp.update_stack("diff", changed, params)
    assert 3 == len(runs(log))  # the same template again: nothing runs
    cp.delete_stack("diff")


COMPONENT = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  version: {type: string, default: "1"}
resources:
  srv: {type: OS::Heat::DeployedServer}
  comp:
    type: OS::Heat::SoftwareComponent
    properties:
      inputs: [{name: LOG}, {name: VERSION}]
      outputs: [{name: result}]
      configs:
        - actions: [CREATE]
          tool: script
          config: |
            #!/bin/sh
            echo "create $VERSION $deploy_action" >> "$LOG"
            printf created > "$heat_outputs_path.result"
        - actions: [UPDATE, DELETE]
          tool: script
          config: |
            #!/bin/sh
            echo "update-or-delete $VERSION $deploy_action" >> "$LOG"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: comp}
      server: {get_resource: srv}
      actions: [CREATE]
      input_values: {LOG: {get_param: log}, VERSION: {get_param: version}}
outputs:
  result: {value: {get_attr: [dep, result]}}
"""


def test_component_runs_the_config_for_each_action(cp: ControlPlane, tmp_path: Path) -> None:
    """A component's configs decide: CREATE, UPDATE and DELETE each run their own config."""
    log = tmp_path / "runs.log"
    cp.create_stack("comp", COMPONENT, params={"log": str(log)})
    assert ["create 1 CREATE"] == runs(log)
    assert "created" == cp.outputs("comp")["result"]
    (dep,) = cp.api("GET", "/v1/deployments?stack=comp").body
    shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body
    assert ("component", ["CREATE", "UPDATE", "DELETE"]) == (shown["group"], shown["actions"])

    cp.update_stack("comp", COMPONENT, {"log": str(log), "version": "2"})
    assert "update-or-delete 2 UPDATE" == runs(log)[-1]

    cp.stack_action("comp", "suspend")  # no SUSPEND config: nothing runs
    assert 2 == len(runs(log))

    cp.delete_stack("comp")
    assert ["create 1 CREATE", "update-or-delete 2 UPDATE", "update-or-delete 2 DELETE"] == runs(log)


def test_component_with_an_action_twice_is_refused_naming_the_entry(cp: ControlPlane) -> None:
    """Two configs for UPDATE: 400 naming the second entry's actions; nothing is created."""
    bad = COMPONENT.replace("- actions: [UPDATE, DELETE]", "- actions: [DELETE, UPDATE, CREATE]")
    resp = cp.create("dup", bad, params={"log": "/dev/null"})
    assert 400 == resp.status
    assert "resources.comp.properties.configs[1].actions" == resp.body["error"]["where"]
    assert "CREATE" in resp.body["error"]["message"]
    assert 404 == cp.api("GET", "/v1/stacks/dup").status


RENAME = (
    HEADER
    + """
  first_name: {type: string, default: backend-v1}
resources:
  srv: {type: OS::Heat::DeployedServer}
"""
    + config()
    + software_deployment(
        "backend",
        f"NAME: {{get_param: first_name}}, {LOGGED}",
        actions="CREATE, UPDATE, DELETE",
        extra="      name: {get_param: first_name}\n",
    )
    + software_deployment("frontend", f"NAME: frontend, {LOGGED}, UPSTREAM: {{get_attr: [backend, result]}}")
    + """
outputs:
  upstream: {value: {get_attr: [backend, result]}}
"""
)


def test_name_change_replaces_blue_green(cp: ControlPlane, tmp_path: Path) -> None:
    """A new `name` replaces the deployment: new CREATE, dependents UPDATE, then old DELETE."""
    log = tmp_path / "runs.log"
    params = {"log": str(log), "script": RECORD}
    cp.create_stack("rename", RENAME, params=params)
    assert ["CREATE backend-v1", "CREATE frontend"] == runs(log)
    cp.update_stack("rename", RENAME, {**params, "first_name": "backend-v2"})
    assert ["CREATE backend-v2", "UPDATE frontend", "DELETE backend-v1"] == runs(log)[2:]
    assert "backend-v2-CREATE" == cp.outputs("rename")["upstream"]
    names = sorted(d["name"] for d in cp.api("GET", "/v1/deployments?stack=rename").body)
    assert ["backend-v2", "rename-cfg"] == names
    cp.delete_stack("rename")


DELETE_ONLY = (
    HEADER
    + """
resources:
  srv: {type: OS::Heat::DeployedServer}
"""
    + config()
    + software_deployment("teardown", f"NAME: teardown, {LOGGED}", actions="DELETE")
    + software_deployment("drain", f"NAME: drain, {LOGGED}", actions="DELETE")
)


def test_delete_only_deployment_runs_its_delete_config_though_it_never_ran(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """`actions: [DELETE]`: nothing runs at CREATE; removal from the template and stack delete run DELETE."""
    log = tmp_path / "runs.log"
    params = {"log": str(log), "script": RECORD}
    cp.create_stack("teardown", DELETE_ONLY, params=params)
    assert [] == runs(log)
    shown = {d["resource_name"]: d for d in cp.api("GET", "/v1/deployments?stack=teardown").body}
    assert {"teardown", "drain"} <= set(shown) and shown["drain"]["generation"] == 0
    # Nothing ran yet, so the stack completed before its agent enrolled; a server that never
    # enrolled has nothing to tear down (its DELETE-only deployments are just removed).
    cp.wait_enrolled("teardown-srv")

    cp.update_stack("teardown", DELETE_ONLY[: DELETE_ONLY.index("  drain:")], params)
    assert ["DELETE drain"] == runs(log)

    cp.delete_stack("teardown")
    assert ["DELETE drain", "DELETE teardown"] == runs(log)


def test_delete_only_deployment_on_a_server_that_never_enrolled_is_removed_without_running(
    tmp_path: Path,
) -> None:
    """No agent ever enrolled: the stack delete removes DELETE-only deployments at once, saying why.

    Nothing of the stack ever reached that server (its agent never fetched a document),
    so there is nothing to tear down; waiting would hold the delete for an agent that
    can no longer come, since the server record and its enrolment token go with the stack.
    """
    plane = start_control_plane(tmp_path, "--provisioner", "enrol")  # nobody enrols
    try:
        log = tmp_path / "runs.log"
        params = {"log": str(log), "script": RECORD}
        plane.create_stack("orphan", DELETE_ONLY, params=params)
        assert "AWAITING_ENROLMENT" == plane.api("GET", "/v1/servers/orphan-srv").body["status"]

        plane.delete_stack("orphan")
        assert [] == runs(log)
        events = plane.api("GET", "/v1/stacks/orphan/events").body
        deleted = {
            e["resource_name"]: e["reason"]
            for e in events
            if e["action"] == "DELETE"
            and e["status"] == "COMPLETE"
            and e["resource_name"] in ("teardown", "drain")
        }
        reason = "DELETE not run: server orphan-srv never enrolled, so nothing ran there"
        assert {"teardown": reason, "drain": reason} == deleted
        assert not [e for e in events if e["action"] == "DELETE" and e["generation"]]  # no DELETE generation
        assert 404 == plane.api("GET", "/v1/servers/orphan-srv").status  # no agent can enrol for it now
    finally:
        stop_control_plane(plane)
