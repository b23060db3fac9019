"""Real agents the test starts itself (`--provisioner enrol`), and what they keep in their state dir."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane
from tests.support.processes import BIN, stop_process


def enrol_agent(cp: ControlPlane, name: str, state: Path) -> list[str]:
    """Create a server, enrol an agent for it in *state*; return the argv that runs that agent."""
    token = cp.api("POST", "/v1/servers", {"name": name}).body["enrol_token"]
    enrol = subprocess.run(
        [str(BIN / "anneal-agent"), "enrol", "--url", cp.url, f"--token={token}", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == enrol.returncode, enrol.stderr
    return [str(BIN / "anneal-agent"), "run", "--state-dir", str(state), "--poll-wait", "2"]


def start_agent(
    cp: ControlPlane,
    name: str,
    state: Path,
    log: Path,
    *,
    url: str | None = None,
    transport: str | None = None,
    poll_wait: int = 5,
    env: dict[str, str] | None = None,
    wrap: Sequence[str] = (),
    token: str = "admin",
) -> subprocess.Popen[bytes]:
    """Create server *name* (on *transport*) and run an agent that enrols itself through *url* (default: *cp*).

    The agent gets its one-time token in ANNEAL_ENROL_TOKEN, as a server image would; *env*
    is added to its environment; *wrap* prefixes its command (`ip netns exec NAME`); the server
    is made with *token* (a member's: in its project).
    """
    body = {"name": name, **({"transport": transport} if transport else {})}
    created = cp.api("POST", "/v1/servers", body, token=token)
    assert 201 == created.status, created.body
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                *wrap,
                str(BIN / "anneal-agent"),
                "run",
                "--url",
                url or cp.url,
                f"--poll-wait={poll_wait}",
                "--state-dir",
                str(state),
            ],
            env={**os.environ, **(env or {}), "ANNEAL_ENROL_TOKEN": created.body["enrol_token"]},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def run_agent(state: Path, log: Path, poll_wait: int = 2) -> subprocess.Popen[bytes]:
    """Run again the agent enrolled in *state* (after a stop): it goes where its saved config says."""
    argv = [str(BIN / "anneal-agent"), "run", f"--poll-wait={poll_wait}", "--state-dir", str(state)]
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def stop_agent(agent: subprocess.Popen[bytes] | None, timeout: float = 60) -> None:
    """Stop an agent the test started: SIGTERM (it may be finishing a hook), then SIGKILL after *timeout*."""
    stop_process(agent, timeout)


def agent_status(state: Path) -> dict[str, Any]:
    """What `anneal-agent status --json` says about the agent in *state*."""
    run = subprocess.run(
        [str(BIN / "anneal-agent"), "status", "--json", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == run.returncode, run.stderr
    return dict(json.loads(run.stdout))


def agent_log(cp: ControlPlane, name: str) -> str:
    """The log of the local agent of server *name*."""
    return (cp.agent_dir(name) / "agent.log").read_text()


def ledger_state(state: Path, key: str) -> str | None:
    """A value of the `state` table of the agent's ledger in *state* (None: no ledger yet, or no such key)."""
    path = state / "ledger.sqlite"
    if not path.exists():
        return None
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    finally:
        db.close()
    return None if row is None else str(row[0])


def transport_section(state: Path) -> dict[str, Any]:
    """The transport the agent in *state* follows, as it stored it (kind, document URL, expiry)."""
    raw = ledger_state(state, "transport")
    assert raw is not None, f"no transport in the ledger of {state}"
    return dict(json.loads(raw))


def started(state: Path, generation: int) -> bool:
    """Whether the agent in *state* has started some deployment's *generation* (its ledger says so)."""
    path = state / "ledger.sqlite"
    if not path.exists():
        return False
    db = sqlite3.connect(path)
    try:
        row = db.execute(
            "SELECT count(*) FROM generations WHERE generation = ? AND state != 'received'", (generation,)
        ).fetchone()
    finally:
        db.close()
    return bool(row[0])
