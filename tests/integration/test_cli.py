"""The operator CLI: the installed `anneal` command against a real control plane and real agents."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from control.cli import build_parser
from control.cli.commands import COMMANDS
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN, free_port
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

SECRET = "s3cret-Pa55"
PROGRESS = re.compile(r"^\d\d:\d\d:\d\d\s+(\S+)\s+([A-Z]+_[A-Z_]+)")

WEB = """
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string}
  who: {type: string}
  colour: {type: string, default: red}
  password: {type: string, hidden: true}
resources:
  net: {type: OS::Neutron::Net, properties: {name: private}}
  box: {type: OS::Heat::DeployedServer, properties: {name: cli-box}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: GREETING}, {name: WHO}, {name: COLOUR}, {name: PASSWORD}]
      outputs: [{name: result}]
      config: {get_file: scripts/x.sh}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      input_values:
        GREETING: {get_param: greeting}
        WHO: {get_param: who}
        COLOUR: {get_param: colour}
        PASSWORD: {get_param: password}
outputs:
  result: {value: {get_attr: [dep, result]}, description: what the script made}
"""

X_SH = """#!/bin/sh
echo "x.sh ran; password is $PASSWORD"
printf '%s, %s! (%s)' "$GREETING" "$WHO" "$COLOUR" > "$heat_outputs_path.result"
"""

ENV = """
parameters:
  greeting: Hello
parameter_defaults:
  colour: blue
  who: nobody
resource_registry:
  OS::Neutron::Net: OS::Heat::None
"""

BROKEN = """
heat_template_version: 2018-08-31
resources:
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
    properties: {config: {get_resource: cfg}, server: cli-box}
"""

WHERE = one_script_deployment(
    """
    #!/bin/sh
    sleep "$PAUSE"
    printf '%s' "$deploy_server_id" > "$heat_outputs_path.where"
    """,
    version="2018-08-31",
    params={"server_id": "string", "pause": "number, default: 0"},
    inputs={"PAUSE": "{get_param: pause}"},
    outputs=["where"],
    server="{get_param: server_id}",
    actions="CREATE, UPDATE, DELETE",
)

SERVED = """
heat_template_version: 2018-08-31
resources:
  srv: {type: SERVER_TYPE, properties: SERVER_PROPS}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: where}]
      config: |
        #!/bin/sh
        printf '%s' "$deploy_server_id" > "$heat_outputs_path.where"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: srv}}
outputs:
  where: {value: {get_attr: [dep, where]}}
"""

VALUES = """
heat_template_version: 2018-08-31
parameters:
  a: {type: string}
  b: {type: string, default: b0}
resources:
  v: {type: OS::Heat::Value, properties: {value: {list_join: ["-", [{get_param: a}, {get_param: b}]]}}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: JOINED}]
      outputs: [{name: joined}]
      config: |
        #!/bin/sh
        printf '%s' "$JOINED" > "$heat_outputs_path.joined"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: cli-box, input_values: {JOINED: {get_attr: [v, value]}}}
outputs:
  joined: {value: {get_attr: [dep, joined]}}
"""

ONLY_VALUES = """
heat_template_version: 2018-08-31
resources:
  v: {type: OS::Heat::Value, properties: {value: 1}}
"""


def served(server_type: str, props: str) -> str:
    return SERVED.replace("SERVER_TYPE", server_type).replace("SERVER_PROPS", props)


# ------------------------------------------------------------------ helpers and fixtures


def run_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "anneal"), *args], env=env, text=True, capture_output=True, timeout=timeout, check=False
    )


def agent(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the installed `anneal-agent` command."""
    return subprocess.run(
        [str(BIN / "anneal-agent"), *args], text=True, capture_output=True, timeout=timeout, check=False
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert 0 == result.returncode, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def as_json(cp: ControlPlane, *args: str) -> Any:
    return json.loads(ok(cp.cli(*args, "-f", "json")))


def progress(stdout: str) -> list[tuple[str, str]]:
    """(resource, ACTION_STATUS) of every live progress line `--wait` and `--follow` print."""
    return [(m.group(1), m.group(2)) for m in map(PROGRESS.match, stdout.splitlines()) if m]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane whose servers get local agents, shared by this module's tests."""
    plane = start_control_plane(tmp_path_factory.mktemp("cli"))
    yield plane
    stop_control_plane(plane)


@pytest.fixture(scope="module")
def enrol_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane that waits for agents to enrol (the default provisioner)."""
    plane = start_control_plane(tmp_path_factory.mktemp("cli-enrol"), "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Template files as an operator keeps them: scripts beside the template."""
    root = tmp_path_factory.mktemp("project")
    write(root / "web" / "web.yaml", WEB)
    write(root / "web" / "scripts" / "x.sh", X_SH)
    write(root / "env" / "web-env.yaml", ENV)
    write(root / "broken.yaml", BROKEN)
    write(root / "where.yaml", WHERE)
    write(root / "values.yaml", VALUES)
    write(root / "only-values.yaml", ONLY_VALUES)
    return root


@dataclass(frozen=True)
class Web:
    """The stack `web`, created once through the CLI, and the ids the read-only tests look for."""

    created: subprocess.CompletedProcess[str]
    stack_id: str
    dep_id: str
    server_id: str


@pytest.fixture(scope="module")
def web(cp: ControlPlane, project: Path) -> Web:
    created = cp.cli(
        "stack",
        "create",
        "web",
        "-t",
        str(project / "web" / "web.yaml"),
        "-e",
        str(project / "env" / "web-env.yaml"),
        "-P",
        "who=world",
        "-P",
        f"password={SECRET}",
        "--wait",
        "--timeout",
        "90",
    )
    stack = cp.api("GET", "/v1/stacks/web").body
    assert stack["status"] == "CREATE_COMPLETE", (created.stdout, created.stderr)
    (dep,) = cp.api("GET", "/v1/deployments?stack=web").body
    return Web(created, stack["id"], dep["id"], dep["server_id"])


@pytest.fixture(scope="module")
def broken(cp: ControlPlane, project: Path, web: Web) -> subprocess.CompletedProcess[str]:
    """The stack `broken`: its only deployment exits 4 on cli-box, created with --wait."""
    return cp.cli(
        "stack", "create", "broken", "-t", str(project / "broken.yaml"), "--wait", "--timeout", "90"
    )


# ------------------------------------------------------------------ create, get_file, environments


def test_create_wait_shows_live_progress_and_exits_0(web: Web) -> None:
    """`stack create --wait` prints each resource going CREATE_IN_PROGRESS then CREATE_COMPLETE."""
    out = ok(web.created)
    assert "stack web created (version 1)" in out
    lines = progress(out)
    assert ("dep", "CREATE_IN_PROGRESS") in lines
    assert lines.index(("dep", "CREATE_IN_PROGRESS")) < lines.index(("dep", "CREATE_COMPLETE"))
    for name in ("net", "box", "cfg", "web"):
        assert (name, "CREATE_COMPLETE") in lines
    assert "stack web: CREATE_COMPLETE" in out.splitlines()[-1]


def test_create_wait_with_failing_deployment_exits_non_zero_with_stderr_tail(broken):
    """A failing deployment makes `--wait` exit 1 and print the reason and the tail of its stderr."""
    assert 1 == broken.returncode, broken.stdout + broken.stderr
    assert ("dep", "CREATE_FAILED") in progress(broken.stdout)
    assert "stack broken: CREATE_FAILED" in broken.stdout
    assert "Deployment exited with non-zero status code: 4" in broken.stdout
    tail = broken.stdout.split("deploy_stderr (tail):", 1)[1]
    assert "boom: disk on fire" in tail
    assert "about to fail" in broken.stdout.split("deploy_stdout (tail):", 1)[1]


def test_get_file_is_sent_from_the_templates_directory(cp: ControlPlane, web: Web) -> None:
    """`{get_file: scripts/x.sh}` is read next to the template (not the cwd) and the script runs."""
    assert not (Path.cwd() / "scripts" / "x.sh").exists()
    shown = as_json(cp, "deployment", "show", web.dep_id)
    assert shown["deploy_stdout"].startswith("x.sh ran")
    assert cp.outputs("web")["result"] == "Hello, world! (blue)"


def test_environment_files_give_parameters_defaults_and_registry(cp: ControlPlane, web: Web) -> None:
    """-e files: parameters and parameter_defaults fill parameters (-P wins); Net is mapped to None."""
    params = as_json(cp, "stack", "show", "web")["parameters"]
    assert {"greeting": "Hello", "who": "world", "colour": "blue"} == {
        k: params[k] for k in ("greeting", "who", "colour")
    }
    resources = {r["name"]: r for r in as_json(cp, "stack", "resources", "web")}
    assert ("OS::Heat::None", "CREATE_COMPLETE") == (resources["net"]["type"], resources["net"]["status"])


def test_template_needing_the_registry_is_refused_without_the_environment(
    cp: ControlPlane, project: Path
) -> None:
    """Without the -e file, OS::Neutron::Net is refused: exit 1 and the message suggests the mapping."""
    result = cp.cli(
        "stack",
        "create",
        "no-env",
        "-t",
        str(project / "web" / "web.yaml"),
        "-P",
        "greeting=hi",
        "-P",
        "who=me",
        "-P",
        "password=x",
    )
    assert 1 == result.returncode
    assert "OS::Neutron::Net" in result.stderr and "resource_registry" in result.stderr
    assert "[HTTP 400]" in result.stderr


def test_hidden_parameter_is_masked_in_stack_show_and_deployment_show(cp: ControlPlane, web: Web) -> None:
    """A hidden parameter shows as ****** in `stack show` and in `deployment show` inputs and output."""
    for fmt in ("table", "json", "yaml", "value"):
        stack_out = ok(cp.cli("stack", "show", "web", "-f", fmt))
        dep_out = ok(cp.cli("deployment", "show", web.dep_id, "-f", fmt))
        assert SECRET not in stack_out and SECRET not in dep_out, fmt
    assert "******" == as_json(cp, "stack", "show", "web")["parameters"]["password"]
    shown = as_json(cp, "deployment", "show", web.dep_id)
    assert "******" == shown["input_values"]["PASSWORD"]
    assert "Hello" == shown["input_values"]["GREETING"]
    assert "password is ******" in shown["deploy_stdout"]


# ------------------------------------------------------------------ every read command, every format


@dataclass(frozen=True)
class Facts:
    stack_id: str
    dep_id: str
    server_id: str
    broken_dep_id: str


def _names(rows: list[dict[str, Any]], key: str = "name") -> set[str]:
    return {r[key] for r in rows}


def _check_stack_list(data: Any, f: Facts) -> None:
    (web,) = [s for s in data if s["name"] == "web"]
    assert ("CREATE_COMPLETE", 1, f.stack_id) == (web["status"], web["version"], web["id"])


def _check_stack_show(data: Any, f: Facts) -> None:
    assert ("web", "CREATE_COMPLETE", f.stack_id) == (data["name"], data["status"], data["id"])
    assert {"net", "box", "cfg", "dep"} == _names(data["resources"])
    assert {"result": "Hello, world! (blue)"} == {o["output_key"]: o["output_value"] for o in data["outputs"]}


def _check_stack_outputs(data: Any, f: Facts) -> None:
    assert [("result", "Hello, world! (blue)", "what the script made")] == [
        (o["output_key"], o["output_value"], o["description"]) for o in data
    ]


def _check_stack_events(data: Any, f: Facts) -> None:
    seen = [(e["resource_name"], e["action"], e["status"]) for e in data]
    assert ("dep", "CREATE", "IN_PROGRESS") in seen and ("dep", "CREATE", "COMPLETE") in seen
    assert ("web", "CREATE", "COMPLETE") == seen[-1]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", e["time"]) for e in data)


def _check_stack_resources(data: Any, f: Facts) -> None:
    rows = {r["name"]: r for r in data}
    assert {"net", "box", "cfg", "dep"} == set(rows)
    assert ("OS::Heat::SoftwareDeployment", "CREATE_COMPLETE", f.dep_id, True) == (
        rows["dep"]["type"],
        rows["dep"]["status"],
        rows["dep"]["physical_id"],
        rows["dep"]["current"],
    )
    assert f.server_id == rows["box"]["physical_id"]


def _check_stack_failures(data: Any, f: Facts) -> None:
    (failure,) = data
    assert ("dep", "CREATE_FAILED", 4, f.broken_dep_id) == (
        failure["resource"],
        failure["status"],
        failure["deploy_status_code"],
        failure["deployment_id"],
    )
    assert "boom: disk on fire" in failure["deploy_stderr"]


def _check_deployment_list(data: Any, f: Facts) -> None:
    rows = {d["id"]: d for d in data}
    assert {f.dep_id, f.broken_dep_id} <= set(rows)
    assert ("web-cfg", "cli-box", "COMPLETE") == (
        rows[f.dep_id]["name"],
        rows[f.dep_id]["server_name"],
        rows[f.dep_id]["status"],
    )
    assert "FAILED" == rows[f.broken_dep_id]["status"]


def _check_deployments_of_web(data: Any, f: Facts) -> None:
    assert [(f.dep_id, "web-cfg", "dep", "CREATE", "COMPLETE")] == [
        (d["id"], d["name"], d["resource_name"], d["action"], d["status"]) for d in data
    ]


def _check_deployments_on_cli_box(data: Any, f: Facts) -> None:
    assert {f.dep_id, f.broken_dep_id} <= {d["id"] for d in data}
    assert {"cli-box"} == {d["server_name"] for d in data}


def _check_failed_deployments(data: Any, f: Facts) -> None:
    assert f.broken_dep_id in {d["id"] for d in data}
    assert {"FAILED"} == {d["status"] for d in data}


def _check_deployment_show(data: Any, f: Facts) -> None:
    assert (f.dep_id, "web-cfg", "COMPLETE", "Outputs received", "cli-box", f.stack_id) == (
        data["id"],
        data["name"],
        data["status"],
        data["status_reason"],
        data["server_name"],
        data["stack_id"],
    )
    assert ("script", 0, {"result": "Hello, world! (blue)"}) == (
        data["group"],
        data["deploy_status_code"],
        data["output_values"],
    )
    assert {"GREETING": "Hello", "WHO": "world", "COLOUR": "blue", "deploy_action": "CREATE"}.items() <= (
        data["input_values"].items()
    )


def _check_server_list(data: Any, f: Facts) -> None:
    (box,) = [s for s in data if s["name"] == "cli-box"]
    assert (f.server_id, "ENROLLED", "alive") == (box["id"], box["status"], box["agent"])


def _check_server_show(data: Any, f: Facts) -> None:
    assert ("cli-box", f.server_id, "ENROLLED") == (data["name"], data["id"], data["status"])
    assert {f.dep_id, f.broken_dep_id} <= {d["id"] for d in data["deployments"]}


@dataclass(frozen=True)
class Read:
    argv: tuple[str, ...]
    check: Callable[[Any, Facts], None]  # on what json and yaml print, parsed
    value: str  # a regex (with {fact} fields) that one line printed by `-f value` matches in full
    table: tuple[str, ...]  # words the table holds


READS = {
    "stack-list": Read(
        ("stack", "list"),
        _check_stack_list,
        r"web CREATE_COMPLETE Stack CREATE completed successfully 1",
        ("name", "web", "CREATE_COMPLETE"),
    ),
    "stack-show": Read(
        ("stack", "show", "web"),
        _check_stack_show,
        r"{stack_id} web CREATE_COMPLETE CREATE Stack CREATE completed successfully 1 .*",
        ("status", "CREATE_COMPLETE", "parameters", "{stack_id}"),
    ),
    "stack-outputs": Read(
        ("stack", "outputs", "web"),
        _check_stack_outputs,
        r"result Hello, world! \(blue\)",
        ("output_key", "result", "Hello, world! (blue)"),
    ),
    "stack-events": Read(
        ("stack", "events", "web"),
        _check_stack_events,
        r"\d\d:\d\d:\d\d dep CREATE COMPLETE Outputs received",
        ("resource_name", "dep", "CREATE", "COMPLETE", "Outputs received"),
    ),
    "stack-resources": Read(
        ("stack", "resources", "web"),
        _check_stack_resources,
        r"dep OS::Heat::SoftwareDeployment CREATE_COMPLETE {dep_id} True",
        ("physical_id", "net", "OS::Heat::None", "{dep_id}"),
    ),
    "stack-failures": Read(
        ("stack", "failures", "broken"),
        _check_stack_failures,
        r"dep CREATE_FAILED Deployment exited with non-zero status code: 4 4",
        ("dep", "Deployment exited with non-zero status code: 4", "boom: disk on fire"),
    ),
    "deployment-list": Read(
        ("deployment", "list"),
        _check_deployment_list,
        r"{dep_id} web-cfg cli-box CREATE COMPLETE Outputs received",
        ("server_name", "{dep_id}", "{broken_dep_id}", "web-cfg"),
    ),
    "deployment-list-stack": Read(
        ("deployment", "list", "--stack", "web"),
        _check_deployments_of_web,
        r"{dep_id} web-cfg cli-box CREATE COMPLETE Outputs received",
        ("status_reason", "{dep_id}", "COMPLETE"),
    ),
    "deployment-list-server": Read(
        ("deployment", "list", "--server", "cli-box"),
        _check_deployments_on_cli_box,
        r"{broken_dep_id} broken-cfg cli-box CREATE FAILED .*",
        ("{dep_id}", "{broken_dep_id}", "cli-box"),
    ),
    "deployment-list-status": Read(
        ("deployment", "list", "--status", "FAILED"),
        _check_failed_deployments,
        r"{broken_dep_id} broken-cfg cli-box CREATE FAILED .*",
        ("{broken_dep_id}", "FAILED"),
    ),
    "deployment-show": Read(
        ("deployment", "show", "{dep_id}"),
        _check_deployment_show,
        r"{dep_id} web-cfg dep {server_id} cli-box CREATE COMPLETE Outputs received 1 .*",
        ("input_values", "deploy_stdout", "x.sh ran", "{dep_id}"),
    ),
    "server-list": Read(
        ("server", "list"),
        _check_server_list,
        r"cli-box {server_id} ENROLLED alive \d+",
        ("serial", "cli-box", "{server_id}", "ENROLLED"),
    ),
    "server-show": Read(
        ("server", "show", "cli-box"),
        _check_server_show,
        r"{server_id} cli-box ENROLLED alive \d+ .*",
        ("deployments", "cli-box", "ENROLLED"),
    ),
}


@pytest.fixture(scope="module")
def facts(cp: ControlPlane, web: Web, broken: subprocess.CompletedProcess[str]) -> Facts:
    (dep,) = cp.api("GET", "/v1/deployments?stack=broken").body
    return Facts(web.stack_id, web.dep_id, web.server_id, dep["id"])


@pytest.mark.parametrize("fmt", ["json", "yaml", "value", "table"])
@pytest.mark.parametrize("case", list(READS))
def test_read_command_in_each_format(cp: ControlPlane, facts: Facts, case: str, fmt: str) -> None:
    """Every list/show command prints the expected fields: json/yaml parse, value is bare, table names."""
    read = READS[case]
    fields = vars(facts)
    result = cp.cli(*(a.format(**fields) for a in read.argv), "-f", fmt)
    out = ok(result)
    if fmt in ("json", "yaml"):
        read.check(json.loads(out) if fmt == "json" else yaml.safe_load(out), facts)
    elif fmt == "value":
        pattern = re.compile(read.value.format(**fields))
        assert any(pattern.fullmatch(line) for line in out.splitlines()), out
        assert not out.lstrip().startswith(("{", "[", "+-", "- ")), out  # bare values, no structure
    else:
        for word in read.table:
            assert word.format(**fields) in out, (word, out)
        if case != "stack-failures":  # failures print each failure's tail, not a grid
            assert out.startswith("+-") and "| " in out, out


# ------------------------------------------------------------------ update, delete, follow


def test_stack_update_existing_and_if_match(cp: ControlPlane, project: Path, web: Web) -> None:
    """`update --existing` keeps earlier parameters; a wrong --if-match is refused with the 409 message."""
    template = str(project / "values.yaml")
    ok(
        cp.cli(
            "stack", "create", "upd", "-t", template, "-P", "a=1", "-P", "b=2", "--wait", "--timeout", "60"
        )
    )
    out = ok(
        cp.cli(
            "stack", "update", "upd", "-t", template, "--existing", "-P", "b=3", "--wait", "--timeout", "60"
        )
    )
    assert "stack upd update started (version 2)" in out
    assert ("dep", "UPDATE_COMPLETE") in progress(out) and ("upd", "UPDATE_COMPLETE") in progress(out)
    assert "1-3" == cp.outputs("upd")["joined"]

    refused = cp.cli("stack", "update", "upd", "-t", template, "--existing", "--if-match", "1")
    assert 1 == refused.returncode
    assert "stack upd is at version 2, not 1" in refused.stderr and "[HTTP 409]" in refused.stderr
    assert 2 == as_json(cp, "stack", "show", "upd")["version"]

    ok(
        cp.cli(
            "stack",
            "update",
            "upd",
            "-t",
            template,
            "--existing",
            "--if-match",
            "2",
            "-P",
            "b=4",
            "--wait",
            "--timeout",
            "60",
        )
    )
    assert "1-4" == cp.outputs("upd")["joined"]

    without = cp.cli("stack", "update", "upd", "-t", template, "-P", "b=5")
    assert 1 == without.returncode and "parameters.a" in without.stderr  # nothing kept without --existing


def test_stack_delete_wait_shows_delete_actions_and_removes_the_stack(
    cp: ControlPlane, project: Path, web: Web
) -> None:
    """`stack delete --wait` shows a deployment's DELETE action running, exits 0 and the stack is gone."""
    ok(
        cp.cli(
            "stack",
            "create",
            "gone",
            "-t",
            str(project / "where.yaml"),
            "-P",
            f"server_id={web.server_id}",
            "-P",
            "pause=1",
            "--wait",
            "--timeout",
            "60",
        )
    )
    out = ok(cp.cli("stack", "delete", "gone", "--wait", "--timeout", "60"))  # the DELETE action takes 1 s
    assert "stack gone delete started" in out
    assert ("dep", "DELETE_IN_PROGRESS") in progress(out)
    # the stack's last event, written as it went, is printed before the verdict
    assert progress(out)[-1] == ("gone", "DELETE_COMPLETE")
    assert out.rstrip().endswith("stack gone deleted")
    assert "gone" not in _names(as_json(cp, "stack", "list"))
    assert 404 == cp.api("GET", "/v1/stacks/gone").status


def test_stack_without_deployments_completes_promptly(cp: ControlPlane, project: Path) -> None:
    """A stack whose resources all complete at once (OS::Heat::Value) is CREATE_COMPLETE within seconds."""
    result = cp.cli(
        "stack", "create", "instant", "-t", str(project / "only-values.yaml"), "--wait", "--timeout", "10"
    )
    assert 0 == result.returncode, f"{result.stdout}{result.stderr}"
    assert "stack instant: CREATE_COMPLETE" in result.stdout  # within --wait's 10 s bound


def test_events_follow_prints_events_until_the_stack_settles(
    cp: ControlPlane, project: Path, web: Web
) -> None:
    """`stack events --follow` on a running stack prints its events and returns 0 once it completes."""
    ok(
        cp.cli(
            "stack",
            "create",
            "follow",
            "-t",
            str(project / "where.yaml"),
            "-P",
            f"server_id={web.server_id}",
            "-P",
            "pause=2",
        )
    )
    assert "CREATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/follow").body["status"]
    out = ok(cp.cli("stack", "events", "follow", "--follow", timeout=60))
    lines = progress(out)
    assert lines.index(("dep", "CREATE_IN_PROGRESS")) < lines.index(("dep", "CREATE_COMPLETE"))
    assert "stack follow: CREATE_COMPLETE" in out.splitlines()[-1]
    assert "CREATE_COMPLETE" == cp.api("GET", "/v1/stacks/follow").body["status"]


# ------------------------------------------------------------------ servers


def test_server_id_given_as_parameter_runs_there(cp: ControlPlane, project: Path, tmp_path: Path) -> None:
    """`server: {get_param: server_id}` with the id of an existing server deploys to that server."""
    host = write(tmp_path / "host.yaml", served("OS::Heat::DeployedServer", "{name: pbox}"))
    ok(cp.cli("stack", "create", "hostonly", "-t", str(host), "--wait", "--timeout", "60"))
    server = as_json(cp, "server", "show", "pbox")
    out = ok(
        cp.cli(
            "stack",
            "create",
            "byid",
            "-t",
            str(project / "where.yaml"),
            "-P",
            f"server_id={server['id']}",
            "--wait",
            "--timeout",
            "60",
        )
    )
    assert ("dep", "CREATE_COMPLETE") in progress(out)
    assert server["id"] == cp.outputs("byid")["where"]
    deps = as_json(cp, "deployment", "list", "--server", "pbox")
    assert ("byid-cfg", "COMPLETE") in [(d["name"], d["status"]) for d in deps]


def test_nova_server_is_accepted_with_a_warning_and_works_like_deployed_server(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """OS::Nova::Server with image/flavor: created with warnings in `stack show`, and its deployment runs."""
    template = write(
        tmp_path / "nova.yaml", served("OS::Nova::Server", "{name: nova-box, image: cirros, flavor: m1.tiny}")
    )
    ok(cp.cli("stack", "create", "nova", "-t", str(template), "--wait", "--timeout", "60"))
    stack = as_json(cp, "stack", "show", "nova")
    assert "CREATE_COMPLETE" == stack["status"]
    warnings = "\n".join(stack["warnings"])
    assert "resources.srv.properties.image" in warnings and "resources.srv.properties.flavor" in warnings
    assert "ignored" in warnings
    server = as_json(cp, "server", "show", "nova-box")
    assert "ENROLLED" == server["status"]
    assert server["id"] == cp.outputs("nova")["where"]
    table = ok(cp.cli("stack", "show", "nova"))
    assert "resources.srv.properties.image" in table


@pytest.mark.parametrize("fmt", ["json", "yaml", "value", "table"])
def test_server_create_prints_a_one_time_token_in_each_format(enrol_cp: ControlPlane, fmt: str) -> None:
    """`server create` prints the server and its one-time enrolment token in every format."""
    name = f"fmt-{fmt}"
    out = ok(enrol_cp.cli("server", "create", name, "-f", fmt))
    if fmt in ("json", "yaml"):
        data = json.loads(out) if fmt == "json" else yaml.safe_load(out)
        assert (name, "AWAITING_ENROLMENT") == (data["name"], data["status"])
        token = data["enrol_token"]
    elif fmt == "value":
        (token,) = out.split()
    else:
        assert f"server {name} (" in out and "awaits enrolment" in out
        found = re.search(r"one-time enrolment token: (\S+)", out)
        assert found is not None, out
        token = found.group(1)
    assert len(token) >= 20
    assert "AWAITING_ENROLMENT" == as_json(enrol_cp, "server", "show", name)["status"]


def test_enrolled_agent_runs_a_stacks_deployment_with_once(enrol_cp: ControlPlane, tmp_path: Path) -> None:
    """`server create` -> `anneal-agent enrol` -> a stack on that server -> `anneal-agent once` completes it."""
    cp = enrol_cp
    out = ok(cp.cli("server", "create", "edge"))
    found = re.search(r"one-time enrolment token: (\S+)", out)
    assert found is not None, out
    token = found.group(1)
    state = tmp_path / "edge-state"
    enrolled = agent("enrol", "--url", cp.url, f"--token={token}", "--state-dir", str(state))
    assert 0 == enrolled.returncode, enrolled.stderr
    assert "enrolled" in enrolled.stdout
    server = as_json(cp, "server", "show", "edge")
    assert "ENROLLED" == server["status"]

    template = write(tmp_path / "edge.yaml", served("OS::Heat::DeployedServer", "{name: edge}"))
    ok(cp.cli("stack", "create", "edge-stack", "-t", str(template)))
    wait_until(lambda: as_json(cp, "deployment", "list", "--server", "edge"), "no deployment on edge", 30)
    ran = agent("once", "--state-dir", str(state))
    assert 0 == ran.returncode, ran.stderr
    assert "CREATE_COMPLETE" == cp.wait_stack("edge-stack", timeout=30)["status"]
    assert server["id"] == cp.outputs("edge-stack")["where"]
    (dep,) = as_json(cp, "deployment", "list", "--server", "edge")
    assert "COMPLETE" == dep["status"]
    assert "ENROLLED" == as_json(cp, "server", "show", "edge")["status"]


def test_used_enrolment_token_is_refused(enrol_cp: ControlPlane, tmp_path: Path) -> None:
    """A token enrols once: a second `anneal-agent enrol` with it fails and names the token."""
    token = ok(enrol_cp.cli("server", "create", "once-only", "-f", "value")).strip()
    first = agent("enrol", "--url", enrol_cp.url, f"--token={token}", "--state-dir", str(tmp_path / "a"))
    assert 0 == first.returncode, first.stderr
    second = agent("enrol", "--url", enrol_cp.url, f"--token={token}", "--state-dir", str(tmp_path / "b"))
    assert 0 != second.returncode
    assert "token" in second.stderr


# ------------------------------------------------------------------ configuration


def _bare_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANNEAL_URL", "ANNEAL_TOKEN", "ANNEAL_CONFIG")}
    return {**env, **extra}


def test_missing_token_exits_1_naming_anneal_token(tmp_path: Path) -> None:
    """Without ANNEAL_TOKEN and without a config file the CLI exits 1 and says to set ANNEAL_TOKEN."""
    result = run_cli(
        "stack", "list", env=_bare_env(ANNEAL_CONFIG=str(tmp_path / "missing.json"), HOME=str(tmp_path))
    )
    assert 1 == result.returncode
    assert "ANNEAL_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_url_exits_1_cannot_reach(tmp_path: Path) -> None:
    """A URL nobody listens on: exit 1 with "cannot reach" and the URL."""
    url = f"http://127.0.0.1:{free_port()}"
    result = run_cli(
        "stack",
        "list",
        env=_bare_env(ANNEAL_URL=url, ANNEAL_TOKEN="t", ANNEAL_CONFIG=str(tmp_path / "missing.json")),
    )
    assert 1 == result.returncode
    assert "cannot reach" in result.stderr and url in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("how", ["ANNEAL_CONFIG", "--config"])
def test_config_file_gives_url_and_token(cp: ControlPlane, tmp_path: Path, how: str) -> None:
    """A JSON file {"url", "token"} (ANNEAL_CONFIG or --config) works without ANNEAL_URL/ANNEAL_TOKEN."""
    config = write(tmp_path / "cli.json", json.dumps({"url": cp.url, "token": cp.token}))
    if how == "ANNEAL_CONFIG":
        result = run_cli("stack", "list", "-f", "json", env=_bare_env(ANNEAL_CONFIG=str(config)))
    else:
        result = run_cli(
            "--config",
            str(config),
            "stack",
            "list",
            "-f",
            "json",
            env=_bare_env(ANNEAL_CONFIG=str(tmp_path / "missing.json")),
        )
    assert isinstance(json.loads(ok(result)), list)


def test_wrong_token_exits_1_with_the_401_message(cp: ControlPlane, tmp_path: Path) -> None:
    """A wrong admin token: exit 1 with the control plane's message and the status."""
    result = run_cli(
        "stack",
        "list",
        env=_bare_env(ANNEAL_URL=cp.url, ANNEAL_TOKEN="wrong", ANNEAL_CONFIG=str(tmp_path / "missing.json")),
    )
    assert 1 == result.returncode
    assert "admin token" in result.stderr and "[HTTP 401]" in result.stderr


def test_version_prints_the_installed_package_version(tmp_path: Path) -> None:
    """`anneal --version` prints the version pyproject.toml gives the installed package, and exits 0."""
    result = run_cli("--version", env=_bare_env(ANNEAL_CONFIG=str(tmp_path / "missing.json")))
    assert f"anneal {version('anneal')}\n" == ok(result)


def test_every_parser_command_has_a_handler_and_every_handler_a_command():
    """The command table and the parser name the same commands (`serve`, `db`, `template validate` run locally;
    a group with no subcommands, as `audit`, is its default command)."""
    parser = build_parser()
    groups = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    parsed = {
        (group, command)
        for group, sub in groups.items()
        if group != "db"
        for action in sub._actions
        if isinstance(action, argparse._SubParsersAction)
        for command in action.choices
    } | {(group, sub.get_default("command")) for group, sub in groups.items() if sub.get_default("command")}
    assert parsed - {("template", "validate")} == set(COMMANDS)
