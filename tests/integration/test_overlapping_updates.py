"""R05: overlapping user updates, and concurrent If-Match writers on one stack (real agents).

R05_SERVERS sets the servers (real local agents): 6 in CI, 100 for the catalogue's figure;
R05_PUTS the If-Match writes of each of the 8 clients: 25 in CI (it was 50).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

pytestmark = pytest.mark.catalogue("R05")

#: Servers (real local agents) in CI; the catalogue's figure is 100.
SERVERS = int(os.environ.get("R05_SERVERS", "6"))
CLIENTS, PUTS = 8, int(os.environ.get("R05_PUTS", "25"))


def template(servers: int) -> str:
    lines = [
        "heat_template_version: 2018-08-31",
        "parameters:",
        "  dir: {type: string}",
        "  rev: {type: number, default: 0}",
        "resources:",
        "  cfg:",
        "    type: OS::Heat::SoftwareConfig",
        "    properties:",
        "      group: script",
        "      inputs: [{name: DIR}, {name: REV}, {name: NAME}]",
        "      config: |",
        "        #!/bin/sh",
        "        sleep 0.3",
        '        echo "$NAME $REV" >> "$DIR/runs"',
    ]
    for s in range(servers):
        lines.append(f"  srv{s}: {{type: OS::Heat::DeployedServer, properties: {{name: r05-{s}}}}}")
        lines.append(
            f"  dep{s}: {{type: OS::Heat::SoftwareDeployment, properties: {{config: {{get_resource: cfg}}, "
            f"server: {{get_resource: srv{s}}}, input_values: {{DIR: {{get_param: dir}}, "
            f"REV: {{get_param: rev}}, NAME: dep{s}}}}}}}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def cp(tmp_path: Path, db_args: list[str]) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path, *db_args)
    yield plane
    stop_control_plane(plane)


def test_overlapping_updates_and_if_match_writers_lose_nothing_and_never_regress(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Overlapping updates and If-Match writers: every 202 lands, the rest get 409, no agent goes back."""
    work = tmp_path / "work"
    work.mkdir()
    text = template(SERVERS)

    def body(rev: int) -> dict[str, object]:
        return {"template": text, "parameters": {"dir": str(work), "rev": rev}}

    assert 201 == cp.api("POST", "/v1/stacks", {"name": "r05", **body(0)}).status
    assert "CREATE_COMPLETE" == cp.wait_stack("r05", timeout=180)["status"]
    # g+1, then g+2 while g+1 runs.
    assert 202 == cp.api("PUT", "/v1/stacks/r05", body(1)).status
    assert 202 == cp.api("PUT", "/v1/stacks/r05", body(2)).status
    # 8 clients x PUTS writes, each naming the version it read.
    results: list[tuple[int, int, int]] = []  # (status, version read, rev written)
    lock = threading.Lock()
    counter = iter(range(3, 3 + CLIENTS * PUTS))

    def client() -> None:
        for _ in range(PUTS):
            with lock:
                rev = next(counter)
            version = cp.api("GET", "/v1/stacks/r05").body["version"]
            resp = cp.api("PUT", "/v1/stacks/r05", {**body(rev), "if_match": version})
            with lock:
                results.append((resp.status, version, rev))

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    statuses = collections.Counter(s for s, _, _ in results)
    accepted = sorted((v, rev) for s, v, rev in results if s == 202)
    final = cp.wait_stack("r05", timeout=300)
    version = final["version"]
    # Every 2xx write is in the history: the version moved once per accepted write.
    lost = (version - 3) - len(accepted)  # version 1 at create, 2 and 3 from the two updates
    # Two accepted writes never read the same version (each If-Match write saw its predecessor).
    duplicates = len(accepted) - len({v for v, _ in accepted})
    last_rev = max(accepted, key=lambda a: a[0])[1] if accepted else 2
    # Agents never run an older generation after a newer one: a write's place in the history
    # is the version it read (distinct for accepted writes), revs 0-2 came first.
    order = {0: -3, 1: -2, 2: -1, **{rev: v for v, rev in accepted}}
    runs: dict[str, list[int]] = collections.defaultdict(list)
    for line in (work / "runs").read_text().splitlines():
        name, rev = line.split()
        runs[name].append(order[int(rev)])
    regressions = sum(1 for seq in runs.values() for a, b in itertools.pairwise(seq) if b <= a)
    print(
        f"\nR05: {len(results)} If-Match writes, {statuses[202]} accepted, {statuses[409]} answered 409, "
        f"other {sum(n for s, n in statuses.items() if s not in (202, 409))}; lost updates {lost}; "
        f"generation regressions {regressions}; final {final['status']} at rev {last_rev}"
    )
    assert set(statuses) <= {202, 409}
    assert statuses[202] >= 1
    assert 0 == lost
    assert 0 == duplicates
    assert 0 == regressions
    assert "UPDATE_COMPLETE" == final["status"]
    assert all(seq[-1] == order[last_rev] for seq in runs.values())
    assert final["parameters"]["rev"] == last_rev
