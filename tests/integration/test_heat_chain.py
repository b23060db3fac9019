"""Heat's own agent chain, unchanged, runs our control plane's deployments.

The real os-collect-config -> os-refresh-config -> os-apply-config -> 55-heat-config ->
script hook -> heat-config-notify, from PyPI and the heat-agents sdist (`make tools`),
with every server path redirected under a work dir (tests/support/heatchain.py). Two
Heat-compatible servers, each with its own chain polling its metadata URL; a stack whose
second deployment takes the first one's output completes in our control plane.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.heatchain import HeatChain, require_heat_agents
from tests.support.processes import stop_process

STACK = """
heat_template_version: rocky
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PREV}, {name: STEP}]
      outputs: [{name: trail}]
      config: |
        #!/bin/sh
        echo "step $STEP on $deploy_server_id"
        printf '%s>%s' "$PREV" "$STEP" > "$heat_outputs_path.trail"
  first:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: hc-one, input_values: {PREV: start, STEP: a}}
  second:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: hc-two,
                 input_values: {PREV: {get_attr: [first, trail]}, STEP: b}}
outputs:
  trail: {value: {get_attr: [second, trail]}}
  first_stdout: {value: {get_attr: [first, deploy_stdout]}}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require_heat_agents()
    plane = start_control_plane(tmp_path_factory.mktemp("heatchain"), "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


def _get(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_metadata_url_is_a_capability_for_one_server(cp: ControlPlane) -> None:
    """The URL reads its own server's document; a wrong or missing signature is refused."""
    one = cp.api("POST", "/v1/servers", {"name": "cap-one", "heat_compatible": True}).body
    two = cp.api("POST", "/v1/servers", {"name": "cap-two", "heat_compatible": True}).body
    assert "enrol_token" not in one and one["status"] == "HEAT_COMPATIBLE"
    status, body, headers = _get(one["metadata_url"])
    assert 200 == status, body
    doc = json.loads(body)
    assert doc["os-collect-config"] == {
        "collectors": ["request", "local"],
        "request": {"metadata_url": one["metadata_url"]},
    }
    assert doc["deployments"] == [] and "Last-Modified" in headers
    base, _, sig = one["metadata_url"].partition("?sig=")
    assert 403 == _get(f"{base}?sig={'0' * len(sig)}")[0]
    assert 403 == _get(base.replace(one["id"], two["id"]) + f"?sig={sig}")[0]
    assert 401 == _get(base)[0]
    bad = cp.api("POST", "/v1/servers", {"name": "cap-bad", "heat_compatible": "yes"})
    assert 400 == bad.status and bad.body["error"]["where"] == "heat_compatible"
    for transport in ("__main__", "swift"):  # found by the API fuzzer: a transport was silently ignored
        both = cp.api(
            "POST", "/v1/servers", {"name": "cap-both", "heat_compatible": True, "transport": transport}
        )
        assert 400 == both.status and both.body["error"]["where"] == "transport", both.body
    assert 404 == cp.api("GET", "/v1/servers/cap-both").status


def test_heat_chain_runs_a_two_server_stack_to_complete(cp: ControlPlane, tmp_path: Path) -> None:
    """Two chains in poll mode; the second server's deployment needs the first one's output."""
    servers = {}
    for name in ("hc-one", "hc-two"):
        out = cp.cli("server", "create", name, "--heat-compatible", "--format", "json")
        assert out.returncode == 0, out.stderr
        servers[name] = json.loads(out.stdout)
    chains = {name: HeatChain(tmp_path / name).setup() for name in servers}
    procs = {}
    logs = {}
    try:
        for name, chain in chains.items():
            logs[name] = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed below)
            procs[name] = subprocess.Popen(
                chain.argv(servers[name]["metadata_url"], interval=1),
                env=chain.env(),
                stdout=logs[name],
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        assert cp.create("hcstack", STACK).status == 201
        stack = cp.wait_stack("hcstack", timeout=240)
    finally:
        for proc in procs.values():
            stop_process(proc, 20)
        for f in logs.values():
            f.close()
    chain_log = "\n".join(f"== {n}\n{(tmp_path / f'{n}.log').read_text()[-3000:]}" for n in servers)
    assert stack["status"] == "CREATE_COMPLETE", (stack, chain_log)
    outputs = cp.outputs("hcstack")
    assert outputs["trail"] == "start>a>b"
    assert outputs["first_stdout"] == f"step a on {servers['hc-one']['id']}\n"
    # Heat's chain itself ran each deployment once: its marker files name the derived configs.
    for name, chain in chains.items():
        deps = cp.api("GET", f"/v1/deployments?server={servers[name]['id']}").body
        assert [d["status"] for d in deps] == ["COMPLETE"]
        item_ids = [cp.api("GET", f"/v1/deployments/{d['id']}").body for d in deps]
        assert len(chain.deployed()) == 1, chain.deployed()
        assert chain.deployed()[0] in json.dumps(item_ids)
        # os-apply-config rendered the os-collect-config.conf Heat's element writes from the section.
        conf = (chain.work / "etc/os-collect-config.conf").read_text()
        assert f"metadata_url = {servers[name]['metadata_url']}" in conf
        assert "collectors = request" in conf and "collectors = local" in conf
