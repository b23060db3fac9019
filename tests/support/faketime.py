"""Clock skew for R22: libfaketime shifts one process's wall clock; the control plane and agents both R22 tests run.

Swift stays on the real time; the tests shift the control plane (test_url_expiry) or the
agents (test_agent_clock_skew) by preloading libfaketime into those processes only.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import agent_log, start_agent
from tests.support.controlplane import ControlPlane, start_control_plane
from tests.support.swift import Swift, swift_args

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
#: The servers the skew tests enrol themselves, and the store transport each is on.
SKEW_SERVERS = {"sk-sw": "SWIFT", "sk-s3": "S3"}


def shifted(skew: str) -> dict[str, str]:
    """The environment that moves a process's wall clock by *skew* (`-15m`), its monotonic clock left alone."""
    if not LIBFAKETIME.exists():
        pytest.fail(f"{LIBFAKETIME} missing: run `make tools` (ci/tools.d/40-swift.sh installs faketime)")
    return {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def start_on_stores(swift: Swift, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> ControlPlane:
    """A control plane with SWIFT and S3 (Swift's s3api) on *swift*, its containers named afresh.

    Random, not after the test: the Swift is shared by every module of a pytest worker.
    """
    prefix = f"x{secrets.token_hex(4)}"
    s3 = [f"--s3-endpoint={swift.url}", f"--s3-access-key={swift.user}"]
    return start_control_plane(tmp, *swift_args(swift, prefix, *s3, *extra), env=env)


def start_skew_agents(
    cp: ControlPlane, agents: list[subprocess.Popen[bytes]], env: dict[str, str] | None = None
) -> None:
    """Start an agent for each of SKEW_SERVERS into *agents* (the test stops them), each logging in its state dir."""
    for name, kind in SKEW_SERVERS.items():
        state = cp.agent_dir(name)
        state.mkdir(parents=True)
        agents.append(start_agent(cp, name, state, state / "agent.log", transport=kind, env=env))


def skew_rounds(cp: ControlPlane, template: str, count: int = 2) -> Iterator[tuple[int, dict[str, Any]]]:
    """Create stack `sk` at round 0, then update it round by round; yield each round and its settled outputs."""
    for rnd in range(count):
        if rnd == 0:
            resp = cp.create("sk", template, params={"round": "0"})
        else:
            resp = cp.api("PUT", "/v1/stacks/sk", {"template": template, "parameters": {"round": str(rnd)}})
        assert resp.status in (201, 202), resp.body
        status = cp.wait_stack("sk", timeout=180)["status"]
        assert status in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), (
            cp.api("GET", "/v1/deployments?stack=sk").body,
            agent_log(cp, "sk-sw")[-3000:],
        )
        yield rnd, cp.outputs("sk")
