"""Heat's older and rarer template features through the real control plane and local agents.

OS::Heat::Stack (inline template), the CFN functions of 2013-05-23 HOT, console_urls,
OS::Heat::InstanceGroup with its launch configuration, and external_id adopting a server and a software config.
Each deployment appends "<who> <action>" to one log, so what ran is read from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

SCRIPT = """
  step:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: LOG}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "$WHO $deploy_action" >> "$LOG"
        printf '%s' "$WHO" > "$heat_outputs_path.said"
"""

INNER = """heat_template_version: 2018-08-31
parameters:
  server: {type: string}
  config: {type: string}
  log: {type: string}
resources:
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_param: config}
      server: {get_param: server}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {WHO: {list_join: ['-', [inner, {get_param: 'OS::stack_name'}]]}, LOG: {get_param: log}}
outputs:
  said: {value: {get_attr: [dep, said]}}
  fixed: {value: seven}
"""

OLD_STYLE = (
    """
heat_template_version: 2013-05-23
parameters:
  log: {type: string}
  words: {type: string, default: "alpha,beta,gamma"}
resources:
  box:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny}
"""
    + SCRIPT
    + """
  top_dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {Ref: step}
      server: {Ref: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values:
        WHO: {"Fn::Join": ["-", [top, {"Fn::Select": [1, {"Fn::Split": [",", {Ref: words}]}]}]]}
        LOG: {"Fn::Base64": {Ref: log}}
  inner:
    type: OS::Heat::Stack
    properties:
      template: {get_file: inner.yaml}
      timeout: 7
      parameters: {server: {get_resource: box}, config: {get_resource: step}, log: {get_param: log}}
outputs:
  top_said: {value: {get_attr: [top_dep, said]}}
  inner_all: {value: {get_attr: [inner, outputs]}}
  inner_said: {value: {get_attr: [inner, outputs, said]}}
  inner_name: {value: {get_attr: [inner, stack_name]}}
  consoles: {value: {get_attr: [box, console_urls]}}
  novnc: {value: {get_attr: [box, console_urls, novnc]}}
  replaced: {value: {"Fn::Replace": [{"%w%": {Ref: words}}, "words=%w%"]}}
"""
)

INSTANCES = """
heat_template_version: 2013-05-23
parameters:
  size: {type: number, default: 2}
  image: {type: string, default: cirros}
resources:
  launch:
    type: AWS::AutoScaling::LaunchConfiguration
    properties: {ImageId: {get_param: image}, InstanceType: m1.small, KeyName: mine}
  group:
    type: OS::Heat::InstanceGroup
    properties:
      LaunchConfigurationName: {get_resource: launch}
      Size: {get_param: size}
      AvailabilityZones: {"Fn::GetAZs": ""}
      LoadBalancerNames: [lb]
      Tags: [{Key: role, Value: web}]
outputs:
  addresses: {value: {get_attr: [group, InstanceList]}}
"""

OWNER = """
heat_template_version: 2018-08-31
resources:
  shared: {type: OS::Heat::DeployedServer, properties: {name: legacy-shared}}
"""

ADOPTER = (
    """
heat_template_version: newton
parameters:
  log: {type: string}
  existing: {type: string, default: legacy-shared}
resources:
  there:
    type: OS::Nova::Server
    external_id: {get_param: existing}
"""
    + SCRIPT
    + """
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: step}
      server: {get_resource: there}
      actions: [CREATE, DELETE]
      input_values: {WHO: adopter, LOG: {get_param: log}}
outputs:
  name: {value: {get_attr: [there, name]}}
"""
)


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("legacy"))
    yield plane
    stop_control_plane(plane)


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _resources(cp: ControlPlane, stack: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in cp.api("GET", f"/v1/stacks/{stack}/resources").body}


def test_a_2013_template_with_cfn_functions_and_an_inline_stack_runs_on_a_real_agent(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Ref, Fn::Join/Select/Split/Base64/Replace evaluate as Heat's; the OS::Heat::Stack's deployment
    runs on the parent's server and its outputs come back whole and by name; its timeout is the nested
    stack's; console_urls answers Heat's no-console message with a warning; an update's preview
    plans it; delete runs both DELETEs."""
    log = tmp_path / "runs.log"
    files = {"inner.yaml": INNER}
    cp.create_stack("old", OLD_STYLE, params={"log": str(log)}, files=files)
    out = cp.outputs("old")
    assert "top-beta" == out["top_said"] and out["replaced"] == "words=alpha,beta,gamma"
    inner_name = out["inner_name"]
    assert inner_name.startswith("old-inner-")
    assert {"said": f"inner-{inner_name}", "fixed": "seven"} == out["inner_all"]
    assert out["inner_said"] == out["inner_all"]["said"]
    assert sorted(_lines(log)) == sorted(["top-beta CREATE", f"inner-{inner_name} CREATE"])
    nested = cp.api("GET", f"/v1/stacks/{inner_name}").body
    assert 7 == nested["timeout_mins"]
    assert out["novnc"].startswith("Cannot get console url:")
    assert {"novnc", "xvpvnc", "spice-html5", "rdp-html5", "serial", "webmks"} == set(out["consoles"])
    events = cp.api("GET", "/v1/stacks/old/events").body
    assert any(e["resource_name"] == "box" and "console_urls" in e["reason"] for e in events)

    body = {"template": OLD_STYLE, "files": files, "parameters": {"log": str(log), "words": "a,b"}}
    preview = cp.api("PUT", "/v1/stacks/old/preview", body)
    assert 200 == preview.status and "top_dep" in str(preview.body), preview.body

    cp.delete_stack("old")
    assert sorted([f"inner-{inner_name} DELETE", "top-beta DELETE"]) == sorted(_lines(log)[2:])


def test_bad_legacy_input_is_refused_at_its_path(cp: ControlPlane) -> None:
    """A remote region, an unknown parameter of the inline template, Ref in a newer template and
    external_id before newton are 400s naming the path; nothing is created."""
    remote = OLD_STYLE.replace("timeout: 7", "timeout: 7\n      context: {region_name: RegionTwo}")
    cases = {
        "resources.inner.properties.context.region_name": remote,
        "resources.inner.properties.parameters.nope": OLD_STYLE.replace(
            "log: {get_param: log}}", "log: {get_param: log}, nope: 1}"
        ),
        "resources.top_dep.properties.config": OLD_STYLE.replace("2013-05-23", "2015-10-15"),
        "resources.there.external_id": ADOPTER.replace("newton", "2016-04-08"),
    }
    for path, template in cases.items():
        resp = cp.create("refused", template, params={"log": "/dev/null"}, files={"inner.yaml": INNER})
        assert 400 == resp.status, resp.body
        assert path in str(resp.body), (path, resp.body)
    assert 404 == cp.api("GET", "/v1/stacks/refused").status


def test_an_instance_group_makes_servers_with_agents_from_its_launch_configuration(cp: ControlPlane) -> None:
    """Size servers, each with a local agent that enrols and reports its address (InstanceList);
    the ignored properties are named in warnings; a smaller Size removes one; a changed launch
    configuration is replaced and so is the member made from it (a new server, the old one
    deleted), as in Heat; delete releases them."""
    cp.create_stack("ig", INSTANCES)
    addresses = cp.outputs("ig")["addresses"].split(",")
    assert 2 == len(addresses) and all(addresses)
    events = cp.api("GET", "/v1/stacks/ig/events").body
    assert any("LoadBalancerNames" in e["reason"] and e["status"] == "WARNING" for e in events)
    group = _resources(cp, "ig")["group"]
    members = {r["name"] for r in cp.api("GET", f"/v1/stacks/{group['physical_id']}/resources").body}
    assert 2 == len(members)

    cp.update_stack("ig", INSTANCES, {"size": "1"})
    assert 1 == len(cp.outputs("ig")["addresses"].split(","))
    kept = {r["name"] for r in cp.api("GET", f"/v1/stacks/{group['physical_id']}/resources").body}
    assert 1 == len(kept) and kept < members

    launch = _resources(cp, "ig")["launch"]["physical_id"]
    before = {s["name"] for s in cp.api("GET", "/v1/servers").body}
    cp.update_stack("ig", INSTANCES, {"size": "1", "image": "fedora"})
    assert launch != _resources(cp, "ig")["launch"]["physical_id"]
    rolled = cp.api("GET", f"/v1/stacks/{group['physical_id']}/resources").body
    assert 1 == len(rolled) and rolled[0]["name"] not in kept and "CREATE_COMPLETE" == rolled[0]["status"]
    after = {s["name"] for s in cp.api("GET", "/v1/servers").body}
    assert 1 == len(before - after) == len(after - before)  # the member's server was replaced
    assert next(iter(kept)) in next(iter(before - after))
    assert 1 == len(cp.outputs("ig")["addresses"].split(","))
    servers = len(after)
    cp.delete_stack("ig")
    assert servers - 1 == len(cp.api("GET", "/v1/servers").body)


def test_external_id_adopts_an_existing_server_which_outlives_the_stack(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A Nova server with external_id (get_param of a server's name) is that server: the deployment
    runs on its agent; an update changing external_id fails as in Heat; deleting the stack runs
    DELETE and leaves the server."""
    log = tmp_path / "runs.log"
    cp.create_stack("owner", OWNER)
    cp.create_stack("adopter", ADOPTER, params={"log": str(log)})
    assert "legacy-shared" == cp.outputs("adopter")["name"]
    assert ["adopter CREATE"] == _lines(log)
    owned = _resources(cp, "owner")["shared"]["physical_id"]
    assert owned == _resources(cp, "adopter")["there"]["physical_id"]

    cp.update_stack("adopter", ADOPTER, {"log": str(log), "existing": owned}, expect="UPDATE_FAILED")
    reason = _resources(cp, "adopter")["there"]["status_reason"]
    assert "Update to property external_id of there (OS::Nova::Server) is not supported" in reason

    cp.delete_stack("adopter")
    assert ["adopter CREATE", "adopter DELETE"] == _lines(log)
    assert 200 == cp.api("GET", "/v1/servers/legacy-shared").status
    wait_until(
        lambda: cp.api("GET", "/v1/servers/legacy-shared").body.get("status") == "ENROLLED",
        "the adopted server is still enrolled",
        30,
    )
    cp.delete_stack("owner")


CONFIG_OWNER = (
    """
heat_template_version: 2018-08-31
resources:
"""
    + SCRIPT
    + """
outputs:
  id: {value: {get_resource: step}}
"""
)

CONFIG_USER = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  config: {type: string}
resources:
  box:
    type: OS::Nova::Server
  step:
    type: OS::Heat::SoftwareConfig
    external_id: {get_param: config}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: step}
      server: {get_resource: box}
      input_values: {WHO: user, LOG: {get_param: log}}
outputs:
  said: {value: {get_attr: [dep, said]}}
"""


def test_external_id_adopts_an_existing_software_config_which_outlives_the_stack(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A SoftwareConfig with external_id is that config of another stack: deployed as its own; deleting
    the adopting stack leaves it, so it can be adopted again; an unknown id fails the resource naming it."""
    log = tmp_path / "runs.log"
    cp.create_stack("cfg-owner", CONFIG_OWNER)
    config_id = cp.outputs("cfg-owner")["id"]
    for _ in range(2):
        cp.create_stack("cfg-user", CONFIG_USER, params={"log": str(log), "config": config_id})
        assert "user" == cp.outputs("cfg-user")["said"]
        assert config_id == _resources(cp, "cfg-user")["step"]["physical_id"]
        cp.delete_stack("cfg-user")
    assert ["user CREATE", "user CREATE"] == _lines(log)
    cp.create_stack(
        "cfg-user", CONFIG_USER, params={"log": str(log), "config": "nope"}, expect="CREATE_FAILED"
    )
    assert (
        "no software config of this project has that id"
        in _resources(cp, "cfg-user")["step"]["status_reason"]
    )
    cp.delete_stack("cfg-user")
    cp.delete_stack("cfg-owner")
