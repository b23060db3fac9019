"""Heat's software config, software deployment and template routes through the real openstack CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, stop_control_plane
from tests.support.openstack import (
    GREETER,
    PROJECT,
    OpenStack,
    start_heat_plane,
    write_template,
)
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    """One control plane with the Heat listener for this module, and the Heat API's root URL."""
    cp, url = start_heat_plane(tmp_path_factory.mktemp("heat-api"))
    yield cp, url
    stop_control_plane(cp)


@pytest.fixture(scope="module")
def osc(plane: tuple[ControlPlane, str]) -> OpenStack:
    """The real openstack CLI pointed at the Heat endpoint of PROJECT with the admin token."""
    return OpenStack(plane[0], f"{plane[1]}/v1/{PROJECT}")


SHOUT = """#!/bin/sh
echo "standalone says $GREETING"
printf '%s!' "$GREETING" > "$heat_outputs_path.shout"
"""


def test_software_config_and_deployment_outside_a_stack_run_on_the_servers_agent(
    osc: OpenStack, tmp_path: Path
) -> None:
    """`software config create`, then `software deployment create` on a stack's server: its agent runs it and
    `deployment output show` reads the outputs; list, show, metadata and delete behave as Heat's."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-sw"})
    osc.ok("stack", "create", "-t", path, "--wait", "host")
    script = write_template(tmp_path, "shout.sh", SHOUT)
    definition = write_template(
        tmp_path, "shout.yaml", "inputs: [{name: GREETING}]\noutputs: [{name: shout}]\n"
    )
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
    wait_until(
        lambda: (
            osc.get(f"/software_deployments/{made['id']}")["software_deployment"]["status"] != "IN_PROGRESS"
        ),
        "the standalone deployment never finished",
        60,
        interval=0.5,
    )
    done = osc.json("software", "deployment", "show", made["id"], "--long")
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


def test_template_catalogue_answers_what_heat_would(osc: OpenStack, tmp_path: Path) -> None:
    """Template validate, resource types, template versions and functions, build info through the openstack CLI."""
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "cli-never"})
    checked = json.loads(osc.ok("orchestration", "template", "validate", "-t", path, "-f", "json"))
    assert checked["Description"] == "one script on one server"
    assert (
        checked["Parameters"]["who"]["Type"] == "String"
        and checked["Parameters"]["who"]["Default"] == "world"
    )
    bad = write_template(
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
