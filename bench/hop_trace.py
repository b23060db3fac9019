"""Where a no-op deployment's hop spends its time, step by step, control plane and agent.

    .venv/bin/python bench/hop_trace.py [--changes 30]

One `anneal serve` (enrol provisioner, SQLite) and one `anneal-agent`, both run through
bench/hop_probe.py, which stamps the steps of a hop; the stack of bench/heat_chain.py's
no-op deployment is updated --changes times, each update waited for. A hop runs from the
deployment's ``started_at`` (the engine's step stamps it) to its ``completed_at`` (the
signal's transaction stamps it), both from the control plane's API. Each hop's milestones
are taken in the order below, each the first stamp after the one before; the table gives
each interval's median and the hop's, in milliseconds. The probe's own stamps cost a few
microseconds each. Run it on an idle machine: every interval is CPU on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.heat_chain import NOOP, Admin
from tests.support.controlplane import start_control_plane
from tests.support.processes import command, stop_process

#: (stamp, what the interval that ends at it holds)
MILESTONES = (
    ("commit>", "the rest of the engine's step after stamping started_at"),
    ("render>", "the step's flush and commit"),
    ("render<", "reading, rendering and signing the server's document"),
    ("answer>", "waking the long-poll"),
    ("answer<", "the long-poll's credential check (the engine releases its work row meanwhile)"),
    ("fetch<", "the answer's way to the agent"),
    ("accept<", "verifying the document, keeping it in the ledger"),
    ("hook>", "the agent's loop picks the deployment"),
    ("tool>", "marking it started, preparing the script"),
    ("tool<", "the script (/bin/sh, no-op) from start to exit"),
    ("hook<", "recording the result in the ledger"),
    ("deliver>", "the outbox picks the signal"),
    ("signal>", "the signal's POST reaches the control plane"),
)


def hop_intervals(started: float, completed: float, stamps: list[tuple[float, str]]) -> list[float] | None:
    """The intervals between the hop's milestones, in ms; None when a milestone is missing."""
    at, out = started, []
    for event, _ in MILESTONES:
        found = next((t for t, e in stamps if e == event and at <= t <= completed), None)
        if found is None:
            return None
        out.append((found - at) * 1000)
        at = found
    out.append((completed - at) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="anneal-hop-"))
    stamps_file = work / "stamps"
    probe = [sys.executable, str(Path(__file__).with_name("hop_probe.py"))]
    env = {"HOP_STAMPS": str(stamps_file)}
    (work / "plane").mkdir()
    plane = start_control_plane(
        work / "plane", "--log-level", "WARNING", "--provisioner", "enrol", defaults=(), wrap=probe, env=env
    )
    agent = None
    try:
        admin = Admin(plane.url, plane.token)
        token = admin.call("POST", "/v1/servers", {"name": "hop"})["enrol_token"]
        state = work / "agent"
        enrol = [
            command("anneal-agent"),
            "enrol",
            "--url",
            plane.url,
            f"--token={token}",
            "--state-dir",
            str(state),
        ]
        subprocess.run(enrol, check=True, capture_output=True, timeout=60)
        with open(work / "agent.log", "ab") as log:
            agent = subprocess.Popen(
                [*probe, "agent", "run", "--state-dir", str(state)],
                env={**os.environ, **env, "ANNEAL_LOG_LEVEL": "WARNING"},
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        admin.put_stack("hop", NOOP, {"n": "first", "server": "hop"}, create=True)
        hops = []
        for i in range(args.changes):
            admin.put_stack("hop", NOOP, {"n": f"change-{i}", "server": "hop"}, create=False)
            dep = admin.deployments("hop")[0]
            hops.append((dep["started_at"], dep["completed_at"]))
    finally:
        stop_process(agent)
        stop_process(plane.proc)
    stamps = sorted((float(t), e) for t, e in (line.split() for line in stamps_file.read_text().splitlines()))
    traced = [t for s, c in hops if (t := hop_intervals(s, c, stamps)) is not None]
    print(
        f"{len(hops)} hops, {len(traced)} with every milestone; hop p50 "
        f"{statistics.median((c - s) * 1000 for s, c in hops):.1f} ms"
    )
    names = [
        *(f"→ {e:9s} {what}" for e, what in MILESTONES),
        "→ completed_at  the signal's transaction up to its stamp",
    ]
    for n, name in enumerate(names):
        print(f"{statistics.median(t[n] for t in traced):6.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
