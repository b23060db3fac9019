"""R03: SIGKILL of the agent mid-hook, again and again.

Each trial deploys one script that records its start, sleeps, records its end; the agent
(only its pid) is killed at a uniform random offset into the hook and started again.
Run-once configs must never run twice and end FAILED "interrupted by agent restart" with
the output they had printed (or COMPLETE when the kill came after the signal);
`rerun_on_interrupt: true` configs run again with the same ANNEAL_IDEMPOTENCY_KEY and end
COMPLETE. No trial may hang. R03_KILLS sets the number of trials (50 for the catalogue's
figure; CI runs 6, which cover each kind of trial, and prints its figures).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.agents import enrol_agent, stop_agent
from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

pytestmark = pytest.mark.catalogue("R03")

KILLS = int(os.environ.get("R03_KILLS", "6"))
HOOK_SECONDS = 2.0
TEMPLATE = one_script_deployment(
    f"""
    #!/bin/sh
    echo "$ANNEAL_IDEMPOTENCY_KEY $ANNEAL_RUN_ATTEMPT" >> "$DIR/starts-$STEP"
    echo "started $STEP"
    sleep {HOOK_SECONDS}
    echo "$ANNEAL_IDEMPOTENCY_KEY" >> "$DIR/ends-$STEP"
    """,
    params={"dir": "string", "step": "string", "rerun": "boolean, default: false"},
    inputs={"DIR": "{get_param: dir}", "STEP": "{get_param: step}"},
    options="{rerun_on_interrupt: {get_param: rerun}}",
    server="r03box",
)


def _lines(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_agent_killed_mid_hook_runs_nothing_twice_and_never_hangs(tmp_path: Path) -> None:
    """Killed mid-hook, the agent never runs a config twice nor hangs; rerun ones rerun with the same key."""
    rng = random.Random(os.environ.get("R03_SEED", "r03"))
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    state = tmp_path / "agent-state"
    argv = enrol_agent(cp, "r03box", state)
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 (closed in finally)
    agent = subprocess.Popen(argv, stdout=log, stderr=log)
    figures = {
        "trials": 0,
        "killed_mid_hook": 0,
        "double_runs": 0,
        "silent_hangs": 0,
        "reruns": 0,
        "interrupted_failed": 0,
        "output_kept": 0,
        "complete": 0,
    }
    problems: list[str] = []
    try:
        for trial in range(KILLS):
            rerun = trial % 2 == 1
            step = f"t{trial}"
            params = {"dir": str(work), "step": step, "rerun": str(rerun).lower()}
            assert 201 == cp.create(f"r03-{trial}", TEMPLATE, params=params).status
            # Polled often: the kill must land at a random instant after the hook started.
            wait_until((work / f"starts-{step}").exists, f"trial {trial}: the hook never started", 60, 0.02)
            offset = rng.uniform(0, HOOK_SECONDS * 1.1)
            time.sleep(offset)
            mid_hook = not (work / f"ends-{step}").exists()
            agent.send_signal(signal.SIGKILL)  # the agent only: its hook runs in its own session
            agent.wait(30)
            agent = subprocess.Popen(argv, stdout=log, stderr=log)
            figures["trials"] += 1
            figures["killed_mid_hook"] += mid_hook
            try:
                stack = cp.wait_stack(f"r03-{trial}", timeout=90)
            except AssertionError:
                figures["silent_hangs"] += 1
                problems.append(f"trial {trial}: stack still in progress")
                continue
            starts = _lines(work / f"starts-{step}")
            keys = {line.split()[0] for line in starts}
            dep = cp.api("GET", f"/v1/deployments?stack=r03-{trial}").body[0]
            detail = cp.api("GET", f"/v1/deployments/{dep['id']}").body
            if rerun:
                figures["reruns"] += len(starts) - 1
                if len(starts) > 2 or len(keys) != 1 or stack["status"] != "CREATE_COMPLETE":
                    problems.append(
                        f"trial {trial} (rerun): {starts} {stack['status']} {detail['status_reason']}"
                    )
            else:
                figures["double_runs"] += len(starts) > 1
                if len(starts) != 1:
                    problems.append(f"trial {trial}: ran {len(starts)} times")
                if stack["status"] == "CREATE_FAILED":
                    figures["interrupted_failed"] += 1
                    # What the hook and its program had printed survives (streamed to the state
                    # dir as it came): the program's stdout once it had time to print it.
                    if (
                        "interrupted by agent restart" not in detail["deploy_stderr"]
                        or "stderr before the interruption" not in detail["deploy_stderr"]
                        or "running" not in detail["deploy_stderr"]
                        or (offset >= 1.0 and f"started {step}" not in detail["deploy_stdout"])
                    ):
                        problems.append(
                            f"trial {trial}: FAILED without the reason or the output: {detail['deploy_stdout']!r} {detail['deploy_stderr']!r}"
                        )
                    figures["output_kept"] += f"started {step}" in detail["deploy_stdout"]
                elif stack["status"] != "CREATE_COMPLETE":
                    problems.append(f"trial {trial}: {stack['status']}")
            figures["complete"] += stack["status"] == "CREATE_COMPLETE"
    finally:
        print(f"\nR03 figures ({KILLS} kills, hook {HOOK_SECONDS:g} s): {figures}")
        stop_agent(agent, 30)
        log.close()
        stop_control_plane(cp)
    assert [] == problems
    assert 0 == figures["double_runs"] and 0 == figures["silent_hangs"]
    assert figures["killed_mid_hook"] >= 1, figures  # the test must actually interrupt hooks
