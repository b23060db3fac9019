"""examples/<tool>.yaml end to end: the control plane, real agents and the real tools.

puppet, ansible and salt run for real. chef runs against the FAKE client of
tests/tools/fake_chef_client.py (no Chef client can be installed here, docs/hooks.md):
it checks what reaches the client and that its outputs come back, not Chef itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.hookrun import TOOL_PATHS, require
from tests.support.processes import EXAMPLES

FAKE_CHEF = Path(__file__).resolve().parents[1] / "tools" / "fake_chef_client.py"


@pytest.fixture(scope="module")
def tools_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    """A control plane whose local agents find every tool (chef: the fake client)."""
    for path in TOOL_PATHS.values():
        require(path)
    tmp = tmp_path_factory.mktemp("examples")
    chef = tmp / "bin" / "chef-client"
    chef.parent.mkdir()
    shutil.copy(FAKE_CHEF, chef)
    env = {k: str(v) for k, v in TOOL_PATHS.items()}
    env.update(
        ANNEAL_CHEF_CLIENT=str(chef),
        FAKE_CHEF_RECORD=str(tmp / "chef-record.jsonl"),
        FAKE_CHEF_OUTPUTS=json.dumps({"motd_path": "written by the fake chef-client"}),
    )
    cp = start_control_plane(tmp, env=env)
    yield cp, tmp
    stop_control_plane(cp)


@pytest.mark.parametrize("tool", ["puppet", "ansible", "salt"])
def test_example_creates_then_deletes_with_the_real_tool(tools_cp, tool):
    """CREATE writes the file and returns its path; deleting the stack runs the DELETE config."""
    cp, tmp = tools_cp
    workdir = tmp / tool
    params = {"workdir": str(workdir), "greeting": f"hi-{tool}"}
    assert 201 == cp.create(tool, EXAMPLES / f"{tool}.yaml", params=params).status
    stack = cp.wait_stack(tool, timeout=300)
    assert stack["status"] == "CREATE_COMPLETE", stack["status_reason"]
    outputs = cp.outputs(tool)
    assert outputs["motd_path"].strip() == str(workdir / "motd")
    assert (workdir / "motd").read_text().strip() == f"hi-{tool} from {tool} (CREATE)"

    assert 202 == cp.api("DELETE", f"/v1/stacks/{tool}").status
    assert cp.wait_stack(tool, timeout=300)["status"] == "DELETED"
    assert not (workdir / "motd").exists()
    assert (workdir / "removed").read_text().strip() == f"removed by {tool}"


def test_chef_example_through_the_fake_client(tools_cp):
    """chef.yaml: the run lists and attributes reach the (fake) client; its output comes back."""
    cp, tmp = tools_cp
    params = {
        "workdir": str(tmp / "chef"),
        "greeting": "hi-chef",
        "kitchen_path": str(EXAMPLES / "chef" / "kitchen"),
    }
    assert 201 == cp.create("chef", EXAMPLES / "chef.yaml", params=params).status
    stack = cp.wait_stack("chef", timeout=300)
    assert stack["status"] == "CREATE_COMPLETE", stack["status_reason"]
    assert cp.outputs("chef")["motd_path"] == "written by the fake chef-client"
    assert 202 == cp.api("DELETE", "/v1/stacks/chef").status
    assert cp.wait_stack("chef", timeout=300)["status"] == "DELETED"
    runs = [json.loads(line) for line in (tmp / "chef-record.jsonl").read_text().splitlines()]
    (install,) = [r for r in runs if r["node"]["run_list"] == ["recipe[motd::default]"]]
    assert (install["deploy_action"], install["node"]["greeting"]) == ("CREATE", "hi-chef")
    assert f"cookbook_path ['{EXAMPLES / 'chef' / 'kitchen' / 'cookbooks'}']" in install["client_rb"]
    assert runs[-1]["node"]["run_list"] == ["recipe[motd::remove]"]
    assert runs[-1]["deploy_action"] == "DELETE"
