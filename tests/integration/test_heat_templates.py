"""Heat templates as people write them: what Heat accepts is accepted, with a warning where Anneal differs.

Real control plane, real local agents running the scripts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("heattemplates"))
    yield plane
    stop_control_plane(plane)


def warnings_of(cp: ControlPlane, stack: str) -> list[dict[str, str]]:
    return [e for e in cp.api("GET", f"/v1/stacks/{stack}/events").body if e["status"] == "WARNING"]


UNDECLARED = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: result}]
      config: |
        #!/bin/sh
        printf done > "$heat_outputs_path.result"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: box}}
  user:
    type: OS::Heat::Value
    properties: {value: {get_attr: [dep, not_declared]}}
outputs:
  result: {value: {get_attr: [dep, result]}}
  missing: {value: {get_attr: [dep, never_declared]}}
  passed_on: {value: {get_attr: [user, value]}}
"""


def test_get_attr_of_an_undeclared_output_is_null_with_a_warning_naming_it(cp: ControlPlane) -> None:
    """Accepted at create as Heat accepts it; resolves to null; a WARNING event names each reference."""
    cp.create_stack("undeclared", UNDECLARED)
    assert cp.outputs("undeclared") == {"result": "done", "missing": None, "passed_on": None}
    warned = {e["resource_name"]: e["reason"] for e in warnings_of(cp, "undeclared")}
    assert "'not_declared'" in warned["user"] and "resources.user.properties.value" in warned["user"]
    assert "'never_declared'" in warned["undeclared"] and "outputs.missing.value" in warned["undeclared"]
    shown = cp.api("GET", "/v1/stacks/undeclared").body["warnings"]
    assert any("never_declared" in w for w in shown)


GROUP = """
heat_template_version: 2018-08-31
resources:
  one: {type: OS::Heat::DeployedServer}
  two: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo "out of $deploy_resource_name"
        echo "err of $deploy_resource_name" >&2
  group:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {a: {get_resource: one}, b: {get_resource: two}}
outputs:
  stdout: {value: {get_attr: [group, deploy_stdout]}}
  stderr: {value: {get_attr: [group, deploy_stderr]}}
  codes: {value: {get_attr: [group, deploy_status_code]}}
  stdouts: {value: {get_attr: [group, deploy_stdouts]}}
"""


def test_deployment_group_answers_the_singular_names_with_a_map_per_member(cp: ControlPlane) -> None:
    """deploy_stdout, deploy_stderr, deploy_status_code on a group: member -> value, as Heat answers."""
    cp.create_stack("singular", GROUP)
    outputs = cp.outputs("singular")
    assert outputs["stdout"] == {"a": "out of a\n", "b": "out of b\n"}
    assert outputs["stderr"] == {"a": "err of a\n", "b": "err of b\n"}
    assert outputs["codes"] == {"a": 0, "b": 0}
    assert outputs["stdouts"] == outputs["stdout"]
