"""Running a built-in hook as the agent does (``python -m hooks.<name>``) against a real tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent import wire
from tests.support.processes import ROOT

TOOLS = ROOT / ".venv" / "tools"
#: Where ci/tools.d puts each tool, and the hook setting that points at it.
TOOL_PATHS = {
    "ANNEAL_ANSIBLE_RUNNER": TOOLS / "ansible" / "bin" / "ansible-runner",
    "ANNEAL_SALT_CALL": TOOLS / "salt" / "bin" / "salt-call",
    "ANNEAL_PUPPET": Path("/usr/bin/puppet"),
}
HEAT_AGENTS = TOOLS / "heat-agents" / "heat_agents-13.0.0"
#: Bounds every wait, so that a broken hook fails a test instead of hanging it.
BOUND = 300


def require(path: Path) -> Path:
    """*path*, or a failed test (never a skip) that says how to install it."""
    if not (path.is_file() and os.access(path, os.X_OK)) and not path.is_dir():
        pytest.fail(f"{path} is missing: run `make tools` (ci/tools.d) to install the real tools")
    return path


def tool_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANNEAL_", "HEAT_"))}
    env.update({k: str(v) for k, v in TOOL_PATHS.items()})
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def deployment(
    group: str,
    config: Any,
    *,
    inputs: dict[str, Any] | None = None,
    outputs: tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
    id: str = "d1",
    action: str = "CREATE",
) -> dict[str, Any]:
    values = {"deploy_action": action, "deploy_server_id": "srv1", **(inputs or {})}
    return {
        "id": id,
        "name": f"{group}-deploy",
        "group": group,
        "creation_time": "2026-01-01T00:00:00Z",
        "config": config,
        "inputs": [{"name": n, "type": "String", "value": v} for n, v in values.items()],
        "outputs": [{"name": n, "type": "String", "error_output": False} for n in outputs],
        "options": options or {},
    }


def run_hook(name: str, workdir: Path, item: dict[str, Any], **env: str) -> tuple[dict[str, Any], str]:
    """Run hook *name* on *item*; return its result (checked against the wire schema) and stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", f"hooks.{name}"],
        input=json.dumps(item),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=tool_env(ANNEAL_HOOK_WORKDIR=str(workdir), **env),
        timeout=BOUND,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    wire.decode_signal(result)
    return result, proc.stderr


def pid_is_alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
