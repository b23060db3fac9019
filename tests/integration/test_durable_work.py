"""Durable leased work: kill -9 at random instants, several processes on one PostgreSQL.

R01 (control plane SIGKILL mid-rollout) with real agents on SQLite and on PostgreSQL,
and several `anneal serve` processes sharing one PostgreSQL behind a loopback front,
killed and restarted at random. Each prints its pass figures.

R01_KILLS sets the kills per phase of R01 (create, update) and in the whole shared
PostgreSQL run: 3 in CI (it was 5), more for a longer run
(`R01_KILLS=20 .venv/bin/pytest -s tests/integration/test_durable_work.py`). Each kill
also fails the agents' long polls, so their back-off after the last restart grows with it.
"""

from __future__ import annotations

import collections
import os
import random
import re
import time
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.pg import Postgres
from tests.support.processes import free_port
from tests.support.proxy import Front

KILLS = int(os.environ.get("R01_KILLS", "3"))
LEASE = ["--work-lease", "2"]


def fleet_template(servers: int, chain: int) -> str:
    """*servers* servers, each with a chain of *chain* deployments; every hook notes its run."""
    lines = [
        "heat_template_version: 2018-08-31",
        "parameters:",
        "  dir: {type: string}",
        "  rev: {type: string, default: r1}",
        "resources:",
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties:",
        "      group: script",
        "      inputs: [{name: DIR}, {name: NAME}, {name: REV}]",
        "      outputs: [{name: done}]",
        "      config: |",
        "        #!/bin/sh",
        '        sleep "0.$(( $$ % 7 + 2 ))"',
        '        echo "$NAME $REV $deploy_action" >> "$DIR/runs"',
        '        printf ok > "$heat_outputs_path.done"',
    ]
    for s in range(servers):
        lines.append(f"  srv{s}: {{type: OS::Heat::DeployedServer, properties: {{name: fleet-{s}}}}}")
        for d in range(chain):
            after = f", depends_on: [d{s}x{d - 1}]" if d else ""
            lines.append(
                f"  d{s}x{d}: {{type: OS::Heat::SoftwareDeployment{after}, properties: {{"
                f"name: d{s}x{d}, config: {{get_resource: cfg}}, server: {{get_resource: srv{s}}}, "
                f"input_values: {{DIR: {{get_param: dir}}, NAME: d{s}x{d}, REV: {{get_param: rev}}}}}}}}"
            )
    return "\n".join(lines) + "\n"


def runs(work: Path) -> collections.Counter[str]:
    path = work / "runs"
    return collections.Counter(path.read_text().splitlines() if path.exists() else [])


@pytest.mark.catalogue("R01")
def test_control_plane_killed_at_random_instants_loses_and_repeats_nothing(
    tmp_path: Path, db_args: list[str]
) -> None:
    """R01: kill -9 the control plane KILLS times during create and update; nothing lost or run twice."""
    work = tmp_path / "work"
    work.mkdir()
    servers, chain = 4, 3
    template = fleet_template(servers, chain)
    rng = random.Random(1)
    cp = start_control_plane(tmp_path, *db_args, *LEASE)
    port = cp.port
    kills = 0
    try:
        assert 201 == cp.create("r01", template, params={"dir": str(work)}).status
        for phase, rev in (("create", None), ("update", "r2")):
            if rev is not None:
                body = {"template": template, "parameters": {"dir": str(work), "rev": rev}}
                assert 202 == cp.api("PUT", "/v1/stacks/r01", body).status
            for _ in range(KILLS):
                time.sleep(rng.uniform(0.3, 2.5))
                cp.crash()
                kills += 1
                cp = start_control_plane(tmp_path, *db_args, *LEASE, port=port)
            final = cp.wait_stack("r01", timeout=300)
            assert f"{phase.upper()}_COMPLETE" == final["status"], final
        deps = cp.api("GET", "/v1/deployments?stack=r01").body
        counted = runs(work)
        expected = {
            f"d{s}x{d} {rev} {action}"
            for s in range(servers)
            for d in range(chain)
            for rev, action in (("r1", "CREATE"), ("r2", "UPDATE"))
        }
        lost = expected - set(counted)
        doubles = {k: n for k, n in counted.items() if n > 1}
        stuck = [d for d in deps if d["status"] != "COMPLETE"]
        print(
            f"\nR01 [{'postgresql' if db_args else 'sqlite'}]: {kills} kills, {len(expected)} hook runs "
            f"expected, lost {len(lost)}, double runs {len(doubles)}, stuck {len(stuck)}"
        )
        assert not lost
        assert not doubles
        assert not stuck
        assert set(counted) == expected
    finally:
        stop_control_plane(cp)


def test_several_processes_share_one_postgresql_and_any_may_die(tmp_path: Path, postgres: Postgres) -> None:
    """Three `anneal serve` on one PostgreSQL behind one front; kill -9 one at random, restart it."""
    work = tmp_path / "work"
    work.mkdir()
    db = postgres.new_database()
    ports = [free_port() for _ in range(3)]
    front = Front(ports)
    extra = ["--db", db, "--public-url", front.url, *LEASE]
    planes: list[ControlPlane] = []
    dirs = [tmp_path / f"p{i}" for i in range(3)]
    for i, port in enumerate(ports):
        dirs[i].mkdir()
        if i:  # one data dir (keys, admin token, local agents' state) shared by all processes
            (dirs[i] / "data").symlink_to(dirs[0] / "data")
        planes.append(start_control_plane(dirs[i], *extra, port=port))
    rng = random.Random(2)
    kills = 0
    names = [f"shared{i}" for i in range(4)]
    try:
        lead = planes[0]
        front_cp = ControlPlane(front.url, lead.token, lead.data_dir, lead.proc, lead.log)
        for n, name in enumerate(names):
            text = fleet_template(2, 2).replace("fleet-", f"{name}-")
            params = {"dir": str(work), "rev": f"n{n}"}
            assert 201 == front_cp.create(name, text, params=params).status
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            states = [front_cp.api("GET", f"/v1/stacks/{n}").body["status"] for n in names]
            if all(not s.endswith("IN_PROGRESS") for s in states):
                break
            if kills < KILLS:
                i = rng.randrange(3)
                planes[i].crash()
                kills += 1
                time.sleep(rng.uniform(0.2, 1.5))
                planes[i] = start_control_plane(dirs[i], *extra, port=ports[i])
            time.sleep(rng.uniform(0.2, 1.0))
        states = [front_cp.api("GET", f"/v1/stacks/{n}").body["status"] for n in names]
        counted = runs(work)
        doubles = {k: v for k, v in counted.items() if v > 1}
        owners = set()
        for d in dirs:
            owners |= set(re.findall(r"(\S+:\d+:[0-9a-f]{8}) claimed", (d / "control.log").read_text()))
        pids = {o.split(":")[1] for o in owners}
        print(
            f"\nshared PostgreSQL: 3 processes, {kills} kills, {len(pids)} processes claimed work, "
            f"{sum(counted.values())} hook runs, double runs {len(doubles)}, states {states}"
        )
        assert ["CREATE_COMPLETE"] * len(names) == states
        assert 16 == len(counted)
        assert not doubles
        assert len(pids) >= 2
    finally:
        for cp in planes:
            stop_control_plane(cp)
        front.stop()
