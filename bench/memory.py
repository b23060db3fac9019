"""(c) Control-plane RSS with 1,000 enrolled servers, 5,000 deployments and every agent long-polling.

The servers are enrolled as agents would enrol them; 50 stacks put 100 NO_SIGNAL
deployments each on 20 of them (5 per server), so every stack completes and
every document holds 5 items. Then 1,000 simulated agents hold a long-poll each,
as a fleet at rest does. RSS is VmRSS from /proc/<pid>/status; the baseline is
the idle control plane right after start.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import (
    Api,
    deployments_template,
    enrol_servers,
    start_plane,
    status_kib,
)
from bench.simagent import Fleet
from tests.support.controlplane import ControlPlane
from tests.support.processes import stop_process

SERVERS = 1000
STACKS = 50
PER_SERVER = 5
LONG_POLL_WAIT = 25.0


async def _measure(cp: ControlPlane) -> dict[str, Any]:
    rss: dict[str, int] = {}
    timings: dict[str, float] = {}
    await asyncio.sleep(1)
    rss["idle"] = status_kib(cp.proc.pid, "VmRSS")
    async with aiohttp.ClientSession() as http:
        api = Api(http, cp)
        start = time.monotonic()
        servers = await enrol_servers(api, [f"mem-{i:04d}" for i in range(SERVERS)])
        timings["enrol_s"] = time.monotonic() - start
        rss["servers"] = status_kib(cp.proc.pid, "VmRSS")
        start = time.monotonic()
        per_stack = SERVERS // STACKS
        for n in range(STACKS):
            names = [s.name for s in servers[n * per_stack : (n + 1) * per_stack]]
            await api.put_stack(
                f"stack-{n}", deployments_template(names, PER_SERVER, f"stack {n}"), create=True
            )
            await api.wait_stack(f"stack-{n}")
        timings["stacks_s"] = time.monotonic() - start
        rss["deployments"] = status_kib(cp.proc.pid, "VmRSS")
        deployments = len(await api.call("GET", "/v1/deployments"))
    fleet = Fleet(servers, f"{cp.url}/v1/agent/document")
    await fleet.start(wait=LONG_POLL_WAIT)
    await asyncio.sleep(2)
    rss["long_polls"] = status_kib(cp.proc.pid, "VmRSS")
    open_fds = len(list(Path(f"/proc/{cp.proc.pid}/fd").iterdir()))  # shows the long-polls are held
    polls = sum(a.polls for a in fleet.agents)
    documents = sum(a.document_bytes for a in fleet.agents)  # what the HTTP publisher keeps in memory
    await fleet.stop()
    return {
        "servers": SERVERS,
        "deployments": deployments,
        "stacks": STACKS,
        "long_polls_held": len(servers),
        "rss_kib": rss,
        "peak_kib": status_kib(cp.proc.pid, "VmHWM"),
        "timings": timings,
        "document_fetches": polls,
        "open_fds": open_fds,
        "documents_bytes": documents,
        "ratio": rss["long_polls"] / rss["idle"],
    }


def measure(workdir: Path) -> dict[str, Any]:
    """Run figure (c) against its own control plane."""
    workdir.mkdir(parents=True)
    cp = start_plane(workdir)
    try:
        return asyncio.run(_measure(cp))
    finally:
        stop_process(cp.proc)
