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

import argparse
import asyncio
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/latency.py` puts bench/, not the repository, on the path
    sys.path.insert(0, str(ROOT))

from bench import rollout  # noqa: E402
from bench.harness import Api, deployments_template, enrol_servers, start_plane, stop_leftover_agents  # noqa: E402
from bench.rounds import REAL, ROUND_TIMEOUT, STAMP_SCRIPT, Scenario, wait_files  # noqa: E402
from bench.simagent import Fleet  # noqa: E402
from tests.support.controlplane import ControlPlane  # noqa: E402
from tests.support.processes import stop_process  # noqa: E402

SIMULATED = 100
LONG_POLL_WAIT = 25.0
#: Heat's os-collect-config default polling interval (seconds), for the derived figure.
HEAT_INTERVAL = 30.0


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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--agents", type=int, help="N simulated agents, this tree against --baseline (bench/rollout.py)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--verify-after",
        action="store_true",
        help="simulated agents verify each round's documents once all arrived, each one's check time added to its arrival",
    )
    parser.add_argument("--baseline", default=None, help="the commit whose control plane is the baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anneal-bench-latency-") as tmp:
        if args.agents is None:  # figure (a) as bench/run.py runs it
            result = measure(Path(tmp) / "a", rounds=args.rounds)
            print(json.dumps(result, indent=1, sort_keys=True))
            return 0
        result = rollout.measure(
            Path(tmp), args.agents, args.rounds, args.baseline or rollout.BASELINE, args.verify_after
        )
    print(json.dumps(result, indent=1, sort_keys=True))
    print(rollout.show(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
