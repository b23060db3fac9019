"""What a hook printed before the agent was killed reaches the FAILED signal.

The built-in script hook streams its program's stdout and stderr as they come; the agent tees
them to its state dir, so after a kill -9 mid-hook the "interrupted by agent restart" result
carries the program's own lines: stdout in ``deploy_stdout``, everything in ``deploy_stderr``;
and the program itself, which runs in a session of its own below the hook, is stopped.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.support.agents import enrol_agent, stop_agent
from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_file, wait_until

SH = """
#!/bin/sh
echo "line one on stdout"
echo "line two on stderr" >&2
echo $$ > "$DIR/pid"
touch "$DIR/printed"
sleep 600
"""
PYTHON = """
#!/usr/bin/env python3
import os, sys, time
print("line one on stdout")
print("line two on stderr", file=sys.stderr)
open(os.path.join(os.environ["DIR"], "pid"), "w").write(str(os.getpid()))
open(os.path.join(os.environ["DIR"], "printed"), "w").close()
time.sleep(600)
"""


def template(script: str) -> str:
    """*script* on killbox, its DIR the stack's `dir`."""
    return one_script_deployment(
        script, params={"dir": "string"}, inputs={"DIR": "{get_param: dir}"}, server="killbox"
    )


def _teed(state: Path) -> list[str]:
    """The lines of the hooks' output the agent keeps in *state* while they run."""
    return [
        line
        for path in (state / "output").glob("*")
        for line in path.read_text(errors="replace").splitlines()
    ]


def test_output_printed_before_a_kill_is_in_the_interrupted_signal(tmp_path: Path) -> None:
    """kill -9 of the agent while a script sleeps: FAILED 137 carries the lines it printed (sh and Python)."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    argv = enrol_agent(cp, "killbox", tmp_path / "state")
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 (closed in finally)
    agent = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        for name, script in (("sh", SH), ("python", PYTHON)):
            work = tmp_path / name
            work.mkdir()
            assert 201 == cp.create(name, template(script), params={"dir": str(work)}).status
            wait_file(work / "printed", 120)
            wait_until(  # the lines travel hook -> agent -> state dir
                lambda: {"line one on stdout", "line two on stderr"} <= set(_teed(tmp_path / "state")),
                f"{name}: the lines never reached the state dir",
                30,
                0.05,
            )
            agent.send_signal(signal.SIGKILL)
            agent.wait(30)
            agent = subprocess.Popen(argv, stdout=log, stderr=log)
            assert "CREATE_FAILED" == cp.wait_stack(name, timeout=120)["status"]
            dep = cp.api("GET", f"/v1/deployments?stack={name}").body[0]
            detail = cp.api("GET", f"/v1/deployments/{dep['id']}").body
            assert 137 == detail["deploy_status_code"], name
            assert "interrupted by agent restart" in detail["deploy_stderr"], name
            assert "line one on stdout" in detail["deploy_stdout"], (name, detail["deploy_stdout"])
            assert "line two on stderr" in detail["deploy_stderr"], (name, detail["deploy_stderr"])
            # The program (in a session of its own, below the hook) was stopped too, not left behind.
            program = Path("/proc") / (work / "pid").read_text().strip()
            gone = f"{name}: the interrupted program still runs"
            wait_until(lambda: not program.exists(), gone, 30)  # noqa: B023 (called within this iteration)
    finally:
        stop_agent(agent)
        log.close()
        stop_control_plane(cp)
