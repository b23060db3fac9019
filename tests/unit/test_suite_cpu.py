"""bench/suite_cpu.py: `dump-acct`'s records read, and each process put in its kind."""

from __future__ import annotations

import datetime

from bench.suite_cpu import Process, kind, parse, pytest_of

#: Two records as dump-acct printed them on the build machine (2026-11-27): a control plane and the
#: pytest worker that started it.
SERVE = (
    "anneal          |v3|   712.00|    85.00|  4206.00|     0|     0|607232.00|8957952.00|   12998|"
    "   12983|     |       0|__      |Fri Nov 27 23:44:09 2026"
)
WORKER = (
    "python          |v3|  9808.00|   797.00|149069.00|     0|     0|593920.00|108658688.00|   12983|"
    "   12927|S    |       0|__      |Fri Nov 27 23:43:31 2026"
)


def test_a_record_gives_cpu_and_elapsed_seconds_pids_and_its_start() -> None:
    p = parse(SERVE)
    assert (p.command, p.cpu, p.elapsed, p.pid, p.ppid) == ("anneal", 7.97, 42.06, 12998, 12983)
    assert p.began == datetime.datetime(2026, 11, 27, 23, 44, 9)


def test_kinds_follow_the_command_its_life_and_its_parent() -> None:
    serve = parse(SERVE)
    worker = parse(WORKER)
    at = serve.began
    make = Process("make", 0.1, 1920.0, 10786, 1, at)
    main = Process("python", 11.7, 1508.2, worker.ppid, make.pid, at)
    cli = Process("anneal", 0.3, 0.4, 5, worker.pid, at)
    agent = Process("python", 0.5, 20.0, 6, serve.pid, at)
    hook = Process("python", 0.5, 2.0, 7, worker.pid, at)
    swift = Process("swift-proxy-ser", 4.0, 30.0, 8, worker.pid, at)
    venv = Process("python", 0.9, 4.0, 9, make.pid, at)  # `make install`'s, before the tests
    everything = [make, venv, main, worker, serve, cli, agent, hook, swift]
    parents = {p.pid: p for p in everything}
    assert pytest_of(everything, parents) is main
    assert [kind(p, parents, main.pid) for p in (main, worker, serve, cli, agent, hook, swift)] == [
        "pytest (its main process)",
        "pytest workers (the tests' own code)",
        "anneal serve",
        "anneal CLI",
        "python under anneal serve (local agents)",
        "python (other)",
        "swift servers",
    ]
