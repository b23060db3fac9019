"""Three `anneal serve` on one PostgreSQL behind HAProxy: changes reach every process by NOTIFY.

Every process runs with `--republish-poll 3600`, so the table poll that used to carry
other processes' changes cannot fire during the test: a document committed by one
process reaches an agent long-polling another only through LISTEN/NOTIFY
(control/store/notify.py). The measured publish -> hook start times are printed, not
asserted. Then one process is killed by its PID while agents poll through HAProxy:
its agents move to the others, and every deployment runs exactly once.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.agents import start_agent
from tests.support.controlplane import ControlPlane, start_control_plane
from tests.support.haproxy import Haproxy, running_haproxy
from tests.support.pg import Postgres
from tests.support.processes import free_port, stop_all
from tests.support.templates import script_per_server
from tests.support.waiting import wait_until

SCRIPT = """\
#!/bin/sh
date +%s.%N > "$DIR/$NAME.$REV.stamp"
sleep 0.3
echo "$NAME $REV" >> "$DIR/runs"
printf ok > "$heat_outputs_path.done"
"""
PARAMS = {"dir": "string", "rev": "string"}


def fleet(names: list[str]) -> str:
    """One script deployment on each of *names* (existing servers); every run leaves a stamp and a line."""
    inputs = [{"DIR": "{get_param: dir}", "NAME": n, "REV": "{get_param: rev}"} for n in names]
    return script_per_server(SCRIPT, names, inputs=inputs, output="done", params=PARAMS)


@dataclass
class Fleet:
    planes: list[ControlPlane]
    front: Haproxy

    @property
    def lb(self) -> ControlPlane:
        """The control plane as clients see it: HAProxy's URL, the first process's token."""
        first = self.planes[0]
        return ControlPlane(self.front.url, first.token, first.data_dir, first.proc, first.log)


@pytest.fixture
def fleet_of_3(tmp_path: Path, postgres: Postgres) -> Iterator[Fleet]:
    """Three control planes on one new PostgreSQL database behind HAProxy, sharing one data dir (keys, token)."""
    db = postgres.new_database()
    ports = [free_port() for _ in range(3)]
    front_port = free_port()
    extra = ["--db", db, "--provisioner", "enrol", "--republish-poll", "3600", "--work-lease", "2"]
    extra += ["--public-url", f"http://127.0.0.1:{front_port}"]  # signal URLs in documents: through HAProxy
    started: list[ControlPlane] = []
    try:
        for i, port in enumerate(ports):
            home = tmp_path / f"p{i}"
            home.mkdir()
            if i:
                (home / "data").symlink_to(tmp_path / "p0" / "data")
            started.append(start_control_plane(home, *extra, port=port, defaults=()))
        with running_haproxy(tmp_path, ports, front_port) as front:
            yield Fleet(started, front)
    finally:
        stop_all([cp.proc for cp in started])


def runs(work: Path) -> collections.Counter[str]:
    path = work / "runs"
    return collections.Counter(path.read_text().splitlines() if path.exists() else [])


def latencies(cp: ControlPlane, stack: str, work: Path, rev: str) -> list[float]:
    """Publish (the deployment's started_at) -> its script's first line, per deployment of *stack*."""
    deps = cp.api("GET", f"/v1/deployments?stack={stack}").body
    return [float((work / f"{d['server_name']}.{rev}.stamp").read_text()) - d["started_at"] for d in deps]


def test_a_change_on_one_process_reaches_agents_long_polling_the_others(
    tmp_path: Path, fleet_of_3: Fleet
) -> None:
    """An update committed by one process reaches agents held by each of the three, by NOTIFY alone."""
    planes = fleet_of_3.planes
    work = tmp_path / "work"
    work.mkdir()
    names = [f"direct{i}" for i in range(3)]
    agents = [
        start_agent(planes[0], n, tmp_path / n, tmp_path / f"{n}.log", url=planes[i].url, poll_wait=50)
        for i, n in enumerate(names)
    ]
    try:
        for n in names:
            planes[0].wait_enrolled(n)
        params = {"dir": str(work), "rev": "r1"}
        assert 201 == planes[0].create("direct", fleet(names), params=params).status
        assert "CREATE_COMPLETE" == planes[0].wait_stack("direct", timeout=120)["status"]
        body = {"template": fleet(names), "parameters": {**params, "rev": "r2"}}
        assert 202 == planes[1].api("PUT", "/v1/stacks/direct", body).status
        assert "UPDATE_COMPLETE" == planes[2].wait_stack("direct", timeout=120)["status"]
        took = latencies(planes[0], "direct", work, "r2")
        print(f"\nNOTIFY across 3 processes: publish -> script start {', '.join(f'{t:.3f}' for t in took)} s")
        assert {f"{n} {r}" for n in names for r in ("r1", "r2")} == set(runs(work))
        assert all(v == 1 for v in runs(work).values())
        for cp in planes:  # the table poll never ran: the documents came by notification
            assert "republished" not in cp.log.read_text()
            assert "listening for other processes' document changes" in cp.log.read_text()
    finally:
        stop_all(agents)


def test_killing_one_of_three_processes_behind_haproxy_moves_its_agents_and_loses_nothing(
    tmp_path: Path, fleet_of_3: Fleet
) -> None:
    """Agents poll through HAProxy; one process is killed mid-rollout; every deployment runs once."""
    work = tmp_path / "work"
    work.mkdir()
    names = [f"lb{i}" for i in range(6)]
    planes, front, lb = fleet_of_3.planes, fleet_of_3.front, fleet_of_3.lb
    agents = [start_agent(lb, n, tmp_path / n, tmp_path / f"{n}.log", poll_wait=5) for n in names]
    try:
        for n in names:
            lb.wait_enrolled(n)
        params = {"dir": str(work), "rev": "r1"}
        assert 201 == lb.create("lb", fleet(names), params=params).status
        assert "CREATE_COMPLETE" == lb.wait_stack("lb", timeout=120)["status"]
        before = front.answered_by("/v1/agent/document")
        body = {"template": fleet(names), "parameters": {**params, "rev": "r2"}}
        assert 202 == lb.api("PUT", "/v1/stacks/lb", body).status
        wait_until(lambda: any(work.glob("*.r2.stamp")), "a first r2 hook run", 60, interval=0.05)
        planes[1].crash()  # kill -9 by its PID, mid-rollout
        assert "UPDATE_COMPLETE" == lb.wait_stack("lb", timeout=120)["status"]
        mark = front.lines()
        wait_until(lambda: len(front.answered_by("/v1/agent/document", since=mark)) >= 2, "polls after", 30)
        after = front.answered_by("/v1/agent/document", since=mark)
        report = json.dumps({"before": before, "after_kill": after})
        print(f"\nHAProxy, 3 processes, 6 agents, cp1 killed: document polls by process {report}")
        counted = runs(work)
        assert {f"{n} {r}" for n in names for r in ("r1", "r2")} == set(counted)
        assert all(v == 1 for v in counted.values()), counted
        assert 3 == len(before)  # the agents' polls were spread over all three processes
        assert after["cp0"] > 0 and after["cp2"] > 0
        assert 0 == after.get("cp1", 0)
    finally:
        stop_all(agents)
