"""`openstack stack abandon` and `stack adopt` through Heat's API: a stack handed over without re-running anything."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import PROJECT, OpenStack, start_heat_plane, write_template
from tests.support.templates import NESTED_GROUP, NESTED_MEMBER
from tests.support.waiting import wait_until

#: Each run of the script appends its action to the file LOG names: what ran, and how often.
LOGGED = """
heat_template_version: 2018-08-31
parameters:
  who: {type: string}
  log: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: %(server)s}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: LOG}]
      outputs: [{name: greeting}]
      config: |
        #!/bin/sh
        echo "$deploy_action" >> "$LOG"
        printf 'hello %%s' "$WHO" > "$heat_outputs_path.greeting"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {WHO: {get_param: who}, LOG: {get_param: log}}
outputs:
  greeting: {value: {get_attr: [dep, greeting]}}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-abandon"))
    yield cp, url
    stop_control_plane(cp)


@pytest.fixture(scope="module")
def osc(plane: tuple[ControlPlane, str]) -> OpenStack:
    """The real openstack CLI pointed at the Heat endpoint of PROJECT with the admin token."""
    return OpenStack(plane[0], f"{plane[1]}/v1/{PROJECT}")


def _runs(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_abandon_then_adopt_hands_the_stack_over_and_reruns_nothing(osc: OpenStack, tmp_path: Path) -> None:
    """`stack abandon --output-file` removes the stack with its deployment untouched (no DELETE runs);
    `stack adopt --adopt-file --wait` brings it back ADOPT_COMPLETE with its outputs, the script ran once;
    then `stack delete --wait` runs its DELETE: the adopted stack owns the deployment again."""
    log = tmp_path / "runs.log"
    template = write_template(tmp_path, "logged.yaml", LOGGED % {"server": "moving-box"})
    osc.ok(
        "stack",
        "create",
        "-t",
        template,
        "--parameter",
        "who=mover",
        "--parameter",
        f"log={log}",
        "--wait",
        "moving",
    )
    assert _runs(log) == ["CREATE"]
    before = {d["id"]: d for d in osc.json("software", "deployment", "list", "--server", "moving-box")}
    data_file = tmp_path / "abandoned.json"
    osc.ok("stack", "abandon", "moving", "--output-file", str(data_file))
    data = json.loads(data_file.read_text())
    assert data["name"] == "moving" and set(data["resources"]) == {"box", "cfg", "dep"}
    assert data["resources"]["dep"]["resource_id"] in before
    assert "moving" not in [s["Stack Name"] for s in osc.json("stack", "list")]
    left = {d["id"]: d for d in osc.json("software", "deployment", "list", "--server", "moving-box")}
    assert left.keys() == before.keys()  # the deployment stays on its server, as Heat leaves resources
    adopted = osc.ok("stack", "adopt", "--adopt-file", str(data_file), "--wait", "moved")
    assert "ADOPT_COMPLETE" in adopted
    shown = osc.json("stack", "show", "moved")
    assert shown["stack_status"] == "ADOPT_COMPLETE"
    assert shown["outputs"][0]["output_value"] == "hello mover"
    resources = {r["resource_name"]: r for r in osc.json("stack", "resource", "list", "moved")}
    assert {r["resource_status"] for r in resources.values()} == {"ADOPT_COMPLETE"}
    assert resources["dep"]["physical_resource_id"] == data["resources"]["dep"]["resource_id"]
    assert _runs(log) == ["CREATE"]  # adopting ran nothing
    osc.ok("stack", "delete", "--yes", "--wait", "moved")
    assert wait_until(lambda: _runs(log) == ["CREATE", "DELETE"], f"DELETE never ran: {_runs(log)}")
    assert osc.json("software", "deployment", "list", "--server", "moving-box") == []


def test_adopt_refuses_data_it_cannot_adopt(osc: OpenStack, tmp_path: Path) -> None:
    """Adopt data without Anneal's resource data (Heat's own) or a taken name is refused, naming what is wrong."""
    heat_made = {
        "name": "elsewhere",
        "template": {"heat_template_version": "2018-08-31", "resources": {"v": {"type": "OS::Heat::None"}}},
        "resources": {"v": {"name": "v", "resource_id": "x", "type": "OS::Heat::None", "resource_data": {}}},
    }
    path = tmp_path / "heat.json"
    path.write_text(json.dumps(heat_made))
    refused = osc.run("stack", "adopt", "--adopt-file", str(path), "from-heat")
    assert refused.returncode != 0 and "resources.v: not abandoned by Anneal" in refused.stderr
    assert "from-heat" not in [s["Stack Name"] for s in osc.json("stack", "list")]


def test_anneal_stack_abandon_and_adopt_hand_over_and_updates_act_again(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """`anneal stack abandon --output-file` then `anneal stack adopt --adopt-file`: ADOPT_COMPLETE, outputs kept,
    nothing re-ran; an update of the adopted stack runs UPDATE on the same deployment."""
    cp = plane[0]
    log = tmp_path / "runs.log"
    cp.create_stack("own", LOGGED % {"server": "own-box"}, params={"who": "first", "log": str(log)})
    data_file = tmp_path / "own.json"
    abandoned = cp.cli("stack", "abandon", "own", "--output-file", str(data_file))
    assert abandoned.returncode == 0, abandoned.stderr
    assert cp.api("GET", "/v1/stacks/own").status == 404
    adopted = cp.cli("stack", "adopt", "own-again", "--adopt-file", str(data_file), "-f", "json")
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["status"] == "ADOPT_COMPLETE"
    outputs = cp.api("GET", "/v1/stacks/own-again/outputs").body
    assert [o["output_value"] for o in outputs if o["output_key"] == "greeting"] == ["hello first"]
    assert _runs(log) == ["CREATE"]
    cp.update_stack("own-again", LOGGED % {"server": "own-box"}, {"who": "second", "log": str(log)})
    assert _runs(log) == ["CREATE", "UPDATE"]
    outputs = cp.api("GET", "/v1/stacks/own-again/outputs").body
    assert [o["output_value"] for o in outputs if o["output_key"] == "greeting"] == ["hello second"]
    again = cp.cli("stack", "adopt", "own-again", "--adopt-file", str(data_file))
    assert again.returncode != 0 and "already exists" in again.stderr


#: A hidden parameter reaches a deployment, which writes its SHA-256 as an output; a random string too.
HIDDEN = """
heat_template_version: 2018-08-31
parameters:
  pw: {type: string, hidden: true}
  log: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: sealed-box}}
  rand: {type: OS::Heat::RandomString, properties: {length: 24}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PW}, {name: RAND}, {name: LOG}]
      outputs: [{name: digest}]
      config: |
        #!/bin/sh
        echo "$deploy_action" >> "$LOG"
        printf '%s' "$RAND" > "$LOG.rand"
        printf '%s' "$PW" | sha256sum | cut -c1-64 > "$heat_outputs_path.digest"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE]
      input_values: {PW: {get_param: pw}, RAND: {get_attr: [rand, value]}, LOG: {get_param: log}}
outputs:
  digest: {value: {get_attr: [dep, digest]}}
"""


def test_abandon_seals_hidden_values_and_adopt_opens_them(
    plane: tuple[ControlPlane, str], osc: OpenStack, tmp_path: Path
) -> None:
    """Heat's abandon data carries the hidden parameter and the random string sealed, never in clear or
    masked; adopt opens them (an update reuses the real value); data sealed elsewhere is refused unless
    the parameter is given again."""
    cp = plane[0]
    canary = f"canary-{uuid.uuid4().hex}"
    log = tmp_path / "runs.log"
    cp.create_stack("sealed", HIDDEN, params={"pw": canary, "log": str(log)})
    random_value = Path(f"{log}.rand").read_text()  # as the hook got it
    assert len(random_value) == 24
    data_file = tmp_path / "sealed.json"
    osc.ok("stack", "abandon", "sealed", "--output-file", str(data_file))  # Heat's DELETE .../abandon
    text = data_file.read_text()
    assert (canary not in text, random_value not in text, "******" not in text) == (True, True, True)
    data = json.loads(text)
    assert data["parameters"]["pw"]["anneal_sealed"] == "v1"
    assert (
        data["resources"]["rand"]["resource_data"]["anneal"]["attributes"]["value"]["anneal_sealed"] == "v1"
    )
    adopted = cp.cli("stack", "adopt", "unsealed", "--adopt-file", str(data_file), "-f", "json")
    assert adopted.returncode == 0, adopted.stderr
    assert canary not in adopted.stdout and canary not in cp.cli("stack", "show", "unsealed").stdout
    second = tmp_path / "second.log"
    patch = {"existing": True, "parameters": {"log": str(second)}}  # an update that keeps pw as adopted
    assert 202 == cp.api("PUT", "/v1/stacks/unsealed", patch).status
    cp.settled("unsealed", "UPDATE_COMPLETE", 120)
    assert (_runs(log), _runs(second)) == (["CREATE"], ["UPDATE"])
    assert hashlib.sha256(canary.encode()).hexdigest() == cp.outputs("unsealed")["digest"].strip()
    assert random_value == Path(f"{second}.rand").read_text()
    # Sealed by another control plane (its data key): refused naming the place, unless pw is given again.
    foreign = json.loads(text)
    foreign["parameters"]["pw"]["kid"] = "0" * 12
    body = {"name": "foreign", "adopt_stack_data": foreign}
    refused = cp.api("POST", "/v1/adopt", body)
    assert (400, "adopt_stack_data.parameters.pw") == (refused.status, refused.body["error"]["where"])


def test_a_stack_with_a_group_of_nested_stacks_is_abandoned_and_adopted_whole(
    plane: tuple[ControlPlane, str], tmp_path: Path
) -> None:
    """A ResourceGroup of template resources (two levels of nested stacks): abandon nests their data as Heat
    does and removes them all, nothing runs; adopt brings the tree back with its outputs; an update runs
    UPDATE once on each member's deployment."""
    cp, log = plane[0], tmp_path / "runs.log"
    params = {"log": str(log)}
    cp.create_stack("nest", NESTED_GROUP, params=params, files={"member.yaml": NESTED_MEMBER}, timeout=180)
    assert sorted(_runs(log)) == ["0-CREATE-r1", "1-CREATE-r1"]
    data_file = tmp_path / "nest.json"
    abandoned = cp.cli("stack", "abandon", "nest", "--output-file", str(data_file))
    assert abandoned.returncode == 0, abandoned.stderr
    data = json.loads(data_file.read_text())
    fleet = data["resources"]["fleet"]  # the group's nested stack in its place, as Heat nests it
    assert (fleet["type"], sorted(fleet["resources"])) == ("OS::Heat::ResourceGroup", ["0", "1"])
    assert sorted(fleet["resources"]["0"]["resources"]) == ["box", "cfg", "dep"]
    names = [s["name"] for s in cp.api("GET", "/v1/stacks?nested=true").body]
    assert [n for n in names if n == "nest" or n.startswith("nest-")] == []  # the nested stacks went too
    adopted = cp.cli("stack", "adopt", "nest-again", "--adopt-file", str(data_file), "-f", "json")
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["status"] == "ADOPT_COMPLETE"
    assert cp.outputs("nest-again")["said"] == ["0-r1", "1-r1"]
    assert sorted(_runs(log)) == ["0-CREATE-r1", "1-CREATE-r1"]
    assert (
        202 == cp.api("PUT", "/v1/stacks/nest-again", {"existing": True, "parameters": {"rev": "r2"}}).status
    )
    cp.settled("nest-again", "UPDATE_COMPLETE", 180)
    assert sorted(_runs(log)) == ["0-CREATE-r1", "0-UPDATE-r2", "1-CREATE-r1", "1-UPDATE-r2"]
    assert cp.outputs("nest-again")["said"] == ["0-r2", "1-r2"]
    cp.delete_stack("nest-again")  # the adopted tree deletes as any
    assert [n for n in (s["name"] for s in cp.api("GET", "/v1/stacks?nested=true").body) if "nest" in n] == []
