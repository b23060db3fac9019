"""Publish -> document at fleet size: `python bench/latency.py --agents N [--rounds R] [--baseline COMMIT]`.

N simulated agents (bench/simagent.py: each verifies its document's Ed25519 signature,
expiry, address and serial as agent/verify.py does) long-poll one `anneal serve` on
SQLite; each round gives every one of them a new generation in one stack update.
Publish is the deployment's ``started_at`` (stamped by the engine step as it acts on
it), arrival the moment the simulated agent holds the verified document (the moment its
bytes were in, before the check, is printed too). In the same
run, the same rounds against the control plane of *COMMIT* (default d288584, main
before the walk committed and published in small slices: `git archive` of its
control/, agent/ and hooks/, run with PYTHONPATH, as bench/agent_rss.py runs its
baseline agent). The simulator's own cost is measured too: its CPU seconds per round
beside the control plane's, and, alone (nothing else running in this process), what
accepting one document costs it (decode, verify, serial), times N.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.agent_rss import baseline_tree, env_for
from bench.harness import Api, cpu_seconds, enrol_servers, start_plane
from bench.rounds import Scenario
from bench.simagent import Fleet, SimAgent
from tests.support.controlplane import ControlPlane
from tests.support.processes import stop_all

BASELINE = "d288584"
LONG_POLL_WAIT = 25.0
#: Documents re-accepted by fresh simulated agents to time the simulator's verification alone.
VERIFY_SAMPLE = 200


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fleet_rounds(
    cp: ControlPlane, agents: int, count: int, workdir: Path, defer: bool = False
) -> dict[str, Any]:
    """Enrol *agents* simulated servers through *cp*, long-poll it, update the stack *count* times.

    *defer*: the agents verify each round's documents once all have arrived (simagent.py ``defer``).
    """
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        api = Api(http, cp)
        servers = await enrol_servers(api, [f"sim-{i:04d}" for i in range(agents)])
        fleet = Fleet(servers, f"{cp.url}/v1/agent/document", defer=defer)
        # A round of 5,000 deployments on a loaded machine takes minutes with the baseline's one commit.
        scenario = Scenario(api, fleet, workdir, workdir, timeout=max(60.0, agents * 0.12))
        await scenario.fleet.start(wait=LONG_POLL_WAIT)
        plane_cpu, sim_cpu, started = cpu_seconds(cp.proc.pid), _self_cpu(), time.monotonic()
        try:
            for _ in range(count):
                await scenario.round(with_real=False)
                await asyncio.sleep(0.5)
        finally:
            elapsed = time.monotonic() - started
            plane_cpu, sim_cpu = cpu_seconds(cp.proc.pid) - plane_cpu, _self_cpu() - sim_cpu
            await scenario.fleet.stop()
        out = scenario.sim.summary()
        out["poll_errors"] = sum(a.errors for a in scenario.fleet.agents)
        out["rejected"] = sum(a.rejected for a in scenario.fleet.agents)
        out["verified"] = all(a.serial is not None for a in scenario.fleet.agents)
        out["cpu_s_per_round"] = {"control_plane": plane_cpu / count, "simulator": sim_cpu / count}
        out["wall_s_per_round"] = elapsed / count
        out["verify_alone"] = verify_alone(scenario.fleet.agents)
        return out


def verify_alone(agents: list[SimAgent]) -> dict[str, Any]:
    """What accepting one document costs the simulator alone, timed on documents the fleet received."""
    sample = [a for a in agents if a.last_body][:VERIFY_SAMPLE]
    fresh = [SimAgent(a.server, a.url) for a in sample]
    started = time.perf_counter()
    for agent, got in zip(fresh, sample, strict=True):
        agent.accept(got.last_body)
    per_doc = (time.perf_counter() - started) / max(len(sample), 1)
    assert not any(a.rejected for a in fresh), "a document the fleet accepted was refused when timed"
    return {"documents": len(sample), "s_per_document": per_doc, "s_for_the_fleet": per_doc * len(agents)}


def one_plane(
    workdir: Path, label: str, tree: Path | None, agents: int, count: int, defer: bool
) -> dict[str, Any]:
    """The rounds against one control plane: this tree's (*tree* None) or the baseline's."""
    home = workdir / label
    home.mkdir()
    env = env_for(tree) if tree is not None else None
    cp = start_plane(home, extra=["--provisioner", "enrol"], env=env)
    try:
        return asyncio.run(fleet_rounds(cp, agents, count, home, defer))
    finally:
        stop_all([cp.proc])


def measure(
    workdir: Path, agents: int, count: int, baseline: str = BASELINE, defer: bool = False
) -> dict[str, Any]:
    load_before = os.getloadavg()
    tree = baseline_tree(workdir, baseline, ("control", "agent", "hooks"))
    now = one_plane(workdir, "now", None, agents, count, defer)
    base = one_plane(workdir, "base-plane", tree, agents, count, defer)
    return {
        "agents": agents,
        "rounds": count,
        "baseline_commit": baseline,
        "verified": "after each round, each one's check time added to its arrival" if defer else "on arrival",
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "now": now,
        "baseline": base,
    }


def show(r: dict[str, Any]) -> str:
    now, base = r["now"], r["baseline"]
    load = f"load {r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f} (1 min average, 2 cores)"
    lines = [
        f"{r['agents']} simulated agents (documents verified {r['verified']}), {r['rounds']} rounds; {load}"
    ]
    for q in ("p50", "p99", "max"):
        b, n = base[q], now[q]
        ratio = f"{b / n:.1f}x" if b and n else "-"
        lines.append(
            f"publish -> document {q}: {n:.3f} s; baseline {r['baseline_commit']} {b:.3f} s ({ratio})"
        )
    lines.append(
        f"bytes in, before the agent's check, p50 / p99: {now['bytes_in_p50']:.3f} / {now['bytes_in_p99']:.3f} s; "
        f"baseline {base['bytes_in_p50']:.3f} / {base['bytes_in_p99']:.3f} s"
    )
    for who, res in (("now", now), ("baseline", base)):
        cpu, alone = res["cpu_s_per_round"], res["verify_alone"]
        lines.append(
            f"{who}: missed {res['missed']}, rejected {res['rejected']}, poll errors {res['poll_errors']}; "
            f"CPU per round control plane {cpu['control_plane']:.2f} s, simulator {cpu['simulator']:.2f} s; "
            f"simulator alone: {alone['s_per_document'] * 1e3:.2f} ms a document, "
            f"{alone['s_for_the_fleet']:.3f} s for all {r['agents']}"
        )
    return "\n".join(lines)
