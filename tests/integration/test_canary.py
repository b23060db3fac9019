"""Canaries for groups (SoftwareDeploymentGroup, ResourceGroup): the first members of an update run
alone and gate the rest; ``on_failure: rollback`` rolls a failed one back without ``--rollback``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane

#: Each run appends "<member> <action> <rev>" to the log; rev "bad" fails.
SCRIPT = """#!/bin/sh
echo "$deploy_resource_name $deploy_action $REV" >> {log}
if [ "$REV" = bad ]; then echo "release $REV is broken" >&2; exit 5; fi
"""


def template(log: Path, canary: dict[str, Any], members: int = 10, **policy: Any) -> str:
    """A group of *members* members on two servers, its canary *canary*, batches of 4 after it."""
    fleet = {
        "type": "OS::Heat::SoftwareDeploymentGroup",
        "update_policy": {"canary": canary, "rolling_update": {"max_batch_size": 4}, **policy},
        "properties": {
            "config": {"get_resource": "cfg"},
            "servers": {f"m{i}": {"get_resource": "ab"[i % 2]} for i in range(members)},
            "input_values": {"REV": {"get_param": "rev"}},
        },
    }
    return stack(log, fleet)


def resource_group(log: Path, policy: dict[str, Any], count: int = 10) -> str:
    """A ResourceGroup of *count* deployments (members 0, 1, ...) on two servers, its *policy*."""
    fleet = {
        "type": "OS::Heat::ResourceGroup",
        "update_policy": policy,
        "properties": {
            "count": count,
            "resource_def": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "cfg"},
                    "server": {"get_resource": "a"},
                    "input_values": {"REV": {"get_param": "rev"}},
                },
            },
        },
    }
    return stack(log, fleet)


def stack(log: Path, fleet: dict[str, Any]) -> str:
    """The template: servers a and b, the logging script, and the group *fleet*."""
    resources: dict[str, Any] = {
        "a": {"type": "OS::Heat::DeployedServer"},
        "b": {"type": "OS::Heat::DeployedServer"},
        "cfg": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {"group": "script", "inputs": [{"name": "REV"}], "config": SCRIPT.format(log=log)},
        },
        "fleet": fleet,
    }
    return json.dumps(
        {
            "heat_template_version": "2018-08-31",
            "parameters": {"rev": {"type": "string", "default": "r1"}},
            "resources": resources,
        }
    )


#: What a ResourceGroup's canary member runs: the bad release, then the old one as a replacement.
RETURNED = (("UPDATE", "bad"), ("CREATE", "r1"))


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


def test_a_bad_canary_policy_is_refused_naming_its_path(control_plane: ControlPlane, tmp_path: Path) -> None:
    """count and percent together: the update is refused (exit 1) naming update_policy.canary; nothing runs."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "fleet.json"
    path.write_text(template(log, {"count": 1}, members=2))
    assert cp.cli("stack", "create", "pol", "-t", str(path), "--wait").returncode == 0
    before = len(runs(log))
    path.write_text(template(log, {"count": 1, "percent": 50}, members=2))
    done = cp.cli("stack", "update", "pol", "-t", str(path), "-P", "rev=r2", "--wait")
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "resources.fleet.update_policy.canary: give one of count or percent" in said, said
    assert len(runs(log)) == before
    assert cp.api("GET", "/v1/stacks/pol").body["status"] == "CREATE_COMPLETE"  # the update wrote nothing


@pytest.mark.parametrize("asked", ["--rollback", "on_failure"])
def test_a_resource_group_canary_rolls_back_exactly_its_members(
    control_plane: ControlPlane, tmp_path: Path, asked: str
) -> None:
    """ResourceGroup of 10, canary 2, bad release: it stops; the rollback (by --rollback or by
    update_policy.on_failure) re-runs those 2 only, and the other 8 never run again."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "group.json"
    policy: dict[str, Any] = {"canary": {"count": 2}, "rolling_update": {"max_batch_size": 4}}
    flags = ["--rollback"] if asked == "--rollback" else []
    if asked == "on_failure":
        policy["on_failure"] = "rollback"
    path.write_text(resource_group(log, policy))
    created = cp.cli("stack", "create", "rg", "-t", str(path), "--wait")
    assert created.returncode == 0, created.stdout + created.stderr
    assert Counter(r[0] for r in runs(log)) == {str(i): 1 for i in range(10)}
    before = len(runs(log))
    done = cp.cli("stack", "update", "rg", "-t", str(path), "-P", "rev=bad", *flags, "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stack rg: ROLLBACK_COMPLETE" in done.stdout
    assert "canary failed: 0 of 2 members complete (at least 2 needed), 2 failed" in done.stdout
    if asked == "on_failure":
        assert "(update_policy.on_failure of fleet: rollback)" in done.stdout
    after = runs(log)[before:]
    canaries = sorted({r[0] for r in after})
    assert len(canaries) == 2, after
    # A failed member of a nested stack is replaced, as in Heat: its hook runs CREATE with r1.
    assert sorted(after) == sorted([[m, action, rev] for m in canaries for action, rev in RETURNED])
    assert Counter(r[0] for r in runs(log)) == {str(i): 3 if str(i) in canaries else 1 for i in range(10)}
    deps = cp.api("GET", "/v1/deployments").body  # the group's, in its nested stack: the only ones
    assert len(deps) == 10 and {d["status"] for d in deps} == {"COMPLETE"}


def test_a_resource_group_canary_that_passes_goes_on_in_batches(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """ResourceGroup of 6, canary 50 %: its 3 members run the release alone, pass, then the other 3."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "group.json"
    path.write_text(resource_group(log, {"canary": {"percent": 50}}, count=6))
    assert cp.cli("stack", "create", "rgok", "-t", str(path), "--wait").returncode == 0
    before = len(runs(log))
    done = cp.cli("stack", "update", "rgok", "-t", str(path), "-P", "rev=r2", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "canary passed: 3 of 3 members complete" in done.stdout, done.stdout
    after = runs(log)[before:]
    assert sorted(after) == sorted([[str(i), "UPDATE", "r2"] for i in range(6)])
    # The nested stack's traversals: create, then the canary's 3 members alone, then the other 3.
    child = next(s for s in cp.api("GET", "/v1/stacks?nested=true").body if s["parent_resource"] == "fleet")
    changed: dict[int, set[str]] = {}
    for e in cp.api("GET", f"/v1/stacks/{child['id']}/events").body:
        if e["resource_name"] not in ("", child["name"]) and e["status"] == "IN_PROGRESS":
            changed.setdefault(e["traversal"], set()).add(e["resource_name"])
    first, rest = (changed[t] for t in sorted(changed)[1:])
    assert len(first) == 3 and first | rest == {str(i) for i in range(6)} and not first & rest
    assert {r[0] for r in after[:3]} == first  # the canary ran before any other member


def test_on_failure_rollback_rolls_a_deployment_group_back_without_the_flag(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """SoftwareDeploymentGroup with on_failure: rollback: a failed canary rolls back with no --rollback,
    --wait exits 1 and says why; only the canary's 2 members ran again."""
    cp = control_plane
    log, path = tmp_path / "runs.log", tmp_path / "fleet.json"
    path.write_text(template(log, {"count": 2}, members=4, on_failure="rollback"))
    assert cp.cli("stack", "create", "of", "-t", str(path), "--wait").returncode == 0
    before = len(runs(log))
    done = cp.cli("stack", "update", "of", "-t", str(path), "-P", "rev=bad", "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stack of: ROLLBACK_COMPLETE" in done.stdout
    assert "stack of was rolled back: Resource UPDATE failed: fleet: canary failed" in done.stdout
    assert "(update_policy.on_failure of fleet: rollback)" in done.stdout
    assert sorted(runs(log)[before:]) == sorted(
        [[m, "UPDATE", r] for m in ("m0", "m1") for r in ("bad", "r1")]
    )
