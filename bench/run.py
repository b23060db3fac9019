"""Run the benchmarks: `python bench/run.py [--only a|b|c]` (or `make bench`).

(a) publish-to-hook-start latency, (b) no-change polls per second on one core,
(c) control-plane RSS at 1,000 servers, (d) the agent's footprint (bench/agent_rss.py:
idle VmRSS, idle requests, a no-op script deployment). Each figure has its baseline measured in
the same run; goals are reported as PASS or MISS and never fail the run. The
figures go to bench/results/<date>.json; docs/performance.md explains them.
`--long` then runs the long benches (LONG), each its own script printing its own figures
with its baseline of the same run (about two hours; `make bench-long`); `--million` the
one-million run on PostgreSQL (hours).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/run.py` puts bench/, not the repository, on the path
    sys.path.insert(0, str(ROOT))

from bench import agent_rss, latency, memory, polls  # noqa: E402

RESULTS = ROOT / "bench" / "results"
GOAL_P99_S = 1.0
GOAL_POLLS_PER_S = 10_000
GOAL_RSS_MB = 300  # megabytes, 10**6 bytes
#: One-minute load average above which the run warns that the machine is not quiet.
BUSY_LOAD = 0.5
FIGURES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "a": latency.measure,
    "b": polls.measure,
    "c": memory.measure,
    "d": agent_rss.measure,
}

#: The long benches `--long` runs after the figures: a title, then the script's arguments. Together
#: with (a)-(d) they measure every figure of issues 17 and 20, each against its baseline in the same run.
LONG: list[tuple[str, list[str]]] = [
    (
        "publish -> document, 1,000 long-polling agents",
        ["bench/latency.py", "--agents", "1000", "--rounds", "3"],
    ),
    (
        "publish -> document, 5,000 long-polling agents",
        ["bench/latency.py", "--agents", "5000", "--rounds", "2"],
    ),
    (
        "Heat's agent chain against anneal-agent",
        ["bench/heat_chain.py", "--changes", "20", "--chain-changes", "5"],
    ),
    ("1,000 agents, 3 processes behind HAProxy", ["bench/fleet.py", "--agents", "1000", "--rounds", "3"]),
    (
        "50,000 deployments through the API, both databases",
        ["bench/scale.py", "--sizes", "50000", "--db", "both", "--api", "--timeout", "1800"],
    ),
    (
        "one stack of 2,000 to 50,000 deployments, the engine alone",
        ["bench/scale.py", "--sizes", "2000,10000,50000", "--db", "both"],
    ),
    (
        "nested server templates against the flat shape, at the issue's size",
        [
            "bench/scale.py",
            "--sizes",
            "2000,50000",
            "--db",
            "sqlite",
            "--shapes",
            "flat,nested",
            "--timeout",
            "2400",
        ],
    ),
    ("reads of a big stack", ["bench/bigread.py", "--sizes", "10000,100000"]),
    ("a create request's peak memory", ["bench/create_peak.py", "--sizes", "100000,250000", "--update"]),
    ("the web view on 10,000 resources", ["bench/ui_scale.py", "--resources", "10000"]),
]
#: `--million` (hours, PostgreSQL): the growth curve to one million deployments in one stack.
MILLION: list[tuple[str, list[str]]] = [
    (
        "100,000 to 1,000,000 deployments on PostgreSQL",
        [
            "bench/scale.py",
            "--sizes",
            "100000,250000,1000000",
            "--db",
            "postgresql",
            "--probe",
            "--timeout",
            "14400",
        ],
    ),
    (
        "a create request of 1,000,000 deployments: peak memory",
        ["bench/create_peak.py", "--sizes", "1000000", "--update"],
    ),
]


def module(script: str) -> str:
    """``bench/x.py`` as the module ``bench.x``: run with ``-m`` from the repository, each finds ``bench``."""
    return script.removesuffix(".py").replace("/", ".")


def run_long(benches: list[tuple[str, list[str]]]) -> int:
    """Each of *benches* in turn; the number that failed (their output says why)."""
    failed = 0
    for title, argv in benches:
        print(f"\n== {title}: {' '.join(argv)}", flush=True)
        done = subprocess.run([sys.executable, "-m", module(argv[0]), *argv[1:]], cwd=ROOT, check=False)
        failed += done.returncode != 0
    return failed


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def goal(value: float | None, limit: float, below: bool = True) -> str:
    """PASS or MISS against a goal; no figure at all is a MISS."""
    if value is None:
        return "MISS"
    return "PASS" if (value < limit if below else value >= limit) else "MISS"


def num(value: float | None, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def rows_a(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    sim, real, spawn, base, heat = (
        r["long_poll_simulated"],
        r["long_poll_real"],
        r["long_poll_real_hook_spawn"],
        r["interval_simulated"],
        r["heat_default_derived"],
    )
    every = f"polling every {base['interval_s']:g} s"
    return [
        (
            f"(a) publish->document in hand p50, 100 simulated agents ({sim['n']} samples)",
            num(sim["p50"], ".3f", " s"),
            f"{num(base['p50'], '.3f', ' s')} ({every})",
            num(r["ratio_p50"], ".1f", "x"),
            "",
        ),
        (
            "(a) publish->document in hand p99, 100 simulated agents",
            num(sim["p99"], ".3f", " s"),
            f"{num(base['p99'], '.3f', ' s')} ({every})",
            num(r["ratio_p99"], ".1f", "x"),
            f"< {GOAL_P99_S:g} s {goal(sim['p99'], GOAL_P99_S)}",
        ),
        (
            f"(a) publish->script start p50 / p99, 2 real agents ({real['n']} samples)",
            f"{num(real['p50'], '.3f')} / {num(real['p99'], '.3f', ' s')}",
            "",
            "",
            f"< {GOAL_P99_S:g} s {goal(real['p99'], GOAL_P99_S)}",
        ),
        (
            "(a)   of which publish->agent starts the hook, p50 / p99",
            f"{num(spawn['p50'], '.3f')} / {num(spawn['p99'], '.3f', ' s')}",
            "",
            "",
            "",
        ),
        (
            "(a) Heat default 30 s polling: DERIVED, not measured",
            "",
            f"p50 {heat['p50']:g} s, p99 {heat['p99']:g} s",
            f"{num(r['ratio_heat_p99_derived'], '.0f', 'x')} (p99)",
            "",
        ),
    ]


def rows_b(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    nm, full = r["not_modified_304"], r["full_200"]
    tool = "wrk" if r["load_generator"] == "wrk" else "Python load generator: a lower bound"
    return [
        (
            f"(b) no-change polls/s, one core, 304 path ({tool})",
            f"{nm['rps']:,.0f}/s",
            f"{full['rps']:,.0f}/s (full {r['document_bytes']} B document)",
            f"{r['ratio']:.2f}x",
            f">= {GOAL_POLLS_PER_S:,} {goal(nm['rps'], GOAL_POLLS_PER_S, below=False)}",
        )
    ]


def rows_c(r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rss = {k: v * 1024 / 1e6 for k, v in r["rss_kib"].items()}  # MB
    peak = r["peak_kib"] * 1024 / 1e6
    return [
        (
            f"(c) RSS, {r['servers']} servers, {r['deployments']} deployments, long-polls held",
            f"{rss['long_polls']:.0f} MB",
            f"{rss['idle']:.0f} MB (idle after start)",
            f"{r['ratio']:.2f}x",
            f"< {GOAL_RSS_MB} MB {goal(rss['long_polls'], GOAL_RSS_MB)}",
        ),
        (
            "(c) peak RSS (VmHWM) during the run",
            f"{peak:.0f} MB",
            "",
            "",
            f"< {GOAL_RSS_MB} MB {goal(peak, GOAL_RSS_MB)}",
        ),
    ]


ROWS = {"a": rows_a, "b": rows_b, "c": rows_c, "d": agent_rss.rows}


def table(results: dict[str, Any]) -> str:
    head = ("figure", "measured", "baseline (same run)", "ratio", "goal")
    rows = [head] + [row for key in "abcd" if key in results for row in ROWS[key](results[key])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def save(results: dict[str, Any], started: float, load: float) -> Path:
    """Merge into today's file: a later `--only b` keeps the other figures of the day."""
    RESULTS.mkdir(exist_ok=True)
    day = datetime.date.fromtimestamp(started).isoformat()
    path = RESULTS / f"{day}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    stamp = datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(timespec="seconds")
    merged = {
        **previous,
        "machine": machine(),
        "figures": {
            **previous.get("figures", {}),
            **{k: {**v, "measured_at": stamp, "load_before": load} for k, v in results.items()},
        },
    }
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=sorted(FIGURES), help="run one figure")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, data) afterwards")
    parser.add_argument("--long", action="store_true", help="then the long benches (LONG, about two hours)")
    parser.add_argument(
        "--million", action="store_true", help="then one million deployments on PostgreSQL (MILLION, hours)"
    )
    args = parser.parse_args(argv)
    started = time.time()
    load = os.getloadavg()[0]
    if load > BUSY_LOAD:
        print(
            f"warning: load average {load:.2f} before the run: something else is using the cores, "
            "so the figures will come out low",
            file=sys.stderr,
        )
    workdir = Path(tempfile.mkdtemp(prefix="anneal-bench-"))
    results: dict[str, Any] = {}
    try:
        for key in [args.only] if args.only else sorted(FIGURES):
            print(f"figure ({key}) ...", flush=True)
            t0 = time.monotonic()
            results[key] = FIGURES[key](workdir / key)
            print(f"figure ({key}) took {time.monotonic() - t0:.0f} s", flush=True)
    except BaseException:
        print(f"benchmark failed; logs are in {workdir}", file=sys.stderr)
        raise
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(table(results))
    print(f"\nmachine: {machine()}; {time.time() - started:.0f} s in all")
    print(f"results: {save(results, started, load)}")
    benches = (LONG if args.long else []) + (MILLION if args.million else [])
    return 1 if run_long(benches) else 0


if __name__ == "__main__":
    sys.exit(main())
