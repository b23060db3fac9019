"""A deployment group's batch plan survives a control-plane crash (kill -9) between batches."""

from __future__ import annotations

from pathlib import Path

from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.templates import script_group
from tests.support.waiting import wait_file

TEMPLATE = script_group(
    """
    #!/bin/sh
    touch "$DIR/started-$deploy_resource_name"
    while [ ! -e "$DIR/go-$deploy_resource_name" ]; do sleep 0.1; done
    echo "$deploy_resource_name" >> "$DIR/runs"
    printf '%s' "$deploy_resource_name" > "$heat_outputs_path.who"
    """,
    params={"dir": "string"},
    inputs={"DIR": "{get_param: dir}"},
    outputs=["who"],
    update_policy="{batch_create: {max_batch_size: 1}}",
)


def test_group_batches_resume_after_a_control_plane_crash(tmp_path: Path) -> None:
    """kill -9 while member a runs: after restart a's signal is taken, b starts, each ran once."""
    work = tmp_path / "work"
    work.mkdir()
    cp = start_control_plane(tmp_path)
    try:
        assert 201 == cp.create("crash", TEMPLATE, params={"dir": str(work)}).status
        wait_file(work / "started-a")
        assert not (work / "started-b").exists()  # batches of one: b waits for a
        cp.crash()
        (work / "go-a").touch()  # a finishes while nobody listens; its agent keeps the signal
        cp = start_control_plane(tmp_path, port=cp.port)
        wait_file(work / "started-b")
        (work / "go-b").touch()
        assert "CREATE_COMPLETE" == cp.wait_stack("crash", timeout=180)["status"]
        assert ["a", "b"] == (work / "runs").read_text().split()
        assert {"a": "a", "b": "b"} == cp.outputs("crash")["who"]
    finally:
        (work / "go-a").touch()
        (work / "go-b").touch()
        stop_control_plane(cp)
