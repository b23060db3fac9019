"""Structured deployments, deployment groups, RandomString and boot configs, with real agents.

Group members append `ACTION KEY start|end` lines to a log; batch order is read from
the order of those lines (one clock, one file), never from durations.
"""

from __future__ import annotations

import email
import itertools
import json
import sys
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import EXAMPLES
from tests.support.templates import script_group

# A hook in the Heat hook-dir style: prints the config it was given as an output.
ECHO_HOOK = f"""#!{sys.executable}
import json, sys
item = json.load(sys.stdin)
print(json.dumps({{"rendered": json.dumps(item["config"], sort_keys=True),
                  "deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}}))
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    tmp = tmp_path_factory.mktemp("types")
    hooks = tmp / "hooks"
    hooks.mkdir()
    (hooks / "echo").write_text(ECHO_HOOK)
    (hooks / "echo").chmod(0o755)
    plane = start_control_plane(tmp, f"--agent-arg=--hook-dir={hooks}")
    yield plane
    stop_control_plane(plane)


STRUCTURED = """
heat_template_version: 2018-08-31
parameters:
  port: {type: number, default: 8080}
  validate: {type: string, default: LAX}
resources:
  srv: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::StructuredConfig
    properties:
      group: echo
      inputs: [{name: port, type: Number}, {name: hosts, type: Json}]
      outputs: [{name: rendered}]
      config:
        listen: {get_input: port}
        upstreams: {get_input: hosts}
        nested: [{who: {get_input: deploy_server_id}}, {action: {get_input: deploy_action}}]
        missing: {get_input: nowhere}
        literal: {other_key: port}
  dep:
    type: OS::Heat::StructuredDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: srv}
      input_values_validate: {get_param: validate}
      input_values: {port: {get_param: port}, hosts: [a, b]}
  keyed:
    type: OS::Heat::StructuredDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: srv}
      input_key: other_key
      input_values: {port: 1}
outputs:
  rendered: {value: {get_attr: [dep, rendered]}}
  keyed: {value: {get_attr: [keyed, rendered]}}
  server: {value: {get_resource: srv}}
"""


def test_structured_deployment_substitutes_inputs(cp: ControlPlane) -> None:
    """get_input nodes become input values (deploy_* too); LAX leaves unknown names null."""
    cp.create_stack("structured", STRUCTURED)
    out = cp.outputs("structured")
    assert {
        "listen": 8080,
        "upstreams": ["a", "b"],
        "nested": [{"who": out["server"]}, {"action": "CREATE"}],
        "missing": None,
        "literal": {"other_key": "port"},
    } == json.loads(out["rendered"])
    keyed = json.loads(out["keyed"])
    assert (1, {"get_input": "port"}) == (keyed["literal"], keyed["listen"])


def test_structured_strict_fails_naming_the_missing_input(cp: ControlPlane) -> None:
    """STRICT: a get_input of an unknown name fails the deployment, naming the path and name."""
    assert 201 == cp.create("strict", STRUCTURED, params={"validate": "STRICT"}).status
    stack = cp.wait_stack("strict")
    assert "CREATE_FAILED" == stack["status"]
    assert "resources.dep.properties.config.missing" in stack["status_reason"]
    assert "'nowhere' is not an input" in stack["status_reason"]


def test_structured_input_values_validate_is_checked(cp: ControlPlane) -> None:
    """input_values_validate other than LAX/STRICT is refused when the stack is created."""
    bad = STRUCTURED.replace("input_values_validate: {get_param: validate}", "input_values_validate: LOOSE")
    resp = cp.create("loose", bad)
    assert 400 == resp.status
    assert "resources.dep.properties.input_values_validate" == resp.body["error"]["where"]


GROUP = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  version: {type: string, default: "1"}
  names: {type: comma_delimited_list, default: "a,b,c"}
resources:
  sa: {type: OS::Heat::DeployedServer}
  sb: {type: OS::Heat::DeployedServer}
  sc: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: LOG}, {name: VERSION}]
      outputs: [{name: result}]
      config: |
        #!/bin/sh
        echo "$deploy_action $deploy_resource_name start" >> "$LOG"
        sleep 1
        echo "$deploy_action $deploy_resource_name end" >> "$LOG"
        printf '%s-%s' "$deploy_resource_name" "$VERSION" > "$heat_outputs_path.result"
        echo "out $deploy_resource_name"
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    update_policy:
      batch_create: {max_batch_size: 1}
      rolling_update: {max_batch_size: 2, pause_time: 1}
    properties:
      config: {get_resource: cfg}
      actions: [CREATE, UPDATE, DELETE]
      servers:
        map_merge:
          - {a: {get_resource: sa}, b: {get_resource: sb}, c: {get_resource: sc}}
      input_values: {LOG: {get_param: log}, VERSION: {get_param: version}}
  after:
    type: OS::Heat::Value
    properties:
      value: {get_attr: [group, result]}
outputs:
  results: {value: {get_attr: [group, result]}}
  stdouts: {value: {get_attr: [group, deploy_stdouts]}}
  codes: {value: {get_attr: [group, deploy_status_codes]}}
  after: {value: {get_attr: [after, value]}}
"""


def batches(lines: list[str], action: str) -> list[set[str]]:
    """Members of *action* grouped by overlap: a new batch starts when none is running."""
    out: list[set[str]] = []
    running: set[str] = set()
    for line in lines:
        act, key, edge = line.split()
        if act != action:
            continue
        if edge == "start":
            if not running:
                out.append(set())
            out[-1].add(key)
            running.add(key)
        else:
            running.discard(key)
    return out


def test_group_creates_in_batches_and_rolls_updates(cp: ControlPlane, tmp_path: Path) -> None:
    """batch_create 1: a, b, c one by one; rolling_update 2: {a, b} then {c}; attributes aggregate."""
    log = tmp_path / "runs.log"
    cp.create_stack("grp", GROUP, params={"log": str(log)}, timeout=180)
    lines = log.read_text().splitlines()
    assert [{"a"}, {"b"}, {"c"}] == batches(lines, "CREATE")
    assert ["a", "b", "c"] == [ln.split()[1] for ln in lines if ln.endswith("start")]
    out = cp.outputs("grp")
    assert {"a": "a-1", "b": "b-1", "c": "c-1"} == out["results"] == out["after"]
    assert {"a": 0, "b": 0, "c": 0} == out["codes"]
    assert "out b" == out["stdouts"]["b"].strip()
    assert 3 == len(cp.api("GET", "/v1/deployments?stack=grp").body)

    body = {"template": GROUP, "parameters": {"log": str(log), "version": "2"}}
    assert 202 == cp.api("PUT", "/v1/stacks/grp", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("grp", timeout=180)["status"]
    lines = log.read_text().splitlines()
    update = batches(lines, "UPDATE")
    assert [{"a", "b"}, {"c"}] == update
    assert {"a": "a-2", "b": "b-2", "c": "c-2"} == cp.outputs("grp")["after"]

    # Dropping c from the map: c runs DELETE and goes; a and b, unchanged, do not run.
    body["template"] = GROUP.replace(", c: {get_resource: sc}}", "}")
    assert 202 == cp.api("PUT", "/v1/stacks/grp", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("grp", timeout=180)["status"]
    new = log.read_text().splitlines()[len(lines) :]
    assert ["DELETE c start", "DELETE c end"] == new
    assert {"a": "a-2", "b": "b-2"} == cp.outputs("grp")["results"]
    assert ["a", "b"] == sorted(d["resource_name"] for d in cp.api("GET", "/v1/deployments?stack=grp").body)

    cp.delete_stack("grp", timeout=180)
    tail = log.read_text().splitlines()[len(lines) + 2 :]
    assert {"DELETE a start", "DELETE a end", "DELETE b start", "DELETE b end"} == set(tail)


def test_batch_create_pause_time_separates_batches(cp: ControlPlane, tmp_path: Path) -> None:
    """pause_time 3: each member starts at least 3 s after the one before it finished (event times)."""
    log = tmp_path / "runs.log"
    paused = GROUP.replace(
        "batch_create: {max_batch_size: 1}", "batch_create: {max_batch_size: 1, pause_time: 3}"
    )
    cp.create_stack("gpause", paused, params={"log": str(log)}, timeout=180)
    deps = {d["id"]: d for d in cp.api("GET", "/v1/deployments?stack=gpause").body}
    starts = [
        e
        for e in cp.api("GET", "/v1/stacks/gpause/events").body
        if e["resource_name"] == "group" and e["status"] == "IN_PROGRESS" and e["deployment_id"]
    ]
    assert ["a", "b", "c"] == [deps[e["deployment_id"]]["resource_name"] for e in starts]
    for earlier, later in itertools.pairwise(starts):
        finished = deps[earlier["deployment_id"]]["completed_at"]
        assert later["timestamp"] - finished >= 3, (earlier, later, finished)
        assert later["timestamp"] - earlier["timestamp"] >= 3
    cp.delete_stack("gpause", timeout=180)


GROUP_REPLACE = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  version: {type: string, default: "1"}
resources:
  sa: {type: OS::Heat::DeployedServer}
  sb: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: LOG}, {name: VERSION, replace_on_change: true}]
      outputs: [{name: result}]
      config: |
        #!/bin/sh
        echo "$deploy_action $deploy_resource_name $VERSION" >> "$LOG"
        printf '%s-%s' "$deploy_resource_name" "$VERSION" > "$heat_outputs_path.result"
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      actions: [CREATE, UPDATE, DELETE]
      servers: {a: {get_resource: sa}, b: {get_resource: sb}}
      input_values: {LOG: {get_param: log}, VERSION: {get_param: version}}
  plain_cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: LOG}, {name: VERSION}]
      config: |
        #!/bin/sh
        echo "$deploy_action $deploy_resource_name $VERSION" >> "$LOG"
  user:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: plain_cfg}
      server: {get_resource: sa}
      input_values: {LOG: {get_param: log}, VERSION: {get_attr: [group, result, b]}}
"""


def test_group_replace_on_change_is_blue_green(cp: ControlPlane, tmp_path: Path) -> None:
    """A replace_on_change input: new members CREATE, the dependent UPDATEs, old members DELETE last."""
    log = tmp_path / "runs.log"
    cp.create_stack("grepl", GROUP_REPLACE, params={"log": str(log)}, timeout=180)
    before = len(log.read_text().splitlines())
    body = {"template": GROUP_REPLACE, "parameters": {"log": str(log), "version": "2"}}
    assert 202 == cp.api("PUT", "/v1/stacks/grepl", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("grepl", timeout=180)["status"]
    new = log.read_text().splitlines()[before:]
    assert {"CREATE a 2", "CREATE b 2"} == set(new[:2])
    assert "UPDATE user b-2" == new[2]
    assert {"DELETE a 1", "DELETE b 1"} == set(new[3:])
    cp.delete_stack("grepl", timeout=180)


RANDOM = """
heat_template_version: 2018-08-31
parameters:
  length: {type: number, default: 24}
  note: {type: string, default: a}
  out: {type: string}
resources:
  srv: {type: OS::Heat::DeployedServer}
  show:  # the value is a secret: only a hook on the server sees it
    type: OS::Heat::SoftwareDeployment
    properties:
      server: {get_resource: srv}
      config: {get_resource: cfg}
      input_values: {PW: {get_attr: [pw, value]}, OUT: {get_param: out}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PW}, {name: OUT}]
      config: |
        #!/bin/sh
        printf '%s' "$PW" > "$OUT"
  pw:
    type: OS::Heat::RandomString
    properties:
      length: {get_param: length}
      character_classes: [{class: digits, min: 3}, {class: uppercase, min: 2}]
      character_sequences: [{sequence: "!@", min: 1}]
  other:
    type: OS::Heat::Value
    properties: {value: {get_param: note}}
outputs:
  pw: {value: {get_attr: [pw, value]}}
"""


def test_random_string_is_stable_until_its_properties_change(cp: ControlPlane, tmp_path: Path) -> None:
    """The value survives unrelated updates; a new length makes a new value meeting the minimums."""
    out = tmp_path / "pw"
    cp.create_stack("rand", RANDOM, params={"out": str(out)})
    assert "******" == cp.outputs("rand")["pw"]  # masked in what the API shows
    first = out.read_text()
    assert 24 == len(first)
    assert sum(c.isdigit() for c in first) >= 3 and sum(c.isupper() for c in first) >= 2
    assert any(c in "!@" for c in first)
    assert set(first) <= set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ!@")

    body = {"template": RANDOM, "parameters": {"note": "b", "out": str(out)}}
    assert 202 == cp.api("PUT", "/v1/stacks/rand", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("rand")["status"]
    assert first == out.read_text()
    (show,) = [d for d in cp.api("GET", "/v1/deployments?stack=rand").body if d["resource_name"] == "show"]
    assert 1 == show["generation"]  # the same value: the deployment did not run again

    body = {"template": RANDOM, "parameters": {"note": "b", "length": 40, "out": str(out)}}
    assert 202 == cp.api("PUT", "/v1/stacks/rand", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("rand")["status"]
    second = out.read_text()
    assert 40 == len(second) and second != first


def test_random_string_too_short_for_its_minimums_is_refused(cp: ControlPlane) -> None:
    """length below the sum of the minimums: 400 naming resources.pw.properties.length."""
    resp = cp.create("short", RANDOM.replace("{get_param: length}", "5"), params={"out": "/nonexistent"})
    assert (400, "resources.pw.properties.length") == (resp.status, resp.body["error"]["where"])


BOOT = """
heat_template_version: 2018-08-31
resources:
  script:
    type: OS::Heat::SoftwareConfig
    properties: {config: "#!/bin/sh\\necho hi\\n"}
  cloud:
    type: OS::Heat::CloudConfig
    properties:
      cloud_config:
        packages: [nginx]
        write_files: [{path: /etc/motd, content: hello}]
  mime:
    type: OS::Heat::MultipartMime
    properties:
      parts:
        - config: {get_resource: cloud}
        - config: {get_resource: script}
          subtype: x-shellscript
          filename: run.sh
        - config: inline text
outputs:
  cloud: {value: {get_attr: [cloud, config]}}
  mime: {value: {get_attr: [mime, config]}}
"""


def _text(part: Message) -> str:
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes), part
    return payload.decode()


def test_cloud_config_and_multipart_mime(cp: ControlPlane) -> None:
    """CloudConfig is #cloud-config YAML; MultipartMime holds each part, configs by reference."""
    cp.create_stack("boot", BOOT)
    out = cp.outputs("boot")
    assert out["cloud"].startswith("#cloud-config\n")
    assert "packages:\n- nginx\n" in out["cloud"]
    message = email.message_from_string(out["mime"])
    parts = [p for p in message.walk() if not p.is_multipart()]
    texts = [_text(p) for p in parts]
    assert texts[0] == out["cloud"]
    assert "#!/bin/sh\necho hi\n" == texts[1]
    assert ("x-shellscript", "run.sh") == (parts[1].get_content_subtype(), parts[1].get_filename())
    assert "inline text" == texts[2]


def test_example_component_and_group_run_end_to_end(cp: ControlPlane) -> None:
    """examples/component.yaml and examples/group.yaml converge, update and suspend as they say."""
    cp.create_stack("ex-comp", EXAMPLES / "component.yaml")
    assert "installed (hello)" == cp.outputs("ex-comp")["state"]
    body = {"template": (EXAMPLES / "component.yaml").read_text(), "parameters": {"greeting": "hi"}}
    assert 202 == cp.api("PUT", "/v1/stacks/ex-comp", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("ex-comp")["status"]
    assert "reconfigured (hi)" == cp.outputs("ex-comp")["state"]
    cp.stack_action("ex-comp", "suspend")
    assert "SUSPEND" == cp.outputs("ex-comp")["state"]

    cp.create_stack("ex-group", EXAMPLES / "group.yaml", timeout=180)
    assert {"web0": "1@web0", "web1": "1@web1", "web2": "1@web2"} == cp.outputs("ex-group")["running"]
    body = {"template": (EXAMPLES / "group.yaml").read_text(), "parameters": {"release": "2"}}
    assert 202 == cp.api("PUT", "/v1/stacks/ex-group", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("ex-group", timeout=180)["status"]
    assert {"web0": "2@web0", "web1": "2@web1", "web2": "2@web2"} == cp.outputs("ex-group")["running"]


GROUP_NAMED = script_group(
    """
    #!/bin/sh
    echo "$deploy_action $deploy_resource_name $deploy_server_id" >> "$LOG"
    """,
    params={"log": "string", "name": "string, default: web-v1"},
    inputs={"LOG": "{get_param: log}"},
    actions="CREATE, DELETE, SUSPEND, RESUME",
    name="{get_param: name}",
)


def test_group_suspends_resumes_and_is_replaced_on_a_new_name(cp: ControlPlane, tmp_path: Path) -> None:
    """Every member runs SUSPEND and RESUME; a new `name` creates new members, then deletes the old."""
    log = tmp_path / "runs.log"
    cp.create_stack("gname", GROUP_NAMED, params={"log": str(log)})
    cp.stack_action("gname", "suspend")
    cp.stack_action("gname", "resume")
    lines = [ln.rsplit(" ", 1)[0] for ln in log.read_text().splitlines()]
    assert ["CREATE a", "CREATE b", "RESUME a", "RESUME b", "SUSPEND a", "SUSPEND b"] == sorted(lines)
    old = {d["id"] for d in cp.api("GET", "/v1/deployments?stack=gname").body}

    body = {"template": GROUP_NAMED, "parameters": {"log": str(log), "name": "web-v2"}}
    assert 202 == cp.api("PUT", "/v1/stacks/gname", body).status
    assert "UPDATE_COMPLETE" == cp.wait_stack("gname")["status"]
    new = [ln.rsplit(" ", 1)[0] for ln in log.read_text().splitlines()[6:]]
    assert ["CREATE a", "CREATE b"] == sorted(new[:2]) and ["DELETE a", "DELETE b"] == sorted(new[2:])
    deployments = cp.api("GET", "/v1/deployments?stack=gname").body
    assert not old & {d["id"] for d in deployments}
    assert ["web-v2", "web-v2"] == [d["name"] for d in deployments]


GROUP_FAILING = script_group(
    """
    #!/bin/sh
    echo "member $deploy_resource_name"
    if [ "$deploy_resource_name" = b ]; then echo "b cannot start" >&2; exit 4; fi
    """
)


def test_failing_member_fails_the_group_and_shows_its_output(cp: ControlPlane) -> None:
    """Member b exits 4: the stack fails naming b; `failures` shows b's stdout and stderr."""
    assert 201 == cp.create("gfail", GROUP_FAILING).status
    stack = cp.wait_stack("gfail")
    assert "CREATE_FAILED" == stack["status"]
    assert "member b on server" in stack["status_reason"] and "status code: 4" in stack["status_reason"]
    (failure,) = cp.api("GET", "/v1/stacks/gfail/failures").body
    assert ("group", 4) == (failure["resource"], failure["deploy_status_code"])
    assert "member b" in failure["deploy_stdout"] and "b cannot start" in failure["deploy_stderr"]
