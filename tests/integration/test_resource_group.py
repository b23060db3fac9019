"""OS::Heat::ResourceGroup with real agents: 20 servers of two deployments each, scaled and rolled.

Every hook run appends "<member> <step> <action> <rev>" to one log: each line must appear
once (each generation of each deployment ran exactly once) and the lines say what ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

MEMBER = """
heat_template_version: 2018-08-31
parameters:
  index: {type: string}
  log: {type: string}
  rev: {type: string}
  prefix: {type: string}
resources:
  box:
    type: OS::Heat::DeployedServer
    properties: {name: {list_join: ['-', [{get_param: prefix}, {get_param: index}]]}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: WHO}, {name: STEP}, {name: REV}, {name: LOG}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "$WHO $STEP $deploy_action $REV" >> "$LOG"
        printf '%s' "$WHO-$REV" > "$heat_outputs_path.said"
  first:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {WHO: {get_param: index}, STEP: first, REV: {get_param: rev}, LOG: {get_param: log}}
  second:
    type: OS::Heat::SoftwareDeployment
    depends_on: [first]
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      actions: [CREATE, UPDATE, DELETE]
      input_values: {WHO: {get_param: index}, STEP: second, REV: {get_param: rev}, LOG: {get_param: log}}
outputs:
  said: {value: {get_attr: [second, said]}}
  server: {value: {get_resource: box}}
"""

GROUP = """
heat_template_version: 2018-08-31
parameters:
  log: {type: string}
  count: {type: number}
  rev: {type: string, default: r1}
  removal: {type: comma_delimited_list, default: ''}
resources:
  fleet:
    type: OS::Heat::ResourceGroup
    update_policy: {rolling_update: {min_in_service: 8, max_batch_size: 4}}
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removal}}]
      resource_def:
        type: member.yaml
        properties:
          index: '%index%'
          log: {get_param: log}
          rev: {get_param: rev}
          prefix: {get_param: 'OS::stack_name'}
outputs:
  said: {value: {get_attr: [fleet, said]}}
  refs: {value: {get_attr: [fleet, refs]}}
  refs_map: {value: {get_attr: [fleet, refs_map]}}
  zero_said: {value: {get_attr: [fleet, resource.0.said]}}
  servers: {value: {get_attr: [fleet, attributes, server]}}
  removed: {value: {get_attr: [fleet, removed_rsrc_list]}}
"""


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("groups"), "--work-lease", "30")
    yield plane
    stop_control_plane(plane)


def _apply(cp: ControlPlane, tmp: Path, params: dict[str, str], first: bool = False) -> dict[str, Any]:
    args = ["stack", "create" if first else "update", "fleet", "-t", str(tmp / "group.yaml")]
    for key, value in params.items():
        args += ["-P", f"{key}={value}"]
    done = cp.cli(*args, "--wait", "--timeout", "600", timeout=700)
    assert 0 == done.returncode, done.stdout + done.stderr
    return cp.outputs("fleet")


def _runs(log: Path, since: int) -> list[str]:
    lines = log.read_text().splitlines()
    return lines[since:]


def _once_each(lines: list[str]) -> None:
    twice = [line for line, n in Counter(lines).items() if n > 1]
    assert not twice, f"ran more than once: {twice}"


def _expected(members: list[str], action: str, rev: str) -> list[str]:
    return sorted(f"{m} {step} {action} {rev}" for m in members for step in ("first", "second"))


def test_twenty_servers_scaled_to_25_then_10_then_rolled(cp: ControlPlane, tmp_path: Path) -> None:
    """20 -> 25 creates 5 members; 25 -> 10 with removal_policies removes 3, 7 and the highest;
    a rolling update with min_in_service 8 and batches of 4 reaches all 10, each hook once."""
    (tmp_path / "member.yaml").write_text(MEMBER)
    (tmp_path / "group.yaml").write_text(GROUP)
    log = tmp_path / "runs.log"
    out = _apply(cp, tmp_path, {"log": str(log), "count": "20"}, first=True)
    created = _runs(log, 0)
    _once_each(created)
    assert _expected([str(i) for i in range(20)], "CREATE", "r1") == sorted(created)
    assert [f"{i}-r1" for i in range(20)] == out["said"]
    assert "0-r1" == out["zero_said"]
    assert [out["refs_map"][str(i)] for i in range(20)] == out["refs"]
    assert 20 == len(set(out["servers"].values()))

    out = _apply(cp, tmp_path, {"log": str(log), "count": "25"})
    grown = _runs(log, 40)
    assert _expected([str(i) for i in range(20, 25)], "CREATE", "r1") == sorted(grown)
    assert 25 == len(out["said"])

    out = _apply(cp, tmp_path, {"log": str(log), "count": "10", "removal": "3,7"})
    shrunk = _runs(log, 50)
    gone = ["3", "7", *(str(i) for i in range(12, 25))]
    assert _expected(gone, "DELETE", "r1") == sorted(shrunk)
    for who in gone:  # within a member, its DELETE runs dependents first
        assert shrunk.index(f"{who} second DELETE r1") < shrunk.index(f"{who} first DELETE r1")
    kept = ["0", "1", "2", "4", "5", "6", "8", "9", "10", "11"]
    assert [f"{m}-r1" for m in kept] == out["said"]
    assert ["3", "7"] == out["removed"]
    servers = {s["name"] for s in cp.api("GET", "/v1/servers").body}
    assert {f"fleet-{m}" for m in kept} == {s for s in servers if s.startswith("fleet-")}

    out = _apply(cp, tmp_path, {"log": str(log), "count": "10", "removal": "3,7", "rev": "r2"})
    rolled = _runs(log, 80)
    _once_each(rolled)
    # Heat's plan for 10 members, min_in_service 8, batches of 4: two extra members (12, 13)
    # carry the new definition while the others change, and go again at the end.
    assert _expected(kept, "UPDATE", "r2") == sorted(r for r in rolled if "UPDATE" in r)
    assert _expected(["12", "13"], "CREATE", "r2") == sorted(r for r in rolled if "CREATE" in r)
    assert _expected(["12", "13"], "DELETE", "r2") == sorted(r for r in rolled if "DELETE" in r)
    assert [f"{m}-r2" for m in kept] == out["said"]
    _check_batches(cp, limit=4)
    _once_each(_runs(log, 0))

    done = cp.cli("stack", "delete", "fleet", "--wait", "--timeout", "300", timeout=400)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert _expected(kept, "DELETE", "r2") == sorted(_runs(log, 80 + len(rolled)))


def _check_batches(cp: ControlPlane, limit: int) -> None:
    """In the group's nested stack, each traversal of the rolling update changed at most *limit* members."""
    child = next(s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["parent_resource"] == "fleet")
    events = cp.api("GET", f"/v1/stacks/{child['id']}/events").body
    last = max(e["traversal"] for e in events)
    per: dict[int, set[str]] = {}
    for e in events:
        if e["resource_name"] not in ("", child["name"]) and e["status"] == "IN_PROGRESS":
            per.setdefault(e["traversal"], set()).add(e["resource_name"])
    rolling = [per.get(t, set()) for t in range(last - 3, last + 1)]  # Heat's plan here: 4 batches
    assert all(len(changed) <= limit for changed in rolling), rolling
