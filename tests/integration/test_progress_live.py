"""Live progress end to end: a running deployment shows its output before it finishes."""

from __future__ import annotations

import subprocess

from tests.support.controlplane import ControlPlane
from tests.support.processes import BIN
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

STEPS = 8


def template(steps: int = STEPS) -> str:
    """A script printing *steps* lines `step i of 8`, a second apart, then one on stderr."""
    script = f"""
    #!/bin/sh
    for i in $(seq 1 {steps}); do echo "step $i of {STEPS}"; sleep 1; done
    echo "oops on stderr" >&2
    """
    return one_script_deployment(script, version="2018-08-31", box="srv")


TEMPLATE = template()


def test_running_deployment_shows_progress_and_log_follows_it(control_plane: ControlPlane) -> None:
    """While the script runs, show has its output tail (status still IN_PROGRESS); log --follow
    prints every line once, live, and ends with the result."""
    cp = control_plane
    assert 201 == cp.create("live", TEMPLATE).status
    (dep,) = wait_until(lambda: cp.api("GET", "/v1/deployments?stack=live").body, "the deployment", 120)
    follow = subprocess.Popen(
        [str(BIN / "anneal"), "deployment", "log", dep["id"], "--follow", "--timeout", "300"],
        env=cp.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def script_output_shown():
            d = cp.api("GET", f"/v1/deployments/{dep['id']}").body
            return d if "step 1 of 8" in (d["progress"] or {}).get("output_tail", "") else None

        shown = wait_until(script_output_shown, "the script's output in the progress", 120)
        assert shown["status"] == "IN_PROGRESS"
        assert shown["progress"]["seq"] >= 1
        table = cp.cli("deployment", "show", dep["id"])
        assert table.returncode == 0 and "progress" in table.stdout
        out, err = follow.communicate(timeout=300)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0, err
    for i in range(1, STEPS + 1):
        assert out.count(f"step {i} of {STEPS}") == 1, out
    assert "oops on stderr" in out
    assert out.rstrip().splitlines()[-1].startswith(f"deployment {dep['id']}: COMPLETE")
    final = cp.api("GET", f"/v1/deployments/{dep['id']}").body
    assert final["status"] == "COMPLETE"
    assert final["progress"]["output_bytes"] >= len("step 1 of 8\n") * STEPS


def test_log_of_a_finished_deployment_prints_its_result(control_plane: ControlPlane) -> None:
    """`deployment log` of a finished deployment prints its output and status, and exits."""
    cp = control_plane
    cp.create("done", template(1))
    assert cp.wait_stack("done")["status"] == "CREATE_COMPLETE"
    (dep,) = cp.api("GET", "/v1/deployments?stack=done").body
    result = cp.cli("deployment", "log", dep["id"])
    assert result.returncode == 0, result.stderr
    assert "step 1 of 8" in result.stdout
    assert f"deployment {dep['id']}: COMPLETE" in result.stdout
