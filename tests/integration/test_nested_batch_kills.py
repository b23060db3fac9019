"""kill -9 of `anneal serve` while it steps a group's nested members in batches: all or nothing.

A batch of sibling nested stacks is one transaction (control/engine/batch.py): a kill leaves
every member of the batch stepped or none, and after a restart every member is created once
and deleted once. The members need no agent (a NO_SIGNAL deployment completes at once), so a
kill can land anywhere in their steps; the test reads the database file while the process is
dead, as the restarted process will.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from pathlib import Path

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import done_at_once_member, group_of_members

MEMBERS = 40
#: Kills per phase (create, delete); NESTED_KILLS=10 for a longer run.
KILLS = int(os.environ.get("NESTED_KILLS", "1"))
MEMBER = json.dumps(done_at_once_member())
PARENT = json.dumps(group_of_members(MEMBERS))
#: No local agents (the members' servers never enrol); a short lease so a restart resumes soon; the
#: group's walk makes all 40 members in one commit (by default it commits every few ms: a kill in
#: that walk leaves some members made, which is no batch's doing, and on a loaded machine it lands there).
ARGS = ("--provisioner", "enrol", "--work-lease", "2", "--step-slice", "0")


def _member_states(cp: ControlPlane) -> dict[str, int]:
    """(action_status -> count) of the member stacks, read from the database file of the dead process."""
    with sqlite3.connect(cp.data_dir / "anneal.db") as db:
        rows = db.execute(
            "SELECT m.action || '_' || m.status, count(*) FROM stacks m JOIN stacks g ON m.parent_id = g.id "
            "WHERE g.parent_resource = 'fleet' GROUP BY 1"
        ).fetchall()
    return {state: count for state, count in rows}


def _kill_when(cp: ControlPlane, tmp_path: Path, state: str, seen: list[dict[str, int]]) -> ControlPlane:
    """Once the members are in *state* (a batch of their steps is due), kill -9 within 0.3 s and
    restart, KILLS times while they still are; *seen* gets what each kill left."""
    rng = random.Random()
    for _ in range(KILLS):
        deadline = time.monotonic() + 30
        while not _member_states(cp).get(state) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not _member_states(cp).get(state):
            break  # done already: nothing left to kill in
        time.sleep(rng.uniform(0, 0.3))
        cp.crash()
        seen.append(_member_states(cp))
        cp = start_control_plane(tmp_path, *ARGS, port=cp.port)
    return cp


def test_a_kill_during_nested_member_batches_leaves_each_batch_whole_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    """Killed while 40 nested members are about to be created and again to be deleted: each kill
    leaves all of them stepped or none, each member ran its create once, and the delete removed
    every stack and server."""
    cp = start_control_plane(tmp_path, *ARGS)
    seen: list[dict[str, int]] = []
    try:
        body = {"name": "fleet", "template": PARENT, "files": {"member.yaml": MEMBER}}
        assert 201 == cp.api("POST", "/v1/stacks", body).status
        cp = _kill_when(cp, tmp_path, "CREATE_IN_PROGRESS", seen)
        assert "CREATE_COMPLETE" == cp.wait_stack("fleet", timeout=180)["status"]
        listed = cp.api("GET", "/v1/stacks?nested=true").body
        group = next(s["id"] for s in listed if s.get("parent_resource") == "fleet")
        members = [s for s in listed if s.get("parent") == group]
        assert MEMBERS == len(members), listed
        for member in members:
            events = cp.api("GET", f"/v1/stacks/{member['id']}/events").body
            done = [(e["resource_name"], e["status"]) for e in events if e["status"] == "COMPLETE"]
            assert sorted(done) == sorted({*done}), events  # no resource completed twice
            assert 4 == len(done), events  # cfg, srv, dep and the stack itself, once each
        servers = cp.api("GET", "/v1/servers").body
        assert MEMBERS == len(servers), servers  # no member made its server twice
        assert cp.api("DELETE", "/v1/stacks/fleet").status in (200, 202, 204)
        cp = _kill_when(cp, tmp_path, "DELETE_IN_PROGRESS", seen)
        assert "DELETED" == cp.wait_stack("fleet", timeout=180)["status"]
        assert [] == cp.api("GET", "/v1/servers").body
        assert [] == cp.api("GET", "/v1/stacks?nested=true").body
    finally:
        stop_control_plane(cp)
    print(f"member states left by each kill: {seen}")
    assert seen, "no kill landed while the members were in progress"
    for states in seen:  # their step is one transaction (one batch of 40): all of them or none
        assert states == {} or list(states.values()) == [MEMBERS], states
