"""Heat's agent chain versus our agent, against the same control plane, in one run.

    .venv/bin/python bench/heat_chain.py [--changes 50] [--chain-changes 10] [--idle 60]

Needs `make tools` (Heat's chain: ci/tools.d/60-heat-agents.sh). One `anneal serve`;
two Heat-compatible servers run Heat's real chain (os-collect-config -> os-refresh-config ->
55-heat-config -> script hook -> heat-config-notify, paths redirected as
tests/support/heatchain.py lays them out) and two enrolled servers run `anneal-agent run`.

Figures, Heat's chain first, then ours, then the ratio Heat / ours:
* idle RSS: the agent's process tree, 10 s after its last deployment;
* CPU per idle hour: CPU time of the process tree over --idle seconds of no change, scaled
  to an hour (a shorter window, scaled: the printout says so);
* change-to-signal for a no-op script deployment: a stack update gives the deployment a
  new generation (the document changes); the time from the control plane starting that
  generation to it recording the signal (both stamped by the control plane), p50/p99
  over --changes updates;
* the same for a chain of 5 dependent deployments alternating over the 2 servers: from the
  first generation started to the last signal recorded, over --chain-changes updates.

`--baseline COMMIT` also runs our side on COMMIT's control plane and agent (its control/, agent/ and
hooks/ from `git archive`, ahead of this tree on PYTHONPATH; its own `anneal serve`), and
`--rounds K` runs our side K times, this tree and the baseline alternating, each round on fresh
stacks; the figures are then the medians over the rounds, with the ratio baseline / this tree.
`--no-heat` leaves Heat's chain out (a regression hunt: about 30 s a round, not 2 minutes).

Heat's chain polls: upstream's default interval is 30 s (idle figures use it); for the
latency figures it runs with --polling-interval 1 (its floor: the backoff starts at 1 s),
else the figure would be its poll interval. Our agent long-polls (25 s) either way.
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
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_rss import baseline_tree, env_for  # noqa: E402
from bench.harness import start_plane  # noqa: E402
from tests.support.heatchain import HeatChain, require_heat_agents  # noqa: E402
from tests.support.processes import command, stop_process  # noqa: E402

NOOP = """
heat_template_version: rocky
parameters:
  n: {type: string}
  server: {type: string}
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: N}], config: "#!/bin/sh\\ntrue\\n"}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_param: server}, input_values: {N: {get_param: n}}}
"""


def chain_template() -> str:
    """Five deployments, d1..d5, alternating servers a and b, each taking the previous output."""
    lines = [
        "heat_template_version: rocky",
        "parameters:",
        "  n: {type: string}",
        "  a: {type: string}",
        "  b: {type: string}",
        "resources:",
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties:",
        "      group: script",
        "      inputs: [{name: PREV}]",
        "      outputs: [{name: out}]",
        '      config: "#!/bin/sh\\nprintf \'%s+\' \\"$PREV\\" > $heat_outputs_path.out\\n"',
    ]
    for i in range(1, 6):
        prev = "{get_param: n}" if i == 1 else f"{{get_attr: [d{i - 1}, out]}}"
        server = "a" if i % 2 else "b"
        lines += [
            f"  d{i}:",
            "    type: OS::Heat::SoftwareDeployment",
            f"    properties: {{config: {{get_resource: cfg}}, server: {{get_param: {server}}},"
            f" input_values: {{PREV: {prev}}}}}",
        ]
    return "\n".join(lines) + "\n"


class Admin:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def wait_stack(self, name: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = str(self.call("GET", f"/v1/stacks/{name}?summary=true")["status"])
            if not status.endswith("IN_PROGRESS"):
                return status
            time.sleep(0.1)
        raise SystemExit(f"stack {name} still in progress after {timeout} s")

    def put_stack(self, name: str, template: str, params: dict[str, str], create: bool) -> None:
        body = {"name": name, "template": template, "parameters": params}
        if create:
            self.call("POST", "/v1/stacks", body)
        else:
            self.call("PUT", f"/v1/stacks/{name}", body)
        status = self.wait_stack(name)
        if not status.endswith("COMPLETE"):
            raise SystemExit(f"stack {name}: {status}")

    def deployments(self, stack: str) -> list[dict[str, Any]]:
        return list(self.call("GET", f"/v1/deployments?stack={stack}"))


def tree_pids(pid: int) -> list[int]:
    """*pid* and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_kib(pid: int) -> int:
    total = 0
    for p in tree_pids(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def cpu_seconds(pid: int) -> float:
    """CPU of the tree: each live process's own time plus its reaped children's."""
    total = 0
    for p in tree_pids(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class Side:
    """One kind of agent on two servers."""

    def __init__(
        self, kind: str, admin: Admin, work: Path, url: str, env: dict[str, str] | None = None
    ) -> None:
        """*kind* "heat" runs Heat's chain, any other name anneal-agent (with *env*: a baseline's tree)."""
        self.kind, self.admin, self.work, self.url = kind, admin, work, url
        self.heat = kind == "heat"
        self.env = env or dict(os.environ)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.servers = [f"{kind}-a", f"{kind}-b"]
        self.starts: dict[str, list[str]] = {}

    def create_servers(self) -> None:
        for name in self.servers:
            if self.heat:
                server = self.admin.call("POST", "/v1/servers", {"name": name, "heat_compatible": True})
                chain = HeatChain(self.work / name).setup()
                self.starts[name] = [str(chain.work), server["metadata_url"]]
            else:
                token = self.admin.call("POST", "/v1/servers", {"name": name})["enrol_token"]
                state = self.work / name
                subprocess.run(
                    [
                        command("anneal-agent"),
                        "enrol",
                        "--url",
                        self.url,
                        f"--token={token}",
                        "--state-dir",
                        str(state),
                    ],
                    check=True,
                    capture_output=True,
                    env=self.env,
                )
                self.starts[name] = [str(state)]

    def start(self, interval: int) -> None:
        for name in self.servers:
            log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
            if self.heat:
                chain = HeatChain(Path(self.starts[name][0]))
                argv, env = chain.argv(self.starts[name][1], interval=interval), chain.env()
            else:
                argv = [command("anneal-agent"), "run", "--state-dir", self.starts[name][0]]
                env = {**self.env, "ANNEAL_LOG_LEVEL": "WARNING"}
            self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)
        self.procs.clear()

    def idle(self, seconds: float) -> dict[str, float]:
        """RSS and CPU of the first server's agent tree while nothing changes."""
        self.admin.put_stack(f"{self.kind}-idle", NOOP, {"n": "0", "server": self.servers[0]}, create=True)
        time.sleep(10)
        pid = self.procs[self.servers[0]].pid
        rss = rss_kib(pid)
        before = cpu_seconds(pid)
        time.sleep(seconds)
        used = cpu_seconds(pid) - before
        return {"idle_rss_mib": rss / 1024, "cpu_s_per_idle_hour": used * 3600 / seconds}

    def noop_latency(self, changes: int, round_: int = 0) -> list[float]:
        name = f"{self.kind}-noop{round_ or ''}"
        self.admin.put_stack(name, NOOP, {"n": "first", "server": self.servers[1]}, create=True)
        out = []
        for i in range(changes):
            self.admin.put_stack(name, NOOP, {"n": f"change-{i}", "server": self.servers[1]}, create=False)
            dep = self.admin.deployments(name)[0]
            out.append(dep["completed_at"] - dep["started_at"])
        return out

    def chain_latency(self, changes: int, round_: int = 0) -> list[float]:
        name = f"{self.kind}-chain{round_ or ''}"
        params = {"a": self.servers[0], "b": self.servers[1]}
        self.admin.put_stack(name, chain_template(), {"n": "first", **params}, create=True)
        out = []
        for i in range(changes):
            self.admin.put_stack(name, chain_template(), {"n": f"change-{i}", **params}, create=False)
            deps = self.admin.deployments(name)
            out.append(max(d["completed_at"] for d in deps) - min(d["started_at"] for d in deps))
        return out


def measure(side: Side, args: argparse.Namespace, round_: int = 0) -> dict[str, float]:
    """One side's figures: idle RSS and CPU (first round only), then the latencies."""
    if round_ == 0:
        side.create_servers()
        side.start(interval=30)  # upstream's default, for the idle figures
        idle = side.idle(args.idle)
        side.stop()
    else:
        idle = {}
    side.start(interval=1)  # Heat's floor, for the latency figures
    noop = side.noop_latency(args.changes, round_)
    chain = side.chain_latency(args.chain_changes, round_)
    side.stop()
    return {
        **idle,
        "noop_p50_s": statistics.median(noop),
        "noop_p99_s": pct(noop, 99),
        "chain5_p50_s": statistics.median(chain),
        "chain5_p99_s": pct(chain, 99),
    }


def table(title: str, left: str, right: str, a: dict[str, float], b: dict[str, float]) -> None:
    """Figures of *a* against *b*, with the ratio a / b."""
    print(f"\n{title}")
    print(f"{'figure':<24}{left:>16}{right:>16}{left + '/' + right:>24}")
    for key, value in a.items():
        if key in b:
            ratio = f"{value / b[key]:.2f}x" if b[key] else "-"
            print(f"{key:<24}{value:>16.3f}{b[key]:>16.3f}{ratio:>24}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--chain-changes", type=int, default=10)
    parser.add_argument(
        "--idle", type=float, default=60.0, help="seconds of idle measured (scaled to an hour)"
    )
    parser.add_argument("--baseline", help="also run our side on this commit's control plane and agent")
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds of our side (alternating with --baseline)"
    )
    parser.add_argument("--no-heat", action="store_true", help="leave Heat's chain out")
    args = parser.parse_args(argv)
    if not args.no_heat:
        require_heat_agents()
    with tempfile.TemporaryDirectory(prefix="bench-heat-") as tmp:
        work = Path(tmp)
        for sub in ("plane", "base"):
            (work / sub).mkdir()
        planes = [start_plane(work / "plane", extra=["--provisioner", "enrol"])]
        env = None
        if args.baseline:
            env = env_for(baseline_tree(work, args.baseline, ("control", "agent", "hooks")))
            planes.append(start_plane(work / "base", extra=["--provisioner", "enrol"], env=env))
        results: dict[str, dict[str, float]] = {}
        try:
            admin = Admin(planes[0].url, planes[0].token)
            if not args.no_heat:
                results["heat"] = measure(Side("heat", admin, work, planes[0].url), args)
                print(f"heat: {json.dumps(results['heat'])}", flush=True)
            sides = {"anneal": Side("anneal", admin, work, planes[0].url)}
            if args.baseline:
                base = planes[1]
                sides["baseline"] = Side("baseline", Admin(base.url, base.token), work, base.url, env)
            rounds: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
            for r in range(args.rounds):
                for kind, side in sides.items():
                    rounds[kind].append(measure(side, args, r))
                    print(f"{kind} round {r + 1}: {json.dumps(rounds[kind][-1])}", flush=True)
            for kind, each in rounds.items():
                results[kind] = {k: statistics.median(f[k] for f in each if k in f) for k in each[0]}
        finally:
            for plane in planes:
                stop_process(plane.proc)
    print(
        f"\n{args.changes} no-op changes, {args.chain_changes} chain changes, {args.rounds} round(s) of ours"
        f" (medians over rounds); CPU measured over {args.idle:g} s idle and scaled to an hour"
    )
    if "heat" in results:
        table(
            "Heat's chain vs anneal-agent, one control plane",
            "heat chain",
            "anneal-agent",
            results["heat"],
            results["anneal"],
        )
    if "baseline" in results:
        table(
            f"anneal-agent, {args.baseline} against this tree",
            "baseline",
            "this tree",
            results["baseline"],
            results["anneal"],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
