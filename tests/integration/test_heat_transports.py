"""Every signal transport Heat names, in one stack, with our agent (local, real processes).

CFN_SIGNAL, HTTP (ours), TEMP_URL_SIGNAL (no Swift here: a PUT capability URL), HEAT_SIGNAL
(our agent signals with its own credential), ZAQAR_SIGNAL (no Zaqar: served as HEAT_SIGNAL,
said in an event) and NO_SIGNAL. Heat's own chain sending them is in test_heat_bootstrap.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

TRANSPORTS = ("CFN_SIGNAL", "HTTP", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "ZAQAR_SIGNAL", "NO_SIGNAL")


def every_transport_stack(server: str = "box: {type: OS::Heat::DeployedServer}") -> str:
    """One script deployment per signal transport on one server; each writes its transport as an output."""
    deployments = "\n".join(
        f"""  dep_{t.lower()}:
    type: OS::Heat::SoftwareDeployment
    properties: {{config: {{get_resource: cfg}}, server: {{get_resource: box}}, signal_transport: {t},
                 name: {t.lower()}, input_values: {{WANT: {t}}}}}"""
        for t in TRANSPORTS
    )
    outputs = "\n".join(f"  {t.lower()}: {{value: {{get_attr: [dep_{t.lower()}, got]}}}}" for t in TRANSPORTS)
    return f"""
heat_template_version: 2018-08-31
resources:
  {server}
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
{outputs}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("transports"))
    yield plane
    stop_control_plane(plane)


def test_every_signal_transport_completes_in_one_stack(cp: ControlPlane) -> None:
    """All six transports complete; each deployment's output came back over its own transport."""
    cp.create_stack("alltransports", every_transport_stack(), timeout=180)
    outputs = cp.outputs("alltransports")
    assert outputs["cfn_signal"] == "CFN_SIGNAL/CFN_SIGNAL"
    assert outputs["http"] == "HTTP/HTTP"
    assert outputs["temp_url_signal"] == "TEMP_URL_SIGNAL/TEMP_URL_SIGNAL"
    assert outputs["heat_signal"] == "HEAT_SIGNAL/HEAT_SIGNAL"
    assert outputs["zaqar_signal"] == "ZAQAR_SIGNAL/HEAT_SIGNAL"  # the stand-in the hook was told
    assert outputs["no_signal"] is None  # as in Heat: complete at once, outputs never come back
    events = cp.api("GET", "/v1/stacks/alltransports/events").body
    warnings = {e["resource_name"]: e["reason"] for e in events if e["status"] == "WARNING"}
    assert "no Zaqar" in warnings["dep_zaqar_signal"]
    assert "no Swift store is configured" in warnings["dep_temp_url_signal"]
    deps = {d["name"]: d for d in cp.api("GET", "/v1/deployments?stack=alltransports").body}
    assert {d["status"] for d in deps.values()} == {"COMPLETE"}


def test_heat_signal_inputs_carry_the_deployments_own_user(cp: ControlPlane) -> None:
    """A HEAT_SIGNAL deployment gets Heat's deploy_* credential inputs; the password is masked."""
    deps = cp.api("GET", "/v1/deployments?stack=alltransports").body
    dep = next(d for d in deps if d["name"] == "heat_signal")
    shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body["input_values"]
    assert shown["deploy_user_id"] == f"deployment-{dep['id']}"
    assert shown["deploy_auth_url"] == f"{cp.url}/v1/heat/keystone/v3"
    assert shown["deploy_password"] == "******"
    assert "deploy_signal_id" not in shown
    temp = next(d for d in deps if d["name"] == "temp_url_signal")
    assert cp.api("GET", f"/v1/deployments/{temp['id']}").body["input_values"]["deploy_signal_verb"] == "PUT"
