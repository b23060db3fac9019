"""(a) Publish-to-hook-start latency: 100 simulated agents plus 2 real ones, long-poll vs interval polling.

Publish is a deployment's ``started_at`` (set in the transaction that puts the
new generation on its server). Hook start is, for a real agent, the first line
of the deployment's script writing ``date +%s.%N`` to a file; for a simulated
agent, the moment a document carrying the generation is in hand. One clock:
everything runs on this machine.

The control plane runs with the ``local`` provisioner: the stack that creates the
two real servers gets one ``anneal-agent run`` process each, long-polling 25 s.
The simulated servers are made with ``POST /v1/servers`` and enrolled by the
bench, so they get no agent process.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import (
    Api,
    deployments_template,
    enrol_servers,
    percentile,
    start_plane,
    stop_leftover_agents,
)
from bench.simagent import Fleet
from tests.support.controlplane import ControlPlane
from tests.support.processes import stop_process

SIMULATED = 100
REAL = ("real-0", "real-1")
LONG_POLL_WAIT = 25.0
#: Heat's os-collect-config default polling interval (seconds), for the derived figure.
HEAT_INTERVAL = 30.0
#: The script's first command notes the time: that is "hook start" for a real agent. `date`, not
#: `python3 -c`: a python3 found on PATH may be a pyenv shim costing ~70 ms, charged to the agent.
STAMP_SCRIPT = '#!/bin/sh\ndate +%s.%N > "$VALUE.$deploy_server_id"\n'
ROUND_TIMEOUT = 60.0


@dataclass
class Samples:
    latencies: list[float] = field(default_factory=list)
    missed: int = 0
    #: Per round: (first to last ``started_at`` in the engine's transaction, last ``started_at`` to the
    #: first document in an agent's hand, first to last document in hand): where the time goes.
    phases: list[tuple[float, float, float]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = self.latencies
        out = {
            "n": len(lat),
            "missed": self.missed,
            "p50": percentile(lat, 50),
            "p99": percentile(lat, 99),
            "max": max(lat, default=None),
            "mean": sum(lat) / len(lat) if lat else None,
        }
        if self.phases:
            for i, name in enumerate(("transaction_spread", "last_start_to_first_doc", "first_to_last_doc")):
                out[f"{name}_p50"] = percentile([p[i] for p in self.phases], 50)
        return out


@dataclass
class Scenario:
    """The stacks one run updates round after round, and where real agents leave their stamps."""

    api: Api
    fleet: Fleet
    stamps: Path
    agents_dir: Path
    rounds_done: int = 0
    sim: Samples = field(default_factory=Samples)
    real: Samples = field(default_factory=Samples)
    #: Real agents, publish to the agent starting the hook process (before the hook's own start-up).
    real_spawn: Samples = field(default_factory=Samples)

    async def round(self, with_real: bool) -> None:
        """Publish one new generation to every server, then wait until every agent has it."""
        k, create = self.rounds_done, self.rounds_done == 0
        names = [a.server.name for a in self.fleet.agents]
        await self.api.put_stack("sim", deployments_template(names, 1, f"round {k}"), create=create)
        if with_real:
            tpl = deployments_template(
                REAL, 1, str(self.stamps / f"round{k}"), transport="CFN_SIGNAL", config=STAMP_SCRIPT
            )
            await self.api.put_stack("real", tpl, create=False)
        self.rounds_done += 1
        await self.fleet.wait_generation(k + 1, ROUND_TIMEOUT)
        if with_real:
            await wait_files(self.stamps, f"round{k}.*", len(REAL), ROUND_TIMEOUT)
        await self.api.wait_stack("sim")
        await self.collect_sim(k + 1)
        if with_real:
            await self.api.wait_stack("real")
            await self.collect_real(k)

    async def collect_sim(self, generation: int) -> None:
        by_server = {a.server.server_id: a for a in self.fleet.agents}
        latencies, starts, arrivals = [], [], []
        for dep in await published(self.api, "sim"):
            got = by_server[dep["server_id"]].seen.get((dep["id"], generation))
            if got is None or dep["generation"] != generation:
                self.sim.missed += 1
            else:
                latencies.append(got - dep["started_at"])
                starts.append(dep["started_at"])
                arrivals.append(got)
        self.sim.latencies += latencies
        if latencies:
            self.sim.phases.append(
                (max(starts) - min(starts), min(arrivals) - max(starts), max(arrivals) - min(arrivals))
            )

    async def collect_real(self, k: int) -> None:
        spawned = hook_spawns(self.agents_dir)
        for dep in await published(self.api, "real"):
            stamp = self.stamps / f"round{k}.{dep['server_id']}"
            try:
                self.real.latencies.append(float(stamp.read_text()) - dep["started_at"])
            except (OSError, ValueError):
                self.real.missed += 1
            if dep["derived_config_id"] in spawned:
                self.real_spawn.latencies.append(spawned[dep["derived_config_id"]] - dep["started_at"])
            else:
                self.real_spawn.missed += 1


#: The agent's log line just before it starts a hook process (agent/loop.py, `_run`).
SPAWN_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO agent\.loop: running deployment .* \((\S+)\) with hook"
)


def hook_spawns(agents_dir: Path) -> dict[str, float]:
    """Derived config id -> when a real agent logged that it starts its hook (1 ms resolution)."""
    spawned = {}
    for log in agents_dir.glob("*/agent.log"):
        for line in log.read_text(errors="replace").splitlines():
            if m := SPAWN_LINE.match(line):
                # logging's asctime is local time, as datetime's naive timestamp() assumes
                spawned[m[2]] = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return spawned


async def published(api: Api, stack: str) -> list[dict[str, Any]]:
    """Every deployment of *stack* with its publish time (``started_at``) and generation."""
    ids = [d["id"] for d in await api.call("GET", f"/v1/deployments?stack={stack}")]
    gate = asyncio.Semaphore(8)

    async def show(dep_id: str) -> dict[str, Any]:
        async with gate:
            return dict(await api.call("GET", f"/v1/deployments/{dep_id}"))

    return list(await asyncio.gather(*(show(i) for i in ids)))


async def wait_files(directory: Path, pattern: str, count: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list(directory.glob(pattern))) >= count:
            await asyncio.sleep(0.05)  # the script may still be writing
            return True
        await asyncio.sleep(0.02)
    return False


async def start_real_agents(api: Api, stamps: Path) -> None:
    """The stack that makes the real servers: the local provisioner starts their agents."""
    tpl = deployments_template(REAL, 1, str(stamps / "setup"), transport="CFN_SIGNAL", config=STAMP_SCRIPT)
    await api.put_stack("real", tpl, create=True)
    if not await wait_files(stamps, "setup.*", len(REAL), ROUND_TIMEOUT):
        raise SystemExit(f"the real agents ran nothing within {ROUND_TIMEOUT:g} s")
    await api.wait_stack("real")


async def _measure(
    cp: ControlPlane, workdir: Path, rounds: int, baseline_rounds: int, interval: float
) -> dict[str, Any]:
    agents_dir, stamps, url = cp.data_dir / "agents", workdir / "stamps", f"{cp.url}/v1/agent/document"
    stamps.mkdir()
    async with aiohttp.ClientSession() as http:
        api = Api(http, cp)
        servers = await enrol_servers(api, [f"sim-{i:03d}" for i in range(SIMULATED)])
        await start_real_agents(api, stamps)
        # Local agents' state dirs are named by server id: only the real servers may have one.
        real_dirs = sorted(cp.agent_dir(name).name for name in REAL)
        if sorted(p.name for p in agents_dir.iterdir()) != real_dirs:
            raise SystemExit(f"expected local agents for {REAL} only, found {sorted(agents_dir.iterdir())}")
        long_poll = Scenario(api, Fleet(servers, url), stamps, agents_dir)
        await long_poll.fleet.start(wait=LONG_POLL_WAIT)
        for _ in range(rounds):
            await long_poll.round(with_real=True)
            await asyncio.sleep(random.uniform(0.3, 1.0))
        await long_poll.fleet.stop()
        base = Scenario(api, Fleet(servers, url), stamps, agents_dir, rounds_done=long_poll.rounds_done)
        await base.fleet.start(wait=0, interval=interval)
        for _ in range(baseline_rounds):
            await base.round(with_real=False)
            await asyncio.sleep(random.uniform(0, interval))  # publish at a random phase
        await base.fleet.stop()
    return report(long_poll, base, interval)


def report(long_poll: Scenario, base: Scenario, interval: float) -> dict[str, Any]:
    sim, real, polled = long_poll.sim.summary(), long_poll.real.summary(), base.sim.summary()
    sim["poll_errors"] = sum(a.errors for a in long_poll.fleet.agents)
    polled["poll_errors"] = sum(a.errors for a in base.fleet.agents)
    return {
        "long_poll_simulated": sim,
        "long_poll_real": real,
        "long_poll_real_hook_spawn": long_poll.real_spawn.summary(),
        "interval_simulated": {**polled, "interval_s": interval},
        "heat_default_derived": {
            "interval_s": HEAT_INTERVAL,
            "p50": HEAT_INTERVAL * 0.5,
            "p99": HEAT_INTERVAL * 0.99,
            "mean": HEAT_INTERVAL * 0.5,
        },
        "ratio_p50": ratio(polled["p50"], sim["p50"]),
        "ratio_p99": ratio(polled["p99"], sim["p99"]),
        "ratio_heat_p99_derived": ratio(HEAT_INTERVAL * 0.99, sim["p99"]),
    }


def ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow is not None and fast else None


def measure(
    workdir: Path, rounds: int = 10, baseline_rounds: int = 6, interval: float = 2.0
) -> dict[str, Any]:
    """Run figure (a) against its own control plane; returns the figures as a dict."""
    workdir.mkdir(parents=True)
    cp = start_plane(workdir, extra=["--provisioner", "local", f"--agent-arg=--poll-wait={LONG_POLL_WAIT:g}"])
    try:
        return asyncio.run(_measure(cp, workdir, rounds, baseline_rounds, interval))
    finally:
        stop_process(cp.proc)  # it stops its local agents
        stop_leftover_agents(cp.data_dir / "agents")
