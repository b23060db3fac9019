"""What bench/scale.py prints: one line per size, and the shapes compared size by size."""

from __future__ import annotations

from typing import Any

#: Heat's best public figure (resources per minute), the baseline printed beside ours.
HEAT_PER_MIN = 2000


def _phase_rss(r: dict[str, Any]) -> str:
    """Peak RSS at the end of each phase, when the child measured it."""
    marks = [f"{k} {v['peak_rss_mb']}" for k, v in r["phases"].items() if "peak_rss_mb" in v]
    return f" (after {', '.join(marks)})" if marks else ""


def report(label: str, n: int, r: dict[str, Any] | None, base: dict[str, float]) -> None:
    """One line per size: rate, CPU per deployment, growth against the smallest size, RSS."""
    if r is None:
        print(f"{label:<22} {n:>6} deployments: did not finish within the timeout", flush=True)
        return
    c, u, d = (r["phases"][k] for k in ("create", "update10", "delete"))
    per_min = n / c["seconds"] * 60
    cpu_ms = c["cpu"] / n * 1000 if "cpu" in c else None  # the previous bench did not measure it
    base.setdefault("wall", c["seconds"] / n)
    if cpu_ms is not None:
        base.setdefault("cpu", cpu_ms)
    cpu = f"{cpu_ms:5.2f} ms" if cpu_ms is not None else "n/a"
    cpu_x = f"{cpu_ms / base['cpu']:4.2f}x" if cpu_ms is not None else "n/a"
    print(
        f"{label:<22} {n:>6} deployments: create {c['seconds']:7.1f} s ({c['status']}, {per_min:7.0f}/min = "
        f"{per_min / HEAT_PER_MIN:5.2f}x Heat's {HEAT_PER_MIN}/min; {c['seconds'] / n * 1000:5.2f} ms and CPU {cpu}/deployment; "
        f"per-deployment time {c['seconds'] / n / base['wall']:4.2f}x, CPU {cpu_x} the "
        f"smallest size's), update 10% {u['seconds']:6.1f} s ({u['status']}, {u['signals']} runs), "
        f"delete {d['seconds']:6.1f} s ({d['status']}), peak RSS {r['peak_rss_mb']} MB = {r['peak_rss_mb'] * 1024 / n:5.1f} KB/deployment{_phase_rss(r)}, "
        f"{r.get('steps', {}).get('n', '?')} engine steps alone and {r.get('steps', {}).get('batches', 0)} batches "
        f"of {r.get('steps', {}).get('batched_stacks', 0)} stack steps, {r.get('signal_transactions')} signal transactions"
        + (
            f"; the CLI printed {c['events_printed']}/{u['events_printed']}/{d['events_printed']} of "
            f"{c['events_stored']}/{u['events_stored']}/{d['events_stored']} events, its peak RSS "
            f"{max(p['cli_peak_rss_mb'] for p in (c, u, d))} MB"
            if "events_printed" in c
            else ""
        ),
        flush=True,
    )
    _agents(r, n)


def _agents(r: dict[str, Any], n: int) -> None:
    """What the simulated agents did in each phase (bench/scale_agents.py), and the lock watch if on."""
    if "agents" not in r:  # an older tree's child
        return
    parts = [
        f"{k} {a['signalled']} signalled, {a['retries']} sent again, {a['final']} refused for good, "
        f"{a['gave_up']} given up, {a['pending']} pending"
        for k, a in ((k, v["agents"]) for k, v in r["phases"].items() if "agents" in v)
    ]
    every = "every deployment signalled" if r["phases"]["create"]["signals"] >= n else "NOT every deployment"
    print(f"    agents ({every} at create): {'; '.join(parts)}", flush=True)
    for reason, count in r["agents"]["reasons"].items():
        print(f"    refused {count}x: {reason}", flush=True)
    if "locks" in r:
        print(f"    locks: {r['locks']}", flush=True)


def compare_shapes(results: list[dict[str, Any]]) -> None:
    """Each shape against the flat one of the same code, size and database, measured in this run."""
    flat = {(r["db"], r["implementation"], r["deployments"]): r for r in results if r["shape"] == "flat"}
    for r in results:
        base = flat.get((r["db"], r["implementation"], r["deployments"]))
        if r["shape"] == "flat" or base is None:
            continue
        ratios = {
            k: _total(r, k) / _total(base, k) for k in ("seconds", "cpu") if _total(base, k) and _total(r, k)
        }
        print(
            f"{r['implementation']} {r['db']} {r['shape']} against flat, {r['deployments']} deployments: "
            f"time (create + update + delete) {ratios.get('seconds', 0):.2f}x, CPU {ratios.get('cpu', 0):.2f}x, "
            f"peak RSS {r['peak_rss_mb'] / base['peak_rss_mb']:.2f}x (goal: within 1.3x)",
            flush=True,
        )


def _total(r: dict[str, Any], key: str) -> float:
    return float(sum(p.get(key, 0) for p in r["phases"].values()))
