"""Retry policies: a failed attempt runs again in the same generation, every attempt is kept and shown."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.support.agents import enrol_agent, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import script_group
from tests.support.waiting import wait_until

#: Counts its runs in DIR/runs, keeps each attempt's key and number, fails until run FIX_AT.
FLAKY = """#!/bin/sh
echo "$ANNEAL_IDEMPOTENCY_KEY $ANNEAL_RUN_ATTEMPT" >> {dir}/runs
n=$(wc -l < {dir}/runs)
echo "run $n"
if [ "$n" -lt {fix_at} ]; then echo "disk not ready ($n)" >&2; exit {code}; fi
echo done
"""


def stack(work: Path, retry: dict[str, Any], *, fix_at: int, code: int = 3) -> str:
    """One script deployment that fails with *code* until its run *fix_at*, under *retry*."""
    script = FLAKY.format(dir=work, fix_at=fix_at, code=code)
    resources: dict[str, Any] = {
        "srv": {"type": "OS::Heat::DeployedServer"},
        "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": script}},
        "dep": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "cfg"},
                "server": {"get_resource": "srv"},
                "retry": retry,
            },
        },
    }
    return json.dumps({"heat_template_version": "2018-08-31", "resources": resources})


def runs(work: Path) -> list[list[str]]:
    """Each run's idempotency key and ANNEAL_RUN_ATTEMPT, in order."""
    return [line.split() for line in (work / "runs").read_text().splitlines()]


def the_deployment(cp: ControlPlane, name: str) -> dict[str, Any]:
    (listed,) = cp.api("GET", f"/v1/deployments?stack={name}").body
    return dict(cp.api("GET", f"/v1/deployments/{listed['id']}").body)


def test_a_flaky_script_converges_by_itself_and_shows_three_attempts(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Fails twice then succeeds: retries 3 ends COMPLETE after 3 runs of one key, all 3 attempts shown."""
    cp = control_plane
    retry = {"retries": 3, "backoff": {"initial": 2, "factor": 1}}
    assert 201 == cp.create("flaky", stack(tmp_path, retry, fix_at=3)).status

    def pending() -> dict[str, Any] | None:
        if not cp.api("GET", "/v1/deployments?stack=flaky").body:
            return None  # not made yet
        dep, st = the_deployment(cp, "flaky"), cp.api("GET", "/v1/stacks/flaky").body
        tail = str((dep.get("progress") or {}).get("output_tail"))
        return (
            st if "attempt 2 (retry 1 of 3) in 2 s" in tail and st["status"] == "CREATE_IN_PROGRESS" else None
        )

    wait_until(pending, "the stack in progress, saying a retry is pending", 60, 0.2)
    cp.settled("flaky", "CREATE_COMPLETE")
    dep = the_deployment(cp, "flaky")
    assert ("COMPLETE", "run 3\ndone\n") == (dep["status"], dep["deploy_stdout"])
    assert [[1, 3], [2, 3], [3, 0]] == [[a["attempt"], a["status_code"]] for a in dep["attempts"]]
    assert "disk not ready (2)" in dep["attempts"][1]["stderr"]
    (key,) = {k for k, _ in runs(tmp_path)}
    assert [[key, "1"], [key, "2"], [key, "3"]] == runs(tmp_path)
    shown = cp.cli("deployment", "show", dep["id"], "--attempts", "-f", "json")
    assert 0 == shown.returncode, shown.stderr
    assert [1, 2, 3] == [a["attempt"] for a in json.loads(shown.stdout)]
    table = cp.cli("deployment", "show", dep["id"], "--attempts")
    assert "disk not ready (1)" in table.stdout and "disk not ready (2)" in table.stdout


def test_exhausted_retries_fail_with_every_attempts_reason(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Retries 2 of a script that never recovers: 3 runs, FAILED naming each attempt's code and stderr."""
    cp = control_plane
    cp.create_stack(
        "never",
        stack(tmp_path, {"retries": 2, "backoff": {"initial": 0.2}}, fix_at=99),
        expect="CREATE_FAILED",
    )
    dep = the_deployment(cp, "never")
    assert 3 == len(runs(tmp_path))
    assert (
        "failed after 3 attempts; attempt 1: status code 3: disk not ready (1); attempt 2: status code 3: "
        "disk not ready (2); attempt 3: status code 3: disk not ready (3)"
    ) == dep["status_reason"]


def test_a_failure_retry_on_does_not_name_runs_once(control_plane: ControlPlane, tmp_path: Path) -> None:
    """retry_on [7]: exit code 3 is not retried; one run, FAILED with Heat's reason."""
    cp = control_plane
    retry = {"retries": 3, "retry_on": [7], "backoff": {"initial": 0.2}}
    cp.create_stack("picky", stack(tmp_path, retry, fix_at=99), expect="CREATE_FAILED")
    dep = the_deployment(cp, "picky")
    assert 1 == len(runs(tmp_path))
    assert "Deployment exited with non-zero status code: 3" == dep["status_reason"]
    assert [1] == [a["attempt"] for a in dep["attempts"]]


def test_a_bad_retry_policy_is_refused_naming_its_path(control_plane: ControlPlane, tmp_path: Path) -> None:
    """retries out of range and an unknown retry_on word are 400s naming the path; nothing is created."""
    cp = control_plane
    for retry, where in (
        ({"retries": 99}, "resources.dep.properties.retry.retries"),
        ({"retries": 1, "retry_on": ["sometimes"]}, "resources.dep.properties.retry.retry_on[0]"),
        ({"retries": 1, "backoff": {"factor": 0.5}}, "resources.dep.properties.retry.backoff.factor"),
    ):
        resp = cp.create("bad", stack(tmp_path, retry, fix_at=1))
        assert (400, where) == (resp.status, resp.body["error"]["where"]), resp.body
    assert [] == cp.api("GET", "/v1/stacks").body


def test_a_groups_policy_applies_to_every_member(control_plane: ControlPlane, tmp_path: Path) -> None:
    """A SoftwareDeploymentGroup's retry: each member fails once, runs again, and ends COMPLETE with 2 attempts."""
    cp = control_plane
    script = f"""
    #!/bin/sh
    echo run >> {tmp_path}/"$ANNEAL_IDEMPOTENCY_KEY"
    [ "$(wc -l < {tmp_path}/"$ANNEAL_IDEMPOTENCY_KEY")" -ge 2 ] || exit 4
    """
    text = script_group(script).replace(
        "      servers:", "      retry: {retries: 2, backoff: {initial: 0.2}}\n      servers:"
    )
    cp.create_stack("grp", text)
    members = cp.api("GET", "/v1/deployments?stack=grp").body
    assert 2 == len(members)
    for member in members:
        dep = cp.api("GET", f"/v1/deployments/{member['id']}").body
        assert ("COMPLETE", [[1, 4], [2, 0]]) == (
            dep["status"],
            [[a["attempt"], a["status_code"]] for a in dep["attempts"]],
        )


def test_an_attempt_past_attempt_timeout_is_stopped_and_run_again(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """retry_on [timeout], attempt_timeout 2: the first run hangs, is stopped, and the second completes."""
    cp = control_plane
    script = f"""#!/bin/sh
echo "$ANNEAL_RUN_ATTEMPT" >> {tmp_path}/runs
if [ "$ANNEAL_RUN_ATTEMPT" = 1 ]; then echo hanging; sleep 120; fi
echo fine
"""
    retry = {"retries": 2, "retry_on": ["timeout"], "attempt_timeout": 2, "backoff": {"initial": 0.2}}
    text = json.loads(stack(tmp_path, retry, fix_at=1))
    text["resources"]["cfg"]["properties"]["config"] = script
    cp.create_stack("slow", json.dumps(text))
    dep = the_deployment(cp, "slow")
    assert ["1", "2"] == (tmp_path / "runs").read_text().split()
    assert ("COMPLETE", "fine\n") == (dep["status"], dep["deploy_stdout"])
    assert [(1, True), (2, False)] == [(a["attempt"], a["timed_out"]) for a in dep["attempts"]]
    assert "hanging" in dep["attempts"][0]["stdout"]


def test_an_attempt_cut_short_by_an_agent_kill_runs_again_with_retry_on_interrupted(tmp_path: Path) -> None:
    """retry_on [interrupted]: the agent is SIGKILLed mid-hook; started again, it runs attempt 2 of the same key."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    state, work = tmp_path / "agent-state", tmp_path / "work"
    work.mkdir()
    argv = enrol_agent(cp, "retrybox", state)
    agent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        script = f"""#!/bin/sh
echo "$ANNEAL_IDEMPOTENCY_KEY $ANNEAL_RUN_ATTEMPT" >> {work}/runs
[ "$ANNEAL_RUN_ATTEMPT" = 1 ] && sleep 3
echo fine
"""
        text = json.loads(stack(work, {"retries": 1, "retry_on": ["interrupted"]}, fix_at=1))
        text["resources"]["cfg"]["properties"]["config"] = script
        text["resources"]["dep"]["properties"]["server"] = "retrybox"
        del text["resources"]["srv"]
        assert 201 == cp.create("cut", json.dumps(text)).status
        wait_until((work / "runs").exists, "the hook never started", 60, 0.05)
        agent.send_signal(signal.SIGKILL)  # the agent only: its hook runs in its own session
        agent.wait(30)
        agent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert "CREATE_COMPLETE" == cp.wait_stack("cut", timeout=90)["status"]
        (key,) = {k for k, _ in runs(work)}
        assert [[key, "1"], [key, "2"]] == runs(work)
        assert "fine\n" == the_deployment(cp, "cut")["deploy_stdout"]
    finally:
        stop_agent(agent)
        stop_control_plane(cp)
