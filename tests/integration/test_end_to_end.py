"""Stacks end to end: the real control plane, real agents, real script hooks, on loopback."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import EXAMPLES
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_file


@pytest.fixture
def control_plane(tmp_path: Path, db_args: list[str]) -> Iterator[ControlPlane]:
    """These end-to-end tests run on SQLite and on PostgreSQL (a fresh database each)."""
    cp = start_control_plane(tmp_path, *db_args)
    yield cp
    stop_control_plane(cp)


def demo_files() -> dict[str, str]:
    return {f"scripts/{p.name}": p.read_text() for p in (EXAMPLES / "scripts").glob("*.sh")}


def test_demo_stack_converges_and_blue_green_update_repoints_frontend(control_plane: ControlPlane) -> None:
    """The demo stack: two servers converge; backend v2 replaces v1 and the frontend follows it."""
    cp = control_plane
    cp.create_stack("bg", EXAMPLES / "blue-green.yaml", files=demo_files())
    first = cp.outputs("bg")
    assert first["frontend_upstream"] == first["backend_address"]
    assert "hello from the backend (v1)" == first["frontend_saw"]

    body = {
        "template": (EXAMPLES / "blue-green.yaml").read_text(),
        "files": demo_files(),
        "parameters": {"backend_version": "v2"},
    }
    assert 202 == cp.api("PUT", "/v1/stacks/bg", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("bg")["status"]
    second = cp.outputs("bg")
    assert second["backend_address"] != first["backend_address"]
    assert second["frontend_upstream"] == second["backend_address"]
    assert "hello from the backend (v2)" == second["frontend_saw"]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{first['backend_address']}/", timeout=2)

    deployments = cp.api("GET", "/v1/deployments?stack=bg").body
    assert ["backend-v2", "frontend"] == sorted(d["name"] for d in deployments)
    events = cp.api("GET", "/v1/stacks/bg/events").body
    order = [(e["resource_name"], e["action"], e["status"]) for e in events]
    new_backend = order.index(
        ("backend_deployment", "CREATE", "COMPLETE"), order.index(("bg", "UPDATE", "IN_PROGRESS"))
    )
    frontend_updated = order.index(("frontend_deployment", "UPDATE", "COMPLETE"))
    old_deleted = order.index(("backend_deployment", "DELETE", "COMPLETE"))
    assert new_backend < frontend_updated < old_deleted

    cp.delete_stack("bg")
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{second['backend_address']}/", timeout=2)


CHAIN = """
heat_template_version: rocky
resources:
  one: {type: OS::Heat::DeployedServer}
  two: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PREV}, {name: STEP}]
      outputs: [{name: trail}]
      config: |
        #!/bin/sh
        printf '%s>%s@%s' "$PREV" "$STEP" "$deploy_server_id" > "$heat_outputs_path.trail"
  a:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: one},
                 input_values: {PREV: start, STEP: a}}
  b:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: two},
                 input_values: {PREV: {get_attr: [a, trail]}, STEP: b}}
  c:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: one}, signal_transport: HTTP,
                 input_values: {PREV: {get_attr: [b, trail]}, STEP: c}}
outputs:
  trail: {value: {get_attr: [c, trail]}}
  servers: {value: [{get_resource: one}, {get_resource: two}]}
"""


def test_dependency_chain_across_two_servers(control_plane: ControlPlane) -> None:
    """Outputs flow a -> b -> c across two servers, each step running where it was told."""
    cp = control_plane
    cp.create_stack("chain", CHAIN)
    out = cp.outputs("chain")
    one, two = out["servers"]
    assert f"start>a@{one}>b@{two}>c@{one}" == out["trail"]
    assert 202 == cp.api("PUT", "/v1/stacks/chain", {"template": CHAIN}).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("chain")["status"]
    generations = [d["generation"] for d in cp.api("GET", "/v1/deployments?stack=chain").body]
    assert [1, 1, 1] == generations  # nothing changed, nothing re-ran


FAILING = """
heat_template_version: 2018-08-31
resources:
  srv: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo "starting the thing"
        echo "the thing broke" >&2
        exit 3
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
  after:
    type: OS::Heat::SoftwareDeployment
    depends_on: dep
    properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
"""


def test_failing_deployment_fails_the_stack_with_its_output(control_plane: ControlPlane) -> None:
    """A non-zero exit fails the deployment and the stack; failures show the output's tail."""
    cp = control_plane
    cp.create("bad", FAILING)
    stack = cp.wait_stack("bad")
    assert "CREATE_FAILED" == stack["status"]
    assert "non-zero status code: 3" in stack["status_reason"]
    (failure,) = cp.api("GET", "/v1/stacks/bad/failures").body
    assert ("dep", 3) == (failure["resource"], failure["deploy_status_code"])
    assert "starting the thing" in failure["deploy_stdout"]
    assert "the thing broke" in failure["deploy_stderr"]
    names = [d["resource_name"] for d in cp.api("GET", "/v1/deployments?stack=bad").body]
    assert ["dep"] == names  # `after` never started
    cli = cp.cli("stack", "failures", "bad")
    assert 0 == cli.returncode and "the thing broke" in cli.stdout


ERROR_OUTPUT = """
heat_template_version: 2018-08-31
resources:
  srv: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: problem, error_output: true}]
      config: |
        #!/bin/sh
        printf 'disk is full' > "$heat_outputs_path.problem"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
"""


def test_error_output_fails_the_deployment(control_plane: ControlPlane) -> None:
    """A set error_output fails the deployment with `name : value` as the reason."""
    cp = control_plane
    cp.create("errout", ERROR_OUTPUT)
    stack = cp.wait_stack("errout")
    assert "CREATE_FAILED" == stack["status"]
    assert "problem : disk is full" in stack["status_reason"]


def no_signal(server_name: str | None = None) -> str:
    """A NO_SIGNAL deployment that touches the file named by the stack's `mark`."""
    return one_script_deployment(
        '#!/bin/sh\ntouch "$MARK"\n',
        version="2018-08-31",
        params={"mark": "string"},
        inputs={"MARK": "{get_param: mark}"},
        box="srv",
        server_name=server_name,
        signal_transport="NO_SIGNAL",
    )


def test_no_signal_deployment_completes_at_once_and_still_runs(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """NO_SIGNAL: the stack does not wait, and the agent still runs the config."""
    cp = control_plane
    mark = tmp_path / "ran"
    cp.create("nosig", no_signal(), params={"mark": str(mark)})
    assert "CREATE_COMPLETE" == cp.wait_stack("nosig")["status"]
    wait_file(mark, 30)


SLOW = """
heat_template_version: 2018-08-31
parameters:
  dir: {type: string}
resources:
  srv: {type: OS::Heat::DeployedServer, properties: {name: slowbox}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DIR}, {name: STEP}]
      config: |
        #!/bin/sh
        echo "$STEP" >> "$DIR/runs"
        touch "$DIR/started-$STEP"
        sleep 3
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {name: "10-first", config: {get_resource: cfg}, server: {get_resource: srv},
                 input_values: {DIR: {get_param: dir}, STEP: first}}
  other: {type: OS::Heat::DeployedServer, properties: {name: otherbox}}
  middle:
    type: OS::Heat::SoftwareDeployment
    depends_on: first
    properties: {name: "15-middle", config: {get_resource: cfg}, server: {get_resource: other},
                 input_values: {DIR: {get_param: dir}, STEP: middle}}
  second:
    type: OS::Heat::SoftwareDeployment
    depends_on: middle
    properties: {name: "20-second", config: {get_resource: cfg}, server: {get_resource: srv},
                 input_values: {DIR: {get_param: dir}, STEP: second}}
"""


def _agent_pid(cp: ControlPlane, name: str) -> int:
    pid_file = cp.agent_dir(name) / "agent.pid"
    wait_file(pid_file, 30)
    return int(pid_file.read_text())


def test_agent_killed_mid_hook_reports_interrupted_never_reruns(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """kill -9 of the agent during a hook: the deployment FAILS as interrupted; it never runs twice."""
    cp = control_plane
    cp.create("killed", SLOW, params={"dir": str(tmp_path)})
    wait_file(tmp_path / "started-first")
    os.kill(_agent_pid(cp, "slowbox"), signal.SIGKILL)  # the provisioner restarts it
    stack = cp.wait_stack("killed")
    assert "CREATE_FAILED" == stack["status"]
    (failure,) = cp.api("GET", "/v1/stacks/killed/failures").body
    assert "interrupted by agent restart" in failure["deploy_stderr"]
    time.sleep(1)
    assert ["first"] == (tmp_path / "runs").read_text().split()
    assert not (tmp_path / "started-middle").exists()


def test_agent_restarted_between_deployments_converges_without_reruns(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """An agent stopped after its first deployment and started again finishes the stack, once each."""
    cp = control_plane
    cp.create("restarted", SLOW, params={"dir": str(tmp_path)})
    wait_file(tmp_path / "started-middle")  # slowbox is idle now: `first` is done
    pid = _agent_pid(cp, "slowbox")
    os.kill(pid, signal.SIGTERM)
    assert "CREATE_COMPLETE" == cp.wait_stack("restarted")["status"]
    assert ["first", "middle", "second"] == sorted((tmp_path / "runs").read_text().split())
    assert _agent_pid(cp, "slowbox") != pid


def test_document_is_heat_shaped_with_etag_and_long_poll(control_plane: ControlPlane) -> None:
    """An agent credential reads its document; If-None-Match gives 304; long-poll waits for a change."""
    cp = control_plane
    server = cp.api("POST", "/v1/servers", {"name": "manual"}).body
    from agent.keys import ensure_keys

    keys = ensure_keys(Path(cp.data_dir.parent / "manual-keys"))
    enrolled = cp.api(
        "POST", "/v1/agent/enrol", {"token": server["enrol_token"], "public_keys": keys}, token=None
    )
    assert 201 == enrolled.status
    cred = enrolled.body["credential"]
    assert (
        401
        == cp.api(
            "POST", "/v1/agent/enrol", {"token": server["enrol_token"], "public_keys": keys}, token=None
        ).status
    )
    doc = cp.api("GET", "/v1/agent/document", token=cred)
    assert 200 == doc.status and [] == doc.body["deployments"]
    etag = doc.headers["ETag"]
    assert 304 == cp.api("GET", "/v1/agent/document", token=cred, headers={"If-None-Match": etag}).status
    start = time.monotonic()
    assert (
        304 == cp.api("GET", "/v1/agent/document?wait=1", token=cred, headers={"If-None-Match": etag}).status
    )
    assert time.monotonic() - start >= 0.9  # it held the request (a bound, not a timing assertion)
    cp.create("manual", no_signal("manual"), params={"mark": "/dev/null"})
    changed = cp.api("GET", "/v1/agent/document?wait=20", token=cred, headers={"If-None-Match": etag})
    assert 200 == changed.status
    (item,) = changed.body["deployments"]
    assert {"id", "name", "group", "creation_time", "config", "inputs", "outputs", "options"} == set(item)
    names = [i["name"] for i in item["inputs"]]
    for derived in (
        "deploy_server_id",
        "deploy_action",
        "deploy_stack_id",
        "deploy_resource_name",
        "deploy_signal_transport",
    ):
        assert derived in names
    meta = changed.body["anneal"]
    assert meta["serial"] > int(etag.strip('"'))
    assert meta["deployments"][item["id"]]["hash"].startswith("hmac-sha256:")
    assert 401 == cp.api("GET", "/v1/agent/document", token=cp.token).status
    assert json.loads(json.dumps(changed.body))  # plain JSON all the way


def test_new_token_re_enrols_a_server_and_revokes_the_old_credential(control_plane: ControlPlane) -> None:
    """`server token` lets a rebuilt server enrol again; its old credential stops working."""
    cp = control_plane
    from agent.keys import ensure_keys

    cp.api("POST", "/v1/servers", {"name": "rebuilt"})
    token = cp.api("POST", "/v1/servers/rebuilt/token").body["enrol_token"]
    keys = ensure_keys(cp.data_dir.parent / "rebuilt-keys")
    first = cp.api("POST", "/v1/agent/enrol", {"token": token, "public_keys": keys}, token=None).body
    assert 200 == cp.api("GET", "/v1/agent/document", token=first["credential"]).status
    again = cp.api("POST", "/v1/servers/rebuilt/token").body["enrol_token"]
    second = cp.api("POST", "/v1/agent/enrol", {"token": again, "public_keys": keys}, token=None).body
    assert first["server_id"] == second["server_id"]
    assert 401 == cp.api("GET", "/v1/agent/document", token=first["credential"]).status
    assert 200 == cp.api("GET", "/v1/agent/document", token=second["credential"]).status
    assert 404 == cp.api("POST", "/v1/servers/ghost/token").status


UNKNOWN_SERVER = one_script_deployment(
    "#!/bin/sh\n", version="2018-08-31", params={"server": "string"}, server="{get_param: server}"
)


def test_deployment_to_an_unknown_server_fails_with_the_reason(control_plane: ControlPlane) -> None:
    """A server id or name that does not exist fails the deployment, naming the server and the property."""
    cp = control_plane
    cp.create("ghost", UNKNOWN_SERVER, params={"server": "nosuch"})
    stack = cp.wait_stack("ghost")
    assert "CREATE_FAILED" == stack["status"]
    assert "resources.dep.properties.server: server 'nosuch' not found" in stack["status_reason"]
    resources = cp.api("GET", "/v1/stacks/ghost/resources").body
    assert [("cfg", "CREATE_COMPLETE"), ("dep", "CREATE_FAILED")] == sorted(
        (r["name"], r["status"]) for r in resources
    )
