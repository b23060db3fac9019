"""Hook overhead per deployment: `python bench/hooks.py [--runs N] [--only script,salt,...]`.

For a no-op config of each tool, the same run measures (1) the bare tool doing that
no-op, invoked as the hook invokes it, and (2) the hook doing it as the agent starts it
(`python -m hooks.<tool>`, deployment JSON on stdin, result on stdout). The difference
of the medians is what the hook adds per deployment (start-up, files, result); the
ratio is hook / bare. chef runs the FAKE client of tests/tools (no real Chef client can
be installed here). Tools come from `make tools` (.venv/tools, Debian puppet).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".venv" / "tools"
FAKE_CHEF = ROOT / "tests" / "tools" / "fake_chef_client.py"
PATHS = {
    "ANNEAL_PUPPET": "/usr/bin/puppet",
    "ANNEAL_ANSIBLE_RUNNER": str(TOOLS / "ansible" / "bin" / "ansible-runner"),
    "ANNEAL_SALT_CALL": str(TOOLS / "salt" / "bin" / "salt-call"),
    "ANNEAL_CHEF_CLIENT": str(FAKE_CHEF),
}
NOOP_PLAY = "- hosts: localhost\n  gather_facts: false\n  tasks: []\n"
NOOP_STATE = "noop:\n  test.nop\n"


def timed(argv: list[str], *, env: dict[str, str], cwd: Path, stdin: str | None = None) -> float:
    """Seconds *argv* took; a failed run (or a hook result with a non-zero status) stops the bench."""
    start = time.perf_counter()
    proc = subprocess.run(
        argv, input=stdin, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 2):  # puppet --detailed-exitcodes: 2 is "changed"
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    if stdin is not None and json.loads(proc.stdout).get("deploy_status_code"):
        raise RuntimeError(f"{argv[2]} failed: {proc.stdout[-2000:]}")
    return elapsed


def item(group: str, config: Any) -> str:
    return json.dumps(
        {
            "id": "bench",
            "name": "bench",
            "group": group,
            "creation_time": "2026-01-01T00:00:00Z",
            "config": config,
            "inputs": [{"name": "deploy_action", "value": "CREATE"}],
            "outputs": [],
            "options": {},
        }
    )


def bare_commands(work: Path) -> dict[str, tuple[list[str], Callable[[], None]]]:
    """The bare no-op run of each tool, the way its hook invokes it, and its per-run setup."""
    script = work / "noop.sh"
    script.write_text("true\n")
    manifest = work / "noop.pp"
    manifest.write_text("")
    salt = work / "salt"
    for sub in ("conf", "srv", "cache", "pki", "run", "log"):
        (salt / sub).mkdir(parents=True, exist_ok=True)
    (salt / "srv" / "deploy.sls").write_text(NOOP_STATE)
    (salt / "conf" / "minion").write_text(
        json.dumps(
            {
                "file_client": "local",
                "id": "bench",
                "root_dir": str(salt),
                "cachedir": str(salt / "cache"),
                "pki_dir": str(salt / "pki"),
                "sock_dir": str(salt / "run"),
                "log_file": str(salt / "log" / "m"),
                "file_roots": {"base": [str(salt / "srv")]},
            }
        )
    )
    runner_dir = work / "runner"

    def fresh_runner_dir() -> None:
        subprocess.run(["rm", "-rf", str(runner_dir)], check=True)
        (runner_dir / "project").mkdir(parents=True)
        (runner_dir / "project" / "playbook.yaml").write_text(NOOP_PLAY)
        (runner_dir / "inventory").mkdir()
        python = Path(PATHS["ANNEAL_ANSIBLE_RUNNER"]).parent / "python"
        (runner_dir / "inventory" / "hosts").write_text(
            f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
        )

    chef_dir = work / "chef"
    chef_dir.mkdir(exist_ok=True)
    (chef_dir / "client.rb").write_text("local_mode true\n")
    (chef_dir / "node.json").write_text('{"run_list": []}')
    nothing: Callable[[], None] = lambda: None  # noqa: E731
    return {
        "script": (["/bin/sh", str(script)], nothing),
        "puppet": (
            [
                PATHS["ANNEAL_PUPPET"],
                "apply",
                "--detailed-exitcodes",
                "--color",
                "false",
                "--logdest",
                "console",
                str(manifest),
            ],
            nothing,
        ),
        "ansible": (
            [PATHS["ANNEAL_ANSIBLE_RUNNER"], "run", str(runner_dir), "-p", "playbook.yaml", "--ident", "run"],
            fresh_runner_dir,
        ),
        "salt": (
            [
                PATHS["ANNEAL_SALT_CALL"],
                "--local",
                f"--config-dir={salt / 'conf'}",
                "--retcode-passthrough",
                "--out=json",
                "--log-level=warning",
                "state.sls",
                "deploy",
            ],
            nothing,
        ),
        "chef": (
            [
                PATHS["ANNEAL_CHEF_CLIENT"],
                "-z",
                "--config",
                str(chef_dir / "client.rb"),
                "-j",
                str(chef_dir / "node.json"),
            ],
            nothing,
        ),
    }


NOOP_CONFIGS: dict[str, Any] = {
    "script": "true\n",
    "puppet": "",
    "ansible": NOOP_PLAY,
    "salt": NOOP_STATE,
    "chef": "[]",
}


def measure(tool: str, runs: int, work: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        **PATHS,
        "PYTHONPATH": str(ROOT),
        "ANNEAL_HOOK_WORKDIR": str(work / "hooks"),
        "FAKE_CHEF_RECORD": str(work / "chef-record.jsonl"),
    }
    # As the hook does for its run: the runner's own ansible-playbook first on PATH.
    env["PATH"] = f"{Path(PATHS['ANNEAL_ANSIBLE_RUNNER']).parent}:{env.get('PATH', os.defpath)}"
    bare_argv, setup = bare_commands(work)[tool]
    hook_argv = [sys.executable, "-m", f"hooks.{tool}"]
    stdin = item(tool, NOOP_CONFIGS[tool])
    bare, hook = [], []
    for _ in range(runs):  # interleaved, so load changes hit both alike
        setup()
        bare.append(timed(bare_argv, env=env, cwd=work))
        hook.append(timed(hook_argv, env=env, cwd=ROOT, stdin=stdin))
    b, h = statistics.median(bare), statistics.median(hook)
    return {"tool": tool, "runs": runs, "bare_s": b, "hook_s": h, "overhead_s": h - b, "ratio": h / b}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="script,puppet,ansible,salt,chef")
    args = parser.parse_args()
    missing = [p for p in PATHS.values() if not os.access(p, os.X_OK)]
    if missing:
        print(f"missing tools {missing}: run `make tools`", file=sys.stderr)
        return 2
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs each, medians")
    print(f"{'tool':<8} {'bare tool s':>12} {'hook s':>8} {'overhead s':>11} {'ratio':>6}")
    results = []
    with tempfile.TemporaryDirectory(prefix="anneal-bench-hooks-") as tmp:
        for tool in args.only.split(","):
            work = Path(tmp) / tool
            work.mkdir()
            r = measure(tool, args.runs, work)
            results.append(r)
            print(
                f"{tool:<8} {r['bare_s']:>12.3f} {r['hook_s']:>8.3f} {r['overhead_s']:>11.3f} {r['ratio']:>6.2f}"
            )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
