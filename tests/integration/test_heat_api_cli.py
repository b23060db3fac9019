"""Heat's Orchestration API v1: the real openstack CLI (admin_token auth) drives stacks on Anneal unchanged."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.openstack import OpenStack, require_openstack
from tests.support.processes import free_port
from tests.support.waiting import wait_until

PROJECT = "ops-team"

GREETER = """
heat_template_version: 2018-08-31
description: one script on one server
parameters:
  who: {type: string, default: world}
  pause: {type: number, default: 0}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: %(server)s}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: PAUSE}]
      outputs: [{name: greeting}]
      config: |
        #!/bin/sh
        sleep "$PAUSE"
        echo "greeting $WHO"
        printf 'hello %%s' "$WHO" > "$heat_outputs_path.greeting"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, SUSPEND, RESUME]
      input_values: {WHO: {get_param: who}, PAUSE: {get_param: pause}}
outputs:
  greeting: {value: {get_attr: [dep, greeting]}, description: what the script said}
"""

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
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require_openstack()
    plane = start_control_plane(
        tmp_path_factory.mktemp("heat-api"), "--heat-listen", f"127.0.0.1:{free_port()}"
    )
    yield plane
    stop_control_plane(plane)


@pytest.fixture(scope="module")
def heat_url(cp: ControlPlane) -> str:
    """The Heat endpoint's root, read from the control plane's log line that announces it."""
    line = wait_until(
        lambda: next((x for x in cp.log.read_text().splitlines() if "Orchestration API v1 on" in x), None),
        "the Heat API was not announced",
    )
    return line.split(" on ", 1)[1].split("/v1/", 1)[0]


@pytest.fixture(scope="module")
def osc(cp: ControlPlane, heat_url: str) -> OpenStack:
    return OpenStack(cp, f"{heat_url}/v1/{PROJECT}")


def _template(work: Path, name: str, text: str) -> str:
    path = work / name
    path.write_text(text)
    return str(path)


def _show(osc: OpenStack, stack: str) -> dict[str, Any]:
    found = osc.json("stack", "show", stack)
    assert isinstance(found, dict)
    return found


def test_stack_create_wait_list_show_outputs_and_delete(osc: OpenStack, tmp_path: Path) -> None:
    """`stack create --wait` runs the script; list, show and `output show --all` read its result; delete removes it."""
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-one"})
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
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-two"})
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
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-cancel"})
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
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-three"})
    osc.ok("stack", "create", "-t", path, "--parameter", "pause=60", "three")
    wait_until(
        lambda: (
            osc.json("stack", "resource", "show", "three", "dep")["resource_status"] == "CREATE_IN_PROGRESS"
        ),
        "dep never started",
        60,
        interval=1,
    )
    data = json.dumps({"greeting": "by hand", "deploy_stdout": "signalled", "deploy_status_code": 0})
    osc.ok("stack", "resource", "signal", "three", "dep", "--data", data)
    stack = wait_until(
        lambda: (s := _show(osc, "three"))["stack_status"] != "CREATE_IN_PROGRESS" and s,
        "the signal did not settle the stack",
        60,
        interval=1,
    )
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert osc.json("stack", "output", "show", "three", "greeting")["output_value"] == "by hand"
    refused = osc.run("stack", "resource", "signal", "three", "box")
    assert refused.returncode != 0 and "only software deployments take signals" in refused.stderr


def test_failed_create_exits_nonzero_and_failures_list_names_the_resource(
    osc: OpenStack, tmp_path: Path
) -> None:
    """A failing script: `stack create --wait` exits 1 on CREATE_FAILED; `stack failures list --long` names dep
    and prints its deployment's stdout and stderr."""
    path = _template(tmp_path, "broken.yaml", BROKEN)
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
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-heat"})
    osc.ok(
        "stack", "create", "-t", path, "--parameter", "who=heat", "--wait", "--tags", "blue,green", "viaheat"
    )
    stack = cp.api("GET", "/v1/stacks/viaheat").body
    assert stack["status"] == "CREATE_COMPLETE" and stack["tags"] == ["blue", "green"]
    assert cp.outputs("viaheat")["greeting"] == "hello heat"
    tagged = osc.json("stack", "list", "--tags", "green")
    assert [s["Stack Name"] for s in tagged] == ["viaheat"]


def _http(
    cp: ControlPlane, heat_url: str, method: str, path: str, body: Any = None, token: str | None = "admin"
) -> tuple[int, Any]:
    """One request to the Heat endpoint of project PROJECT, as any HTTP client would send it."""
    secret = cp.token if token == "admin" else token
    headers = {"Content-Type": "application/json", **({"X-Auth-Token": secret} if secret else {})}
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{heat_url}/v1/{PROJECT}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def test_errors_carry_heats_error_body(cp: ControlPlane, heat_url: str) -> None:
    """A missing stack, a missing token and a bad body answer Heat's error body with an empty traceback."""
    status, body = _http(cp, heat_url, "GET", "/stacks/nope/0000")
    assert status == 404
    assert set(body) == {"code", "title", "explanation", "error"}
    assert body["code"] == 404 and body["title"] == "Not Found"
    assert body["error"]["type"] == "EntityNotFound" and body["error"]["traceback"] is None
    assert "nope" in body["error"]["message"]
    assert _http(cp, heat_url, "GET", "/stacks", token=None)[0] == 401
    assert _http(cp, heat_url, "GET", "/stacks", token="not-the-token")[0] == 401
    status, body = _http(
        cp, heat_url, "POST", "/stacks", {"stack_name": "x", "template_url": "http://example.invalid/t.yaml"}
    )
    assert status == 400 and "template_url is not supported" in body["error"]["message"]
    bad = {"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::Nope"}}}
    status, body = _http(cp, heat_url, "POST", "/stacks", {"stack_name": "x", "template": bad})
    assert (
        status == 400
        and body["error"]["type"] == "StackValidationFailed"
        and "resources.a" in body["error"]["message"]
    )
    status, body = _http(cp, heat_url, "GET", "/stacks?limit=ten")
    assert status == 400 and "limit" in body["error"]["message"]
    status, body = _http(cp, heat_url, "PATCH", "/stacks")
    assert status == 405 and body["title"] == "Method Not Allowed"
    status, body = _http(cp, heat_url, "GET", "/no/such/route")
    assert status == 404 and body["error"]["traceback"] is None
    status, body = _http(cp, heat_url, "DELETE", "/software_configs/no-such-config")
    assert status == 404 and "no-such-config" in body["error"]["message"]


def test_lists_page_sort_and_filter_as_heats_do(cp: ControlPlane, heat_url: str) -> None:
    """Stacks page by limit and marker in the sort asked for; events filter by status and name and page by marker."""
    for name in ("page-b", "page-a"):
        cp.create_stack(name, GREETER % {"server": f"cli-{name}"})
    status, body = _http(
        cp, heat_url, "GET", "/stacks?sort_keys=stack_name&sort_dir=asc&limit=1&name=page-a&name=page-b"
    )
    assert status == 200 and [s["stack_name"] for s in body["stacks"]] == ["page-a"]
    marker = body["stacks"][0]["id"]
    assert body["links"][0]["rel"] == "next" and f"marker={marker}" in body["links"][0]["href"]
    status, body = _http(
        cp,
        heat_url,
        "GET",
        f"/stacks?sort_keys=stack_name&sort_dir=asc&name=page-a&name=page-b&marker={marker}",
    )
    assert [s["stack_name"] for s in body["stacks"]] == ["page-b"]
    status, body = _http(cp, heat_url, "GET", "/stacks?status=CREATE_COMPLETE&name=page-a&with_count=true")
    assert body["count"] == 1
    stack = f"/stacks/page-a/{marker}"
    status, body = _http(cp, heat_url, "GET", f"{stack}/events?sort_dir=asc")
    everything = [e["id"] for e in body["events"]]
    assert len(everything) >= 5 and everything == sorted(everything, key=int)
    status, body = _http(cp, heat_url, "GET", f"{stack}/events?sort_dir=asc&limit=2&marker={everything[1]}")
    assert [e["id"] for e in body["events"]] == everything[2:4]
    status, body = _http(
        cp, heat_url, "GET", f"{stack}/events?resource_status=CREATE_COMPLETE&resource_name=dep"
    )
    assert [(e["resource_name"], e["resource_status"]) for e in body["events"]] == [
        ("dep", "CREATE_COMPLETE")
    ]
    status, body = _http(cp, heat_url, "GET", f"{stack}/resources?type=OS::Heat::SoftwareConfig")
    assert [r["resource_name"] for r in body["resources"]] == ["cfg"]
    status, body = _http(cp, heat_url, "GET", f"{stack}/resources?with_detail=true&name=dep")
    assert "deploy_stdout" in body["resources"][0]["attributes"]
    status, body = _http(cp, heat_url, "GET", f"{stack}/resources/dep/events")
    assert {e["resource_name"] for e in body["events"]} == {"dep"}
    status, body = _http(cp, heat_url, "GET", f"{stack}/resources/box/metadata")
    assert [d["name"] for d in body["metadata"]["deployments"]] == ["page-a-cfg"]
    status, body = _http(cp, heat_url, "GET", f"{stack}/template")
    assert body["description"] == "one script on one server"
    status, body = _http(cp, heat_url, "GET", f"{stack}/environment")
    assert set(body) >= {"parameters", "parameter_defaults", "resource_registry"}
    status, body = _http(cp, heat_url, "GET", f"{stack}/resources?colour=red")
    assert status == 400 and "colour" in body["error"]["message"]


def test_suspend_resume_and_check_through_stack_actions(osc: OpenStack, tmp_path: Path) -> None:
    """`stack suspend/resume/check --wait` end SUSPEND_COMPLETE, RESUME_COMPLETE, CHECK_COMPLETE; dep ran SUSPEND."""
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-four"})
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


SHOUT = """#!/bin/sh
echo "standalone says $GREETING"
printf '%s!' "$GREETING" > "$heat_outputs_path.shout"
"""


def test_software_config_and_deployment_outside_a_stack_run_on_the_servers_agent(
    osc: OpenStack, tmp_path: Path
) -> None:
    """`software config create`, then `software deployment create` on a stack's server: its agent runs it and
    `deployment output show` reads the outputs; list, show, metadata and delete behave as Heat's."""
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-sw"})
    osc.ok("stack", "create", "-t", path, "--wait", "host")
    script = _template(tmp_path, "shout.sh", SHOUT)
    definition = _template(tmp_path, "shout.yaml", "inputs: [{name: GREETING}]\noutputs: [{name: shout}]\n")
    config = osc.json(
        "software", "config", "create", "--group", "script", "--config-file", script,
        "--definition-file", definition, "shouter",
    )  # fmt: skip
    assert config["group"] == "script" and config["inputs"] == [{"name": "GREETING"}]
    assert osc.ok("software", "config", "show", config["id"], "--config-only").strip() == SHOUT.strip()
    assert config["id"] in [c["id"] for c in osc.json("software", "config", "list")]
    made = osc.json(
        "software", "deployment", "create", "--config", config["id"], "--server", "cli-sw",
        "--signal-transport", "NO_SIGNAL", "--input-value", "GREETING=hey", "shout-once",
    )  # fmt: skip
    assert made["status"] == "IN_PROGRESS" and made["action"] == "UPDATE"
    done = wait_until(
        lambda: (
            (d := osc.json("software", "deployment", "show", made["id"], "--long"))["status"] != "IN_PROGRESS"
            and d
        ),
        "the standalone deployment never finished",
        60,
        interval=1,
    )
    assert done["status"] == "COMPLETE", done
    assert "shout: hey!" in osc.ok("software", "deployment", "output", "show", made["id"], "shout")
    everything = osc.ok("software", "deployment", "output", "show", made["id"], "--all")
    assert "standalone says hey" in everything and "deploy_status_code: 0" in everything
    on_server = osc.json("software", "deployment", "list", "--server", made["server_id"])
    assert made["id"] in [d["id"] for d in on_server]
    metadata = json.loads(osc.ok("software", "deployment", "metadata", "show", made["server_id"]))
    assert "shout-once" in [item["name"] for item in metadata]
    in_use = osc.run("software", "config", "delete", made["config_id"])  # the config the client derived
    assert in_use.returncode != 0 and "Unable to delete 1 of the 1 software configs" in in_use.stderr
    osc.ok("software", "deployment", "delete", made["id"])
    assert made["id"] not in [d["id"] for d in osc.json("software", "deployment", "list")]
    metadata = json.loads(osc.ok("software", "deployment", "metadata", "show", made["server_id"]))
    assert "shout-once" not in [item["name"] for item in metadata]
    left = [c["id"] for c in osc.json("software", "config", "list")]
    assert made["config_id"] not in left  # the CLI deletes the config it derived, as against Heat
    osc.ok("software", "config", "delete", config["id"])
    assert config["id"] not in [c["id"] for c in osc.json("software", "config", "list")]


def test_update_dry_run_lists_what_would_change_and_changes_nothing(osc: OpenStack, tmp_path: Path) -> None:
    """`stack update --dry-run` sorts the resources into Heat's categories; the stack is left as it was."""
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-preview"})
    osc.ok("stack", "create", "-t", path, "--wait", "preview")
    before = _show(osc, "preview")
    changed = GREETER.replace('echo "greeting $WHO"', 'echo "hi $WHO"') % {"server": "cli-preview"}
    new = _template(
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


def test_template_catalogue_answers_what_heat_would(osc: OpenStack, tmp_path: Path) -> None:
    """Template validate, resource types, template versions and functions, build info through the openstack CLI."""
    path = _template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-never"})
    checked = json.loads(osc.ok("orchestration", "template", "validate", "-t", path, "-f", "json"))
    assert checked["Description"] == "one script on one server"
    assert (
        checked["Parameters"]["who"]["Type"] == "String"
        and checked["Parameters"]["who"]["Default"] == "world"
    )
    bad = _template(
        tmp_path, "bad.yaml", "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Nope}\n"
    )
    refused = osc.run("orchestration", "template", "validate", "-t", bad)
    assert refused.returncode != 0 and "resources.a" in refused.stderr
    types = [t["Resource Type"] for t in osc.json("orchestration", "resource", "type", "list")]
    assert "OS::Heat::SoftwareDeployment" in types and "OS::Heat::DeployedServer" in types
    schema = json.loads(
        osc.ok("orchestration", "resource", "type", "show", "OS::Heat::SoftwareConfig", "-f", "json")
    )
    assert schema["properties"]["group"]["default"] == "Heat::Ungrouped"
    versions = [v["Version"] for v in osc.json("orchestration", "template", "version", "list")]
    assert "heat_template_version.2018-08-31" in versions
    functions = osc.json("orchestration", "template", "function", "list", "heat_template_version.2013-05-23")
    names = [f["Functions"] for f in functions]
    assert "get_param" in names and "repeat" not in names  # repeat came with 2015-04-30
    info = osc.json("orchestration", "build", "info")
    assert "anneal" in json.dumps(info)
