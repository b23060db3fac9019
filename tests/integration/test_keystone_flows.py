"""The openstack CLI's other flows with password auth through a real Keystone, exactly as against Heat.

test_keystone.py covers create, list, show, outputs, delete and the token rules; this module runs, as alice
(member of blue, logged in with her password, the endpoint found in her token's catalogue): stack update
--existing, event and resource lists, resource signal, failures list --long, suspend/resume/check, and software
configs and deployments. The run's Keystone (shared with test_keystone.py) and one control plane for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.keystone import Cloud, KeystoneShare, keystone_cloud
from tests.support.openstack import GREETER, OpenStack, write_template
from tests.support.waiting import wait_until

FAILING = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: ksf-broken}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\\necho 'keystone run'\\necho 'no such disk' >&2\\nexit 3\\n"}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: box}}
"""
ECHO = """#!/bin/sh
printf 'got %s' "$WORD" > "$heat_outputs_path.said"
"""


@pytest.fixture(scope="module")
def cloud(keystone_share: KeystoneShare, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    """The run's Keystone and one control plane of the module: alice is a member of blue."""
    with keystone_cloud(keystone_share, tmp_path_factory, [("alice", "blue", "member")], cache=30.0) as found:
        yield found


@pytest.fixture(scope="module")
def osc(cloud: Cloud) -> OpenStack:
    """The real openstack CLI logged in to Keystone as alice in blue."""
    return cloud.cli("alice", "blue")


@pytest.fixture(scope="module")
def greeter(osc: OpenStack, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The stack `ksf` (GREETER on server ksf-box), made by alice with `stack create --wait`; its name."""
    path = write_template(tmp_path_factory.mktemp("greeter"), "greeter.yaml", GREETER % {"server": "ksf-box"})
    assert "CREATE_COMPLETE" in osc.ok(
        "stack", "create", "-t", path, "--parameter", "who=first", "--wait", "ksf"
    )
    return "ksf"


def test_update_existing_events_resources_and_actions_with_password_auth(
    osc: OpenStack, greeter: str
) -> None:
    """`stack update --existing` keeps the template and the other parameters; `event list --nested-depth 2` and
    `resource list` show the update; `suspend/resume/check --wait` end SUSPEND, RESUME and CHECK_COMPLETE."""
    assert "UPDATE_COMPLETE" in osc.ok(
        "stack", "update", "--existing", "--parameter", "who=second", "--wait", greeter
    )
    assert osc.json("stack", "output", "show", greeter, "greeting")["output_value"] == "hello second"
    events = osc.ok("stack", "event", "list", "--nested-depth", "2", greeter)
    assert f"[{greeter}.dep]: UPDATE_COMPLETE" in events and f"[{greeter}]: UPDATE_COMPLETE" in events
    resources = {
        r["resource_name"]: r["resource_status"] for r in osc.json("stack", "resource", "list", greeter)
    }
    assert resources == {"box": "CREATE_COMPLETE", "cfg": "CREATE_COMPLETE", "dep": "UPDATE_COMPLETE"}
    for action, state in (
        ("suspend", "SUSPEND_COMPLETE"),
        ("resume", "RESUME_COMPLETE"),
        ("check", "CHECK_COMPLETE"),
    ):
        out = osc.ok("stack", action, "--wait", greeter, "-f", "json")
        rows = json.loads(out[out.index("[\n") :])  # after the events the wait printed
        assert [r["Stack Status"] for r in rows] == [state], action
        if action == "suspend":
            assert f"[{greeter}.dep]: SUSPEND_COMPLETE" in out


def test_resource_signal_and_failures_list_with_password_auth(osc: OpenStack, tmp_path: Path) -> None:
    """`stack resource signal` completes a deployment still running with the given outputs; a failed create's
    `stack failures list --long` names the deployment with its stdout and stderr."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "ksf-slow"})
    osc.ok("stack", "create", "-t", path, "--parameter", "pause=60", "ksf-slow")
    wait_until(
        lambda: (
            osc.under("ksf-slow", "/resources/dep")["resource"]["resource_status"] == "CREATE_IN_PROGRESS"
        ),
        "dep never started",
        60,
        interval=0.5,
    )
    data = json.dumps({"greeting": "signalled", "deploy_stdout": "by hand", "deploy_status_code": 0})
    osc.ok("stack", "resource", "signal", "ksf-slow", "dep", "--data", data)
    wait_until(
        lambda: osc.get("/stacks/ksf-slow")["stack"]["stack_status"] == "CREATE_COMPLETE",
        "the signal did not settle it",
        60,
        interval=0.5,
    )
    assert osc.json("stack", "show", "ksf-slow")["stack_status"] == "CREATE_COMPLETE"
    # The wait saw dep CREATE_IN_PROGRESS over HTTP and the signal went at once (its script sleeps 60 s);
    # the CLI shows what the signal did.
    assert osc.json("stack", "resource", "show", "ksf-slow", "dep")["resource_status"] == "CREATE_COMPLETE"
    assert osc.json("stack", "output", "show", "ksf-slow", "greeting")["output_value"] == "signalled"
    failed = osc.run(
        "stack", "create", "-t", write_template(tmp_path, "failing.yaml", FAILING), "--wait", "ksf-bad"
    )
    assert failed.returncode != 0
    report = osc.ok("stack", "failures", "list", "--long", "ksf-bad")
    assert "ksf-bad.dep:" in report and "status: CREATE_FAILED" in report
    assert "keystone run" in report and "no such disk" in report


def test_software_config_and_deployment_with_password_auth(
    osc: OpenStack, greeter: str, tmp_path: Path
) -> None:
    """`software config create/show/list/delete` and `software deployment create/show/list/delete` on the
    stack's server: the deployment runs on its agent and its outputs come back."""
    script = write_template(tmp_path, "echo.sh", ECHO)
    definition = write_template(tmp_path, "echo.yaml", "inputs: [{name: WORD}]\noutputs: [{name: said}]\n")
    config: dict[str, Any] = osc.json(
        "software", "config", "create", "--group", "script", "--config-file", script,
        "--definition-file", definition, "echoer",
    )  # fmt: skip
    assert osc.ok("software", "config", "show", config["id"], "--config-only").strip() == ECHO.strip()
    made = osc.json(
        "software", "deployment", "create", "--config", config["id"], "--server", "ksf-box",
        "--signal-transport", "NO_SIGNAL", "--input-value", "WORD=keystone", "echo-once",
    )  # fmt: skip
    wait_until(
        lambda: (
            osc.get(f"/software_deployments/{made['id']}")["software_deployment"]["status"] != "IN_PROGRESS"
        ),
        "the deployment never finished",
        60,
        interval=0.5,
    )
    done = osc.json("software", "deployment", "show", made["id"], "--long")
    assert done["status"] == "COMPLETE" and done["output_values"]["said"] == "got keystone", done
    assert made["id"] in [
        d["id"] for d in osc.json("software", "deployment", "list", "--server", made["server_id"])
    ]
    osc.ok("software", "deployment", "delete", made["id"])
    assert osc.run("software", "deployment", "show", made["id"]).returncode != 0
    osc.ok("software", "config", "delete", config["id"])
    assert config["id"] not in [c["id"] for c in osc.json("software", "config", "list")]
