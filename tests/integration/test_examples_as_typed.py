"""Every template in examples/ runs with the commands its header comment gives, typed into bash.

One control plane starts an agent per server (`--provisioner local`, as the README's tour
does) with no tool settings in its environment: the hooks find puppet on PATH and
ansible-runner and salt-call in this checkout's .venv/tools, where `make tools` put them.
chef.yaml runs against the FAKE client of tests/tools/fake_chef_client.py, put on PATH as
`chef-client`: no Chef or Cinc client can be installed here (docs/hooks.md).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN, EXAMPLES, ROOT

TEMPLATES = sorted(EXAMPLES.glob("*.yaml"))
FAKE_CHEF = ROOT / "tests" / "tools" / "fake_chef_client.py"
#: Empty: the hooks look the tools up themselves (PATH, then .venv/tools), as after `make tools`.
NO_TOOL_SETTINGS = {
    "ANNEAL_PUPPET": "",
    "ANNEAL_ANSIBLE_RUNNER": "",
    "ANNEAL_SALT_CALL": "",
    "ANNEAL_CHEF_CLIENT": "",
}


def header_commands(template: Path) -> list[str]:
    """The `$ command` lines of the comment block that opens *template*."""
    commands = []
    for line in template.read_text().splitlines():
        if not line.startswith("#"):
            break
        if found := re.fullmatch(r"#\s+\$ (.+)", line):
            commands.append(found.group(1))
    return commands


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_example_header_creates_updates_and_deletes_one_stack(template: Path) -> None:
    """Each example's header gives create, update and delete commands for one stack, create first, delete last."""
    commands = [shlex.split(c) for c in header_commands(template)]
    assert commands, f"{template.name}: no `#   $ anneal ...` lines in its header comment"
    assert ["anneal", "stack", "create"] == commands[0][:3] and ["anneal", "stack", "delete"] == commands[-1][
        :3
    ]
    assert any(c[:3] == ["anneal", "stack", "update"] for c in commands)
    assert {c[3] for c in commands if c[:2] == ["anneal", "stack"]} == {commands[0][3]}


@pytest.fixture(scope="module")
def examples_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane with local agents and no tool settings; a fake chef-client first on PATH."""
    tmp = tmp_path_factory.mktemp("examples-as-typed")
    fake = tmp / "bin" / "chef-client"
    fake.parent.mkdir()
    shutil.copy(FAKE_CHEF, fake)
    env = NO_TOOL_SETTINGS | {
        "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
        "FAKE_CHEF_RECORD": str(tmp / "chef-record.jsonl"),
        "FAKE_CHEF_OUTPUTS": json.dumps({"motd_path": "written by the fake chef-client"}),
    }
    cp = start_control_plane(tmp, env=env)
    yield cp
    stop_control_plane(cp)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_example_runs_as_its_header_says(examples_cp: ControlPlane, template: Path) -> None:
    """Every command in the example's header succeeds from the top directory; the stack is gone at the end."""
    env = examples_cp.env() | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for command in header_commands(template):
        run = subprocess.run(
            ["bash", "-c", command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert 0 == run.returncode, f"`{command}` exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    stack = shlex.split(header_commands(template)[0])[3]
    assert 404 == examples_cp.api("GET", f"/v1/stacks/{stack}").status
