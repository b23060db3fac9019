"""(d) The agent's footprint: `python bench/agent_rss.py [--idle S] [--hops N] [--baseline COMMIT]` (figure (d)).

In one run, for this tree's agent and for the agent of commit BASELINE (before issue 20's
agent work; or --baseline's; `git archive` of its agent/ and hooks/ into a temp dir, run with PYTHONPATH):

1. VmRSS of an idle `anneal-agent run` that has enrolled, run one no-op script deployment
   and sits in its long-poll, with an http:// URL and with an https:// one (a TLS front,
   tests/support/tlsfront.py, before the same control plane; the agent trusts it by SSL_CERT_FILE);
   and the requests it makes while idle for --idle seconds (its control plane's access log;
   the four agents idle at the same time, each with a control plane of its own);
2. a no-op script deployment through the agent's dispatch (`dispatch.run_hook`), the agent's
   own run against the old way, `python -m hooks.script` (a second interpreter), --hops runs
   each, median and p90;
3. import costs in fresh interpreters (VmRSS after the imports): bare Python, asyncio,
   aiohttp, cryptography, the system's libcrypto by ctypes (agent.crypto), the agent's modules of this tree (with ``ssl`` withheld as
   `anneal-agent run` does for http://) and of BASELINE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/agent_rss.py` puts bench/, not the repository, on the path
    sys.path.insert(0, str(ROOT))

from agent import dispatch, output, wire  # noqa: E402
from bench.harness import status_kib  # noqa: E402
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane  # noqa: E402
from tests.support.processes import stop_process  # noqa: E402
from tests.support.templates import one_script_deployment  # noqa: E402
from tests.support.tlsfront import start_front  # noqa: E402

#: The agent before issue 20's agent work (aiohttp client, `python -m hooks.script` per deployment).
BASELINE = "f44b6af"
IMPORTS = {
    "bare Python": "pass",
    "asyncio": "import asyncio",
    "asyncio + aiohttp": "import asyncio, aiohttp",
    "cryptography (Ed25519, X25519, AEAD)": "import cryptography.hazmat.primitives.asymmetric.ed25519, "
    "cryptography.hazmat.primitives.asymmetric.x25519, cryptography.hazmat.primitives.ciphers.aead",
    "the system's libcrypto by ctypes, as the agent uses it (agent.crypto)": "from agent import crypto; "
    "crypto.backend()",
    "agent, this tree, ssl withheld (http://)": "from agent import tls; tls.withhold(); "
    "import agent.commands, agent.loop, agent.inline",
    "agent, this tree, with ssl (https://)": "import agent.commands, agent.loop, agent.inline",
    "agent, BASELINE": "import agent.cli, agent.loop",
}
PROBE = (
    "\nimport re, sys, json\n"
    "print(json.dumps([int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1)),"
    " sys.modules.get('ssl') is not None, 'aiohttp' in sys.modules]))"
)


def baseline_tree(workdir: Path, commit: str = BASELINE, paths: Sequence[str] = ("agent", "hooks")) -> Path:
    """*paths* (agent/ and hooks/) of *commit*, extracted from git into *workdir*/baseline."""
    tree = workdir / "baseline"
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, *paths], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def env_for(tree: Path | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    if tree is not None:  # ahead of the editable install of this tree
        env["PYTHONPATH"] = str(tree)
    return env


def imports(tree: Path) -> dict[str, Any]:
    """VmRSS (KiB) of a fresh interpreter after each import set, with whether ssl and aiohttp got loaded."""
    out = {}
    for label, code in IMPORTS.items():
        env = env_for(tree if "BASELINE" in label else None)
        run = subprocess.run(
            [sys.executable, "-c", code + PROBE], capture_output=True, text=True, check=True, env=env, cwd="/"
        )
        kib, ssl, aiohttp = json.loads(run.stdout.splitlines()[-1])
        out[label] = {"rss_kib": kib, "ssl": ssl, "aiohttp": aiohttp}
    return out


@dataclass
class Idle:
    """One agent under watch, with its own control plane (and TLS front): their logs are its alone."""

    cp: ControlPlane
    proc: subprocess.Popen[bytes]
    front: subprocess.Popen[bytes] | None
    mark: int = 0


def start_idle(workdir: Path, name: str, tree: Path | None, https: bool) -> Idle:
    """Enrol an agent (this tree's or BASELINE's), run it, deploy one no-op script to it."""
    folder = workdir / name
    folder.mkdir()
    args = ("--log-level", "INFO", "--access-log", "--provisioner", "enrol")
    cp = start_control_plane(folder, *args, defaults=())
    front, url = start_front(folder, cp.port) if https else (None, cp.url)
    extra = {"SSL_CERT_FILE": str(folder / "front-cert.pem")}
    state = folder / "state"
    token = cp.api("POST", "/v1/servers", {"name": name}).body["enrol_token"]
    agent = [sys.executable, "-m", "agent"]
    enrol = [*agent, "enrol", "--url", url, f"--token={token}", "--state-dir", str(state)]
    subprocess.run(enrol, capture_output=True, check=True, timeout=120, env=env_for(tree, extra), cwd="/")
    with open(folder / "agent.log", "ab") as sink:
        proc = subprocess.Popen(
            [*agent, "run", "--state-dir", str(state)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env_for(tree, extra),
            cwd="/",
        )
    idle = Idle(cp, proc, front)
    try:
        cp.create_stack(name, one_script_deployment("#!/bin/sh\necho hello\n", server=name), timeout=120)
    except BaseException:
        stop_idle(idle)
        raise
    return idle


def read_idle(idle: Idle, seconds: float) -> dict[str, Any]:
    """The agent's memory now and the requests its control plane logged since the mark."""
    with open(idle.cp.log, "rb") as f:
        f.seek(idle.mark)
        lines = [line for line in f.read().decode(errors="replace").splitlines() if "control.access" in line]
    requests = sum("/v1/agent/" in line for line in lines)
    return {
        "rss_kib": status_kib(idle.proc.pid, "VmRSS"),
        "hwm_kib": status_kib(idle.proc.pid, "VmHWM"),
        "ssl_loaded": "/_ssl." in Path(f"/proc/{idle.proc.pid}/maps").read_text(),
        "idle_s": seconds,
        "idle_requests": requests,
        "requests_per_min": 60 * requests / seconds,
    }


def stop_idle(idle: Idle) -> None:
    stop_process(idle.proc, 30)
    stop_process(idle.front, 10)
    stop_control_plane(idle.cp)


def noop_item() -> wire.DeploymentItem:
    return wire.decode_item(
        {
            "id": "hop",
            "name": "hop",
            "group": "script",
            "creation_time": "2026-01-01T00:00:00Z",
            "config": "#!/bin/sh\ntrue\n",
            "inputs": [{"name": "deploy_action", "value": "CREATE"}],
            "outputs": [],
            "options": {},
        }
    )


async def hops(workdir: Path, runs: int) -> dict[str, Any]:
    """Seconds of a no-op script deployment through dispatch.run_hook: in the agent, and as a second interpreter."""
    state = workdir / "hops"
    state.mkdir()
    item = noop_item()
    env = dispatch.hook_env({}, state, item.id, None, 60, 1)
    ways = {
        "agent": dispatch.builtin_argv("script"),  # run by the agent itself (agent/inline.py)
        "interpreter": [sys.executable, "-m", "hooks.script.__main__"],  # the same hook, the old way
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(runs):
        for way, argv in ways.items():
            start = time.perf_counter()
            signal = await dispatch.run_hook(
                argv, item, env=env, timeout=60, tee=output.output_paths(state, item.id)
            )
            times[way].append(time.perf_counter() - start)
            if signal.status_code != 0:
                raise RuntimeError(f"{way}: {signal.stderr}")
    return {
        way: {"median_s": statistics.median(t), "p90_s": statistics.quantiles(t, n=10)[-1], "runs": runs}
        for way, t in times.items()
    }


def measure(workdir: Path, idle: float = 120.0, runs: int = 30, baseline: str = BASELINE) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    tree = baseline_tree(workdir, baseline)
    watched: dict[str, Idle] = {}
    try:
        for label in ("http", "https"):
            for who, t in (("now", None), ("baseline", tree)):
                watched[f"{label}_{who}"] = start_idle(workdir, f"{label}-{who}", t, label == "https")
        time.sleep(2)  # the last signal acknowledged, every agent back in its long-poll
        for one in watched.values():
            one.mark = one.cp.log.stat().st_size
        time.sleep(idle)  # all four idle at once, each on its own control plane
        agents = {key: read_idle(one, idle) for key, one in watched.items()}
    finally:
        for one in watched.values():
            stop_idle(one)
    hop = asyncio.run(hops(workdir, runs))
    return {
        "baseline_commit": baseline,
        "agents": agents,
        "imports": imports(tree),
        "hops": hop,
        "ratio_rss_http": agents["http_baseline"]["rss_kib"] / agents["http_now"]["rss_kib"],
        "ratio_rss_https": agents["https_baseline"]["rss_kib"] / agents["https_now"]["rss_kib"],
        "ratio_hop": hop["interpreter"]["median_s"] / hop["agent"]["median_s"],
    }


def rows(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """The figure's lines for bench/run.py's table: measured, baseline (same run), ratio, goal."""
    mb = 1024 / 1e6  # KiB to MB (10**6 bytes)
    out = []
    for label in ("http", "https"):
        now, base = r["agents"][f"{label}_now"], r["agents"][f"{label}_baseline"]
        goal = "PASS" if now["rss_kib"] * mb <= 30 else "MISS"
        out.append(
            (
                f"(d) idle agent VmRSS, {label}:// URL",
                f"{now['rss_kib'] * mb:.1f} MB ({now['rss_kib'] / 1024:.1f} MiB)",
                f"{base['rss_kib'] * mb:.1f} MB (commit {r['baseline_commit']})",
                f"{base['rss_kib'] / now['rss_kib']:.2f}x",
                f"<= 30 MB {goal}",
            )
        )
        out.append(
            (
                f"(d) idle agent requests/min, {label}://",
                f"{now['requests_per_min']:.1f}",
                f"{base['requests_per_min']:.1f}",
                "",
                f"<= 2 {'PASS' if now['requests_per_min'] <= 2 else 'MISS'}",
            )
        )
    agent, old = r["hops"]["agent"], r["hops"]["interpreter"]
    out.append(
        (
            "(d) no-op script deployment, median / p90",
            f"{agent['median_s'] * 1000:.1f} / {agent['p90_s'] * 1000:.1f} ms",
            f"{old['median_s'] * 1000:.1f} / {old['p90_s'] * 1000:.1f} ms (python -m hooks.script)",
            f"{r['ratio_hop']:.1f}x",
            "",
        )
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=float, default=120.0, help="seconds each idle agent is watched")
    parser.add_argument("--hops", type=int, default=30, help="no-op deployments per way")
    parser.add_argument(
        "--baseline", default=BASELINE, help=f"the commit whose agent is the baseline (default {BASELINE})"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anneal-agent-rss-") as tmp:
        result = measure(Path(tmp), args.idle, args.hops, args.baseline)
    for row in rows(result):
        print("  ".join(row))
    print()
    for label, figure in result["imports"].items():
        print(
            f"{figure['rss_kib'] / 1024:6.1f} MiB  ssl={figure['ssl']!s:5}  aiohttp={figure['aiohttp']!s:5}  {label}"
        )
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
