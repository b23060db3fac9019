"""Heat's own hook executables (heat-agents 13.0.0 sdist, unchanged) run by our agents end to end."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.hookrun import HEAT_AGENTS, require
from tests.support.templates import one_script_deployment

TEMPLATE = one_script_deployment(
    """
    #!/bin/sh
    echo "running for $who"
    printf 'hello %s' "$who" > "$heat_outputs_path.greeting"
    """,
    version="2018-08-31",
    inputs={"who": "world"},
    outputs=["greeting"],
    stack_outputs={"greeting": "{get_attr: [dep, greeting]}", "stdout": "{get_attr: [dep, deploy_stdout]}"},
    box="srv",
)

TRAVERSAL = one_script_deployment(
    "#!/bin/sh\necho never\n",
    version="2018-08-31",
    outputs=["../../../../etc/hostname"],
    stack_outputs={},
    box="srv",
)


@pytest.fixture(scope="module")
def heat_cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane whose agents find Heat's script hook, unchanged, in their hook dir."""
    source = require(HEAT_AGENTS / "heat-config-script" / "install.d" / "hook-script.py")
    tmp = tmp_path_factory.mktemp("heat-hooks")
    hooks = tmp / "hooks"
    hooks.mkdir()
    shutil.copy2(source, hooks / "script")  # installed as Heat's element does: named after the group
    env = {"HEAT_SCRIPT_WORKING": str(tmp / "working"), "HEAT_SCRIPT_OUTPUTS": str(tmp / "outputs")}
    cp = start_control_plane(tmp, f"--agent-arg=--hook-dir={hooks}", env=env)
    yield cp
    stop_control_plane(cp)


def test_heat_script_hook_runs_unchanged(heat_cp: ControlPlane) -> None:
    """Heat's hook-script.py from the sdist is run for group script: input in, output back."""
    heat_cp.create_stack("heat-script", TEMPLATE)
    outputs = heat_cp.outputs("heat-script")
    assert outputs["greeting"] == "hello world"
    assert outputs["stdout"] == "running for world\n"
    working = Path(heat_cp.data_dir).parent / "working"
    assert list(working.iterdir()), "Heat's hook did not write its script where HEAT_SCRIPT_WORKING says"


def test_output_names_that_leave_the_outputs_dir_are_refused(heat_cp: ControlPlane) -> None:
    """Heat's hooks open <heat_outputs_path>.<name> unchecked: such a deployment fails, unrun."""
    heat_cp.create("traversal", TRAVERSAL)
    assert heat_cp.wait_stack("traversal")["status"] == "CREATE_FAILED"
    (failure,) = heat_cp.api("GET", "/v1/stacks/traversal/failures").body
    assert "not safe in a file name" in failure["deploy_stderr"]
    assert "never" not in failure["deploy_stdout"]
