"""Heat's documented bootstrap from the template alone, with Heat's own agent chain.

For each software_config_transport Heat's collectors can read here (POLL_SERVER_CFN:
EC2-signed DescribeStackResource; POLL_SERVER_HEAT and ZAQAR_MESSAGE: Keystone login and
the Heat API; POLL_TEMP_URL: a plain GET), the stack's output `get_attr: [box,
os_collect_config]` is dropped into os-collect-config's local-data directory on a machine
running the real chain from PyPI (tests/support/heatchain.py), with no `anneal server
create --heat-compatible`. The chain renders its config from it, re-execs with that
transport, runs the stack's deployments and signals them back over every signal transport.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.heatchain import HeatChain, require_heat_agents
from tests.support.processes import stop_process
from tests.support.waiting import wait_until

SIGNALS = ("CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "ZAQAR_SIGNAL", "NO_SIGNAL")


def stack(transport: str) -> str:
    """A DeployedServer on *transport* and one script deployment per signal transport Heat's chain sends."""
    deployments = "\n".join(
        f"""  dep_{t.lower()}:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: cfg}}, server: {{get_resource: box}}, signal_transport: {t},
                 name: {t.lower()}, input_values: {{WANT: {t}}}}}"""
        for t in SIGNALS
    )
    outputs = "\n".join(f"  {t.lower()}: {{value: {{get_attr: [dep_{t.lower()}, got]}}}}" for t in SIGNALS)
    return f"""
heat_template_version: 2018-08-31
resources:
  box:
    type: OS::Heat::DeployedServer
    properties: {{software_config_transport: {transport}}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: WANT}}]
      outputs: [{{name: got}}]
      config: |
        #!/bin/sh
        echo "$WANT via $deploy_signal_transport"
        printf '%s/%s' "$WANT" "$deploy_signal_transport" > "$heat_outputs_path.got"
{deployments}
outputs:
  occ: {{value: {{get_attr: [box, os_collect_config]}}}}
{outputs}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require_heat_agents()
    plane = start_control_plane(tmp_path_factory.mktemp("bootstrap"), "--provisioner", "enrol")
    yield plane
    stop_control_plane(plane)


def _run_chain(cp: ControlPlane, name: str, chain: HeatChain, log: Path) -> dict[str, Any]:
    """Bootstrap the chain from the stack's os_collect_config output and wait for the stack."""
    occ = wait_until(lambda: cp.outputs(name).get("occ"), f"{name}: no os_collect_config output", 60)
    chain.bootstrap(occ)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            chain.bootstrap_argv(),
            env=chain.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return cp.wait_stack(name, timeout=240)
        finally:
            stop_process(proc, 20)


@pytest.mark.parametrize(
    ("transport", "collector"),
    [
        ("POLL_SERVER_CFN", "cfn"),
        ("POLL_SERVER_HEAT", "heat"),
        ("POLL_TEMP_URL", "request"),
        ("ZAQAR_MESSAGE", "heat"),
    ],
)
def test_chain_bootstraps_from_os_collect_config_and_signals_every_transport(
    cp: ControlPlane, tmp_path: Path, transport: str, collector: str
) -> None:
    """The attribute alone brings the chain up on its transport; every signal transport comes back."""
    name = f"boot-{transport.lower().replace('_', '-')}"
    assert cp.create(name, stack(transport)).status == 201
    chain = HeatChain(tmp_path / "server").setup()
    log = tmp_path / "chain.log"
    result = _run_chain(cp, name, chain, log)
    assert result["status"] == "CREATE_COMPLETE", (result, log.read_text()[-4000:])
    outputs = cp.outputs(name)
    assert outputs["occ"]["collectors"] == [collector, "local"]
    assert outputs["cfn_signal"] == "CFN_SIGNAL/CFN_SIGNAL"
    assert outputs["temp_url_signal"] == "TEMP_URL_SIGNAL/TEMP_URL_SIGNAL"
    assert outputs["heat_signal"] == "HEAT_SIGNAL/HEAT_SIGNAL"  # heat-config-notify via Keystone + Heat API
    assert outputs["zaqar_signal"] == "ZAQAR_SIGNAL/HEAT_SIGNAL"
    assert outputs["no_signal"] is None
    # The chain rendered its own config from the attribute and polls with that collector.
    conf = (chain.work / "etc/os-collect-config.conf").read_text()
    assert f"collectors = {collector}" in conf and f"[{collector}]" in conf
    # Heat's chain ran each deployment once (its marker files name the derived configs)...
    assert len(chain.deployed()) == len(SIGNALS)
    # ...and the server is now Heat's: our agent's enrolment is closed.
    box = next(r for r in cp.api("GET", f"/v1/stacks/{name}/resources").body if r["name"] == "box")
    server = cp.api("GET", f"/v1/servers/{box['physical_id']}").body
    assert server["status"] == "HEAT_COMPATIBLE"
    events = cp.api("GET", f"/v1/stacks/{name}/events").body
    if transport == "ZAQAR_MESSAGE":
        assert any(e["status"] == "WARNING" and "no Zaqar" in e["reason"] for e in events)


def test_credentials_of_one_server_read_nothing_else(cp: ControlPlane) -> None:
    """A server's Keystone user and EC2 key read its own document only; forged ones are refused."""
    assert cp.create("creds", stack("POLL_SERVER_HEAT")).status == 201
    occ = wait_until(lambda: cp.outputs("creds").get("occ"), "no os_collect_config output", 60)
    heat = occ["heat"]
    login = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"id": heat["user_id"], "password": "x"}},
            },
            "scope": {"project": {"id": heat["project_id"]}},
        }
    }
    wrong = cp.api("POST", "/v1/heat/keystone/v3/auth/tokens", login, token=None)
    assert wrong.status == 401 and wrong.body["error"]["where"].startswith("auth.identity")
    login["auth"]["identity"]["password"]["user"]["password"] = heat["password"]  # type: ignore[index]
    good = cp.api("POST", "/v1/heat/keystone/v3/auth/tokens", login, token=None)
    assert good.status == 201
    token = good.headers["X-Subject-Token"]
    path = f"/v1/heat/orchestration/v1/x/stacks/{heat['stack_id']}/resources/box"
    meta = cp.api("GET", f"{path}/metadata", token=None, headers={"X-Auth-Token": token})
    assert meta.status == 200 and len(meta.body["metadata"]["deployments"]) == len(SIGNALS)
    # A server's user may not signal; a forged token reads nothing.
    assert cp.api("POST", f"{path}/signal", {}, token=None, headers={"X-Auth-Token": token}).status == 403
    forged = token[:-4] + ("0000" if not token.endswith("0000") else "1111")
    assert cp.api("GET", f"{path}/metadata", token=None, headers={"X-Auth-Token": forged}).status == 401
