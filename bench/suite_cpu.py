"""Where the test suite's CPU goes, by kind of process, from Linux process accounting.

    apt-get install -y acct                       # accton, dump-acct
    touch /tmp/pacct && accton /tmp/pacct         # every process that ends is recorded
    make test; accton off
    .venv/bin/python bench/suite_cpu.py /tmp/pacct

The suite is CPU-bound on 2 cores (docs/performance.md, "The test suite's own time"), so its
wall time follows the CPU its processes use. Accounting records each process as it exits with
its own user + system time (not its children's), its elapsed time and its parent: enough to
tell a control plane (`anneal serve`, which lives for seconds) from a CLI call, and pytest's
workers (the children of the longest-lived `python` that `make` started) from the processes the
tests start. Only processes that started after the first pytest worker count, so the tools'
installs and lint are left out.
Accounting sees the whole machine: run it when nothing else does.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import subprocess
from dataclasses import dataclass

#: pytest-xdist's workers: the children of pytest's main process.
WORKERS = "pytest workers (the tests' own code)"
#: An `anneal` process that lived at least this long served; a shorter one was a CLI call.
SERVE_SECONDS = 3.0


@dataclass(frozen=True)
class Process:
    command: str
    cpu: float
    elapsed: float
    pid: int
    ppid: int
    began: datetime.datetime


def parse(line: str) -> Process:
    """One record as `dump-acct` prints it: times in ticks of 1/100 s, the begin time last."""
    f = [field.strip() for field in line.split("|")]
    began = datetime.datetime.strptime(f[14], "%a %b %d %H:%M:%S %Y")
    return Process(f[0], (float(f[2]) + float(f[3])) / 100, float(f[4]) / 100, int(f[9]), int(f[10]), began)


def read(path: str) -> list[Process]:
    text = subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True).stdout
    return [parse(line) for line in text.splitlines() if line.strip()]


def kind(p: Process, parents: dict[int, Process], pytest: int) -> str:
    """*p*'s kind; *pytest* is the PID of pytest's main process."""
    if p.pid == pytest:
        return "pytest (its main process)"
    if p.ppid == pytest:
        return WORKERS
    if p.command == "anneal":
        return "anneal serve" if p.elapsed >= SERVE_SECONDS else "anneal CLI"
    if p.command == "python":
        parent = parents.get(p.ppid)
        if parent is not None and parent.command == "anneal":
            return "python under anneal serve (local agents)"
        return "python (other)"
    if p.command.startswith("swift-"):
        return "swift servers"
    return p.command


def pytest_of(everything: list[Process], parents: dict[int, Process]) -> Process:
    """pytest's main process: the longest-lived `python` that `make` started."""
    found = [
        p
        for p in everything
        if p.command == "python" and getattr(parents.get(p.ppid), "command", "") == "make"
    ]
    if not found:
        raise SystemExit("no pytest in the records (a python process that make started)")
    return max(found, key=lambda p: p.elapsed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pacct", help="the accounting file `accton` wrote")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    everything = read(args.pacct)
    parents = {p.pid: p for p in everything}
    pytest = pytest_of(everything, parents)
    workers = [p for p in everything if p.ppid == pytest.pid]
    start = min([p.began for p in workers] or [pytest.began])
    cpu: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for p in everything:
        if p.began >= start:
            name = kind(p, parents, pytest.pid)
            cpu[name] += p.cpu
            count[name] += 1
    total, wall = sum(cpu.values()), max([p.elapsed for p in workers] or [pytest.elapsed])
    cores = os.cpu_count() or 1
    print(
        f"tests from {start:%H:%M:%S}: {wall:.0f} s wall, {total:.0f} s CPU ({total / wall / cores:.0%} of {cores} cores)"
    )
    print(f"{'CPU s':>7} {'share':>6} {'procs':>6} {'CPU s each':>10}  kind")
    for name, seconds in sorted(cpu.items(), key=lambda item: -item[1])[: args.top]:
        each = seconds / count[name]
        print(f"{seconds:7.0f} {seconds / total:6.1%} {count[name]:6d} {each:10.2f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
