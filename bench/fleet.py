"""Several processes: publish -> document through HAProxy with 3 `anneal serve` on one PostgreSQL.

`python bench/fleet.py [--agents 1000] [--rounds 5]`. In one run, on one throw-away
PostgreSQL cluster (tests/support/pg.py), two set-ups on databases of their own:

* baseline: one `anneal serve`, the simulated agents long-polling it directly;
* fleet: three `anneal serve` sharing a database and a data dir behind HAProxy
  (packaging/haproxy/anneal.cfg, tests/support/haproxy.py), the simulated agents
  long-polling HAProxy, which spreads each poll over the processes; the stack is
  updated through HAProxy too, so whichever process steps it, two thirds of the
  agents wait on another: their documents reach them by NOTIFY.

Each round gives every agent a new generation (bench/latency.py's ``Scenario``): publish
is the deployment's ``started_at``, arrival the moment a simulated agent holds the
document. The table poll is left at its default (10 s on PostgreSQL). Prints p50 / p99
of both and the ratio; the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/fleet.py` puts bench/, not the repository, on the path
    sys.path.insert(0, str(ROOT))

from bench.harness import start_plane  # noqa: E402
from bench.rollout import fleet_rounds  # noqa: E402
from tests.support.controlplane import ControlPlane  # noqa: E402
from tests.support.haproxy import running_haproxy  # noqa: E402
from tests.support.pg import Postgres, running_postgres  # noqa: E402
from tests.support.processes import free_port, stop_all  # noqa: E402

LONG_POLL_WAIT = 25.0


def single(pg: Postgres, workdir: Path, agents: int, count: int) -> dict[str, Any]:
    home = workdir / "single"
    home.mkdir()
    cp = start_plane(home, extra=["--db", pg.new_database(), "--provisioner", "enrol"])
    try:
        return asyncio.run(fleet_rounds(cp, agents, count, home))
    finally:
        stop_all([cp.proc])


def three(pg: Postgres, workdir: Path, agents: int, count: int) -> dict[str, Any]:
    db, ports, front_port = pg.new_database(), [free_port() for _ in range(3)], free_port()
    extra = ["--db", db, "--provisioner", "enrol", "--public-url", f"http://127.0.0.1:{front_port}"]
    planes: list[ControlPlane] = []
    try:
        for i, port in enumerate(ports):
            home = workdir / f"p{i}"
            home.mkdir()
            if i:  # one data dir: the same keys and admin token
                (home / "data").symlink_to(workdir / "p0" / "data")
            planes.append(start_plane(home, extra=extra, port=port))
        with running_haproxy(workdir, ports, front_port) as front:
            first = planes[0]
            via = ControlPlane(front.url, first.token, first.data_dir, first.proc, first.log)
            result = asyncio.run(fleet_rounds(via, agents, count, workdir))
            result["document_polls_by_process"] = dict(front.answered_by("/v1/agent/document"))
            return result
    finally:
        stop_all([cp.proc for cp in planes])


def measure(workdir: Path, agents: int, count: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    with running_postgres() as pg:
        base = single(pg, workdir, agents, count)
        fleet = three(pg, workdir, agents, count)
    return {
        "agents": agents,
        "rounds": count,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "single_process": base,
        "three_behind_haproxy": fleet,
    }


def show(r: dict[str, Any]) -> str:
    base, fleet = r["single_process"], r["three_behind_haproxy"]
    lines = [
        f"{r['agents']} simulated agents, {r['rounds']} rounds; load {r['load_before']:.1f} -> {r['load_after']:.1f}"
    ]
    for q in ("p50", "p99"):
        b, f = base[q], fleet[q]
        ratio = f"{b / f:.2f}x" if b and f else "-"
        lines.append(
            f"publish -> document {q}: 3 processes behind HAProxy {f:.3f} s, 1 process {b:.3f} s ({ratio})"
        )
    lines.append(
        f"missed: {fleet['missed']} / {base['missed']}; polls by process: {fleet['document_polls_by_process']}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anneal-bench-fleet-") as tmp:
        result = measure(Path(tmp), args.agents, args.rounds)
    print(show(result))
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
