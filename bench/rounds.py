"""Rounds of a rollout to simulated (and real) agents, and where each generation arrived (bench/latency.py, bench/rollout.py)."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.harness import Api, deployments_template, percentile
from bench.simagent import Fleet

REAL = ("real-0", "real-1")
#: The script's first command notes the time: that is "hook start" for a real agent. `date`, not
#: `python3 -c`: a python3 found on PATH may be a pyenv shim costing ~70 ms, charged to the agent.
STAMP_SCRIPT = '#!/bin/sh\ndate +%s.%N > "$VALUE.$deploy_server_id"\n'
ROUND_TIMEOUT = 60.0


@dataclass
class Samples:
    latencies: list[float] = field(default_factory=list)
    #: Simulated agents: publish to the document's bytes in, before the agent's check (the control
    #: plane's part, plus this process's own queueing).
    bytes_in: list[float] = field(default_factory=list)
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
        if self.bytes_in:
            out["bytes_in_p50"] = percentile(self.bytes_in, 50)
            out["bytes_in_p99"] = percentile(self.bytes_in, 99)
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
    #: Bound on one round (seconds): its documents in every agent's hand, then its stack settled.
    timeout: float = ROUND_TIMEOUT
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
        await self.fleet.wait_generation(k + 1, self.timeout)
        if with_real:
            await wait_files(self.stamps, f"round{k}.*", len(REAL), ROUND_TIMEOUT)
        await self.api.wait_stack("sim", self.timeout)
        await self.collect_sim(k + 1)
        if with_real:
            await self.api.wait_stack("real")
            await self.collect_real(k)

    async def collect_sim(self, generation: int) -> None:
        by_server = {a.server.server_id: a for a in self.fleet.agents}
        latencies, starts, arrivals = [], [], []
        for dep in await published(self.api, "sim"):
            agent, key = by_server[dep["server_id"]], (dep["id"], generation)
            got = agent.seen.get(key)
            if got is None or dep["generation"] != generation:
                self.sim.missed += 1
            else:
                latencies.append(got - dep["started_at"])
                self.sim.bytes_in.append(agent.bytes_in[key] - dep["started_at"])
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
    """Every deployment of *stack* with its publish time (``started_at``) and generation: one list request."""
    return list(await api.call("GET", f"/v1/deployments?stack={stack}"))


async def wait_files(directory: Path, pattern: str, count: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list(directory.glob(pattern))) >= count:
            await asyncio.sleep(0.05)  # the script may still be writing
            return True
        await asyncio.sleep(0.02)
    return False
