"""Heat templates as people write them: what Heat accepts is accepted, with a warning where Anneal differs.

Real control plane, real local agents running the scripts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

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


FILES = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer}
  program:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      outputs: [{name: self_sha}]
      config: {get_file: files/program.sh}
  uses:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: BLOB}, {name: TREE, type: Json}]
      outputs: [{name: blob_sha}, {name: tree_keys}]
      config: |
        #!/bin/sh
        sha256sum "$BLOB" | cut -d' ' -f1 | tr -d '\\n' > "$heat_outputs_path.blob_sha"
        printf '%s' "$TREE" > "$heat_outputs_path.tree_keys"
  run_program:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: program}, server: {get_resource: box}}
  run_uses:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: uses}
      server: {get_resource: box}
      input_values: {BLOB: {get_file: files/blob.bin}, TREE: {get_file: files/tree}}
outputs:
  self_sha: {value: {get_attr: [run_program, self_sha]}}
  blob_sha: {value: {get_attr: [run_uses, blob_sha]}}
  tree: {value: {get_attr: [run_uses, tree_keys]}}
"""


def test_get_file_of_binary_files_and_a_directory_reaches_the_hook_byte_for_byte(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A non-UTF-8 program runs as its exact bytes; a binary input is a file of its bytes; a directory is a map."""
    files = tmp_path / "files"
    (files / "tree" / "sub").mkdir(parents=True)
    # A script with bytes that are not UTF-8 (a Latin-1 comment and raw high bytes): it hashes itself.
    program = b'#!/bin/sh\n# caf\xe9 \xff\xfe\x00\nsha256sum "$0" | cut -d" " -f1 | tr -d "\\n" > "$heat_outputs_path.self_sha"\n'
    (files / "program.sh").write_bytes(program)
    blob = bytes(range(256)) * 64
    (files / "blob.bin").write_bytes(blob)
    (files / "tree" / "a.txt").write_text("alpha\n")
    (files / "tree" / "sub" / "b.bin").write_bytes(b"\x00\x01\xff")
    (tmp_path / "stack.yaml").write_text(FILES)
    out = cp.cli("stack", "create", "files", "-t", str(tmp_path / "stack.yaml"), "--wait", "--timeout", "120")
    assert out.returncode == 0, out.stdout + out.stderr
    outputs = cp.outputs("files")
    assert outputs["self_sha"] == hashlib.sha256(program).hexdigest()
    assert outputs["blob_sha"] == hashlib.sha256(blob).hexdigest()
    tree = json.loads(outputs["tree"])
    assert tree == {
        "a.txt": "alpha\n",
        "sub/b.bin": {"anneal:base64": base64.b64encode(b"\x00\x01\xff").decode()},
    }


def test_a_binary_template_is_a_clear_cli_error_not_a_traceback(cp: ControlPlane, tmp_path: Path) -> None:
    """`stack create` of a template that is not UTF-8 names the file; no UnicodeDecodeError traceback."""
    (tmp_path / "bad.yaml").write_bytes(b"heat_template_version: 2018-08-31\n# \xff\xfe\n")
    out = cp.cli("stack", "create", "bad", "-t", str(tmp_path / "bad.yaml"))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "is not UTF-8 text" in out.stderr and "bad.yaml" in out.stderr


def test_a_malformed_files_entry_is_refused_naming_it(cp: ControlPlane) -> None:
    """A files entry that is neither text, a base64 envelope nor a directory is a 400 naming files.<path>."""
    bad = {"x.bin": {"anneal:base64": 12}}
    resp = cp.api("POST", "/v1/stacks", {"name": "badfiles", "template": UNDECLARED, "files": bad})
    assert resp.status == 400 and resp.body["error"]["where"] == "files.x.bin"


ADDRESSES = """
heat_template_version: 2018-08-31
resources:
  db: {type: OS::Nova::Server, properties: {image: debian, flavor: m1.small, networks: [{network: private}]}}
  web: {type: OS::Heat::DeployedServer}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: DB_HOST}]
      outputs: [{name: seen}]
      config: |
        #!/bin/sh
        printf '%s' "$DB_HOST" > "$heat_outputs_path.seen"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: web},
                 input_values: {DB_HOST: {get_attr: [db, first_address]}}}
outputs:
  seen: {value: {get_attr: [dep, seen]}}
  networks: {value: {get_attr: [db, networks]}}
  addresses: {value: {get_attr: [db, addresses]}}
  v4: {value: {get_attr: [db, accessIPv4]}}
  v6: {value: {get_attr: [db, accessIPv6]}}
"""


def _host_addresses() -> list[tuple[str, str, int]]:
    """(interface, address, version) of every global address here, as `ip -j addr` lists them."""
    links = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, check=True).stdout)
    return [
        (link["ifname"], a["local"], 4 if a["family"] == "inet" else 6)
        for link in links
        if "LOOPBACK" not in link.get("flags", [])
        for a in link.get("addr_info", [])
        if a.get("scope") == "global"
    ]


def test_a_servers_reported_address_reaches_another_servers_config(cp: ControlPlane) -> None:
    """first_address, networks, addresses, accessIPv4/6 come from the agent's report; a peer's config gets it."""
    found = _host_addresses()
    if not found:
        pytest.skip("this machine has no global address for the agents to report")
    cp.create_stack("addresses", ADDRESSES, timeout=180)
    outputs = cp.outputs("addresses")
    v4 = [a for _, a, v in found if v == 4]
    v6 = [a for _, a, v in found if v == 6]
    assert outputs["seen"] == (v4 or v6)[0]
    assert outputs["v4"] == (v4 or [""])[0] and outputs["v6"] == (v6 or [""])[0]
    expected: dict[str, list[str]] = {}
    for interface, addr, _ in found:
        expected.setdefault(interface, []).append(addr)
    assert outputs["networks"] == expected
    first_if = found[0][0]
    assert outputs["addresses"][first_if][0]["addr"] == found[0][1]
    assert outputs["addresses"][first_if][0]["OS-EXT-IPS:type"] == "fixed"
    warned = " ".join(e["reason"] for e in warnings_of(cp, "addresses"))
    assert "resources.db.properties.image" in warned and "resources.db.properties.networks" in warned


WALLABY = """
heat_template_version: wallaby
parameters:
  sizes: {type: json, default: [3, 2, 1]}
  extra: {type: boolean, default: false}
conditions:
  with_extra: {get_param: extra}
resources:
  total:
    type: OS::Heat::Value
    properties:
      value: {yaql: {expression: "$.data.sizes.sum()", data: {sizes: {get_param: sizes}}}}
  picked:
    type: OS::Heat::Value
    properties:
      value: [base, {if: [with_extra, extra]}]
outputs:
  total: {value: {get_attr: [total, value]}}
  picked: {value: {get_attr: [picked, value]}}
"""


def test_a_wallaby_template_with_yaql_and_two_argument_if(cp: ControlPlane) -> None:
    """heat_template_version wallaby: yaql evaluates, a false two-argument if drops its list item."""
    cp.create_stack("wallaby", WALLABY)
    assert cp.outputs("wallaby") == {"total": 6, "picked": ["base"]}
    bad = WALLABY.replace("$.data.sizes.sum()", "$.data.sizes.(")
    resp = cp.create("wallaby-bad", bad)
    assert (
        resp.status == 400
        and resp.body["error"]["where"] == "resources.total.properties.value.yaql.expression"
    )


SKIPPED = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer}
  hiera:
    type: OS::Heat::StructuredConfig
    properties: {group: os-apply-config, config: {hieradata: {role: web}}}
  applied:
    type: OS::Heat::StructuredConfig
    properties: {group: apply-config, config: {}}
  data:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: hiera}, server: {get_resource: box}}
  apply:
    type: OS::Heat::StructuredDeployment
    properties: {config: {get_resource: applied}, server: {get_resource: box}}
outputs:
  data_code: {value: {get_attr: [data, deploy_status_code]}}
  data_note: {value: {get_attr: [data, deploy_stderr]}}
  apply_code: {value: {get_attr: [apply, deploy_status_code]}}
"""


def test_groups_heats_agent_skips_complete_with_a_note(cp: ControlPlane) -> None:
    """os-apply-config and apply-config deployments complete (status 0), their stderr saying they were skipped."""
    cp.create_stack("skipped", SKIPPED)
    outputs = cp.outputs("skipped")
    assert outputs["data_code"] == 0 and outputs["apply_code"] == 0
    assert "group 'os-apply-config' skipped, as Heat's agent skips it" in outputs["data_note"]
