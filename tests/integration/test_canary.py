"""Canaries for deployment groups: the first members of an update run alone and gate the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.controlplane import ControlPlane

#: Each run appends "<member> <action> <rev>" to the log; rev "bad" fails.
SCRIPT = """#!/bin/sh
echo "$deploy_resource_name $deploy_action $REV" >> {log}
if [ "$REV" = bad ]; then echo "release $REV is broken" >&2; exit 5; fi
"""


def template(log: Path, canary: dict[str, Any], members: int = 10) -> str:
    """A group of *members* members on two servers, its canary *canary*, batches of 4 after it."""
    resources: dict[str, Any] = {
        "a": {"type": "OS::Heat::DeployedServer"},
        "b": {"type": "OS::Heat::DeployedServer"},
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "inputs": [{"name": "REV"}], "config": SCRIPT.format(log=log)},
        },
        "fleet": {
            "type": "OS::Heat::SoftwareDeploymentGroup",
            "update_policy": {"canary": canary, "rolling_update": {"max_batch_size": 4}},
            "properties": {
                "config": {"get_resource": "cfg"},
                "servers": {f"m{i}": {"get_resource": "ab"[i % 2]} for i in range(members)},
                "input_values": {"REV": {"get_param": "rev"}},
            },
        },
    }
    return json.dumps(
        {
            "heat_template_version": "2018-08-31",
            "parameters": {"rev": {"type": "string", "default": "r1"}},
            "resources": resources,
        }
    )


def runs(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()]


def test_a_failed_canary_stops_and_rolls_back_only_its_members(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Canary 2 of 10, bad release: m0 and m1 run it and fail; the rollback re-runs those 2 only, 8 untouched."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "fleet.json"
    path.write_text(template(log, {"count": 2}))
    created = cp.cli("stack", "create", "fl", "-t", str(path), "--wait")
    assert created.returncode == 0, created.stdout + created.stderr
    assert sorted(r[0] for r in runs(log)) == sorted(f"m{i}" for i in range(10))
    before = len(runs(log))
    done = cp.cli("stack", "update", "fl", "-t", str(path), "-P", "rev=bad", "--rollback", "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stack fl: ROLLBACK_COMPLETE" in done.stdout
    assert "canary failed: 0 of 2 members complete (at least 2 needed), 2 failed (at most 0)" in done.stdout
    after = runs(log)[before:]
    assert sorted(after) == [
        ["m0", "UPDATE", "bad"],
        ["m0", "UPDATE", "r1"],
        ["m1", "UPDATE", "bad"],
        ["m1", "UPDATE", "r1"],
    ]
    deps = cp.api("GET", "/v1/deployments?stack=fl").body
    assert len(deps) == 10 and {d["status"] for d in deps} == {"COMPLETE"}


def test_a_passing_canary_goes_on_with_the_rollout(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Canary 20 % of 10 with one failure allowed: it passes, then every other member updates in batches."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "fleet.json"
    path.write_text(template(log, {"percent": 20, "success": {"max_failed": 1}}))
    assert cp.cli("stack", "create", "ok", "-t", str(path), "--wait").returncode == 0
    before = len(runs(log))
    planned = cp.cli(
        "stack", "update", "ok", "-t", str(path), "-P", "rev=r2", "--dry-run", "--format", "json"
    )
    assert planned.returncode == 0, planned.stderr
    (fleet,) = [r for r in json.loads(planned.stdout)["resources"] if r["name"] == "fleet"]
    assert fleet["change"] == "update" and fleet["inputs"] == {"REV": {"old": "r1", "new": "r2"}}
    servers = {m["member"]: m["server"] for m in fleet["members"]}
    assert servers == {f"m{i}": f"ok-{'ab'[i % 2]}" for i in range(10)}
    assert {m["change"] for m in fleet["members"]} == {"update"}
    assert len(runs(log)) == before  # the plan ran nothing
    done = cp.cli("stack", "update", "ok", "-t", str(path), "-P", "rev=r2", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "canary passed: 2 of 2 members complete" in done.stdout
    after = runs(log)[before:]
    assert sorted(r[0] for r in after[:2]) == ["m0", "m1"]  # the canary first, alone
    assert sorted(r[0] for r in after) == sorted(f"m{i}" for i in range(10))
    assert {(r[1], r[2]) for r in after} == {("UPDATE", "r2")}


def test_a_bad_canary_policy_fails_the_update_naming_its_path(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """count and percent together: the update fails the group, the reason naming update_policy.canary."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "fleet.json"
    path.write_text(template(log, {"count": 1}, members=2))
    assert cp.cli("stack", "create", "pol", "-t", str(path), "--wait").returncode == 0
    path.write_text(template(log, {"count": 1, "percent": 50}, members=2))
    done = cp.cli("stack", "update", "pol", "-t", str(path), "-P", "rev=r2", "--wait")
    assert done.returncode == 1
    assert "resources.fleet.update_policy.canary: give one of count or percent" in done.stdout, done.stdout
