"""A plan before the change: `anneal stack update --dry-run` and Heat's update preview on the blue/green example.

The stack is made by a control plane with local agents; the plan is asked of the same data
served again without agents (`--provisioner enrol`), so nothing else writes to the database
and its files can be compared byte for byte before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.openstack import OpenStack
from tests.support.processes import EXAMPLES, free_port
from tests.support.waiting import wait_until

BLUE_GREEN = EXAMPLES / "blue-green.yaml"


def _files() -> dict[str, str]:
    return {f"scripts/{p.name}": p.read_text() for p in (EXAMPLES / "scripts").glob("*.sh")}


def _heat_url(cp: ControlPlane) -> str:
    line = wait_until(
        lambda: next(
            (x for x in reversed(cp.log.read_text().splitlines()) if "Orchestration API v1 on" in x), None
        ),
        "the Heat API was not announced",
    )
    return str(line.split(" on ", 1)[1].split("/v1/", 1)[0])


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str, dict[str, str]]]:
    """The blue/green stack at v1, its control plane restarted without agents; its Heat URL and first outputs."""
    tmp = tmp_path_factory.mktemp("plan")
    cp = start_control_plane(tmp)
    try:
        cp.create_stack("bg", BLUE_GREEN, files=_files())
        first = cp.outputs("bg")
    finally:
        stop_control_plane(cp)
    heat = free_port()
    cp = start_control_plane(
        tmp, "--provisioner", "enrol", "--heat-listen", f"127.0.0.1:{heat}", port=cp.port
    )
    yield cp, _heat_url(cp), first
    stop_control_plane(cp)
    # The stack is never deleted (the second control plane has no agents to run DELETE): end the
    # backends its example script started in the background, by the pids the script wrote.
    for pid_file in tmp.rglob("backend-*/pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


def _database(cp: ControlPlane) -> str:
    """A hash of the SQLite database's files (the database and its write-ahead log)."""
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        path = Path(f"{cp.data_dir / 'anneal.db'}{suffix}")
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()


def _settled_database(cp: ControlPlane) -> str:
    """The database's hash once two reads half a second apart agree (what the restart wrote is done)."""
    seen: list[str] = []

    def stable() -> str | None:
        seen.append(_database(cp))
        time.sleep(0.5)
        return seen[-1] if seen[-1] == _database(cp) else None

    return wait_until(stable, "the database kept changing with no agent and no request", 30)


def _update(cp: ControlPlane, *extra: str) -> Any:
    return cp.cli("stack", "update", "bg", "-t", str(BLUE_GREEN), "-P", "backend_version=v2", *extra)


def test_dry_run_lists_the_replacement_and_the_repointed_frontend(
    quiet: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """--dry-run names the backend's blue/green replacement and the frontend's re-run, per server."""
    cp, _, first = quiet
    done = _update(cp, "--dry-run", "--format", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    by_name = {r["name"]: r for r in plan["resources"]}
    assert plan["parameters"] == {"backend_version": {"old": "v1", "new": "v2"}}
    backend = by_name["backend_deployment"]
    assert backend["change"] == "replace" and backend["reason"] == "name backend-v1 -> backend-v2"
    assert backend["runs"] == ["CREATE (new)", "DELETE (old)"]
    assert backend["server"] == "bg-backend_server"
    assert backend["inputs"] == {"VERSION": {"old": "v1", "new": "v2"}}
    frontend = by_name["frontend_deployment"]
    assert frontend["change"] == "update" and frontend["runs"] == ["UPDATE"]
    assert frontend["server"] == "bg-frontend_server"
    assert "reads backend_deployment, made anew by the update" in frontend["reason"]
    assert frontend["inputs"] == {
        "BACKEND_ADDR": {
            "old": first["backend_address"],
            "new": "<backend_deployment.host_and_port: known after the update>",
        }
    }
    unchanged = {"backend_server", "frontend_server", "backend_config", "frontend_config"}
    assert {n for n, r in by_name.items() if r["change"] == "unchanged"} == unchanged


def test_dry_run_prints_the_plan_and_leaves_the_database_byte_for_byte(
    quiet: tuple[ControlPlane, str, dict[str, str]],
) -> None:
    """The printed plan names what runs where; the database files hash the same before and after."""
    cp = quiet[0]
    before = _settled_database(cp)
    done = _update(cp, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (
        "replace    backend_deployment (OS::Heat::SoftwareDeployment) on bg-backend_server: " in done.stdout
    )
    assert "runs CREATE (new), DELETE (old)" in done.stdout
    assert "input BACKEND_ADDR: " in done.stdout and "input VERSION: 'v1' -> 'v2'" in done.stdout
    assert "1 to replace, 1 to update in place, 4 unchanged" in done.stdout, done.stdout
    assert _database(cp) == before
    stack = cp.api("GET", "/v1/stacks/bg").body
    assert stack["status"] == "CREATE_COMPLETE" and stack["parameters"]["backend_version"] == "v1"


def test_heat_preview_of_blue_green_in_heat_categories_changes_nothing(
    quiet: tuple[ControlPlane, str, dict[str, str]], tmp_path: Path
) -> None:
    """The real `openstack stack update --dry-run` lists the backend replaced and the frontend updated."""
    cp, heat_url, _ = quiet
    before = _settled_database(cp)
    osc = OpenStack(cp, f"{heat_url}/v1/ops-team")
    template = tmp_path / "blue-green.yaml"
    template.write_text(BLUE_GREEN.read_text())
    (tmp_path / "scripts").mkdir()
    for name, text in _files().items():
        (tmp_path / name).write_text(text)
    found = osc.json(
        "stack", "update", "--dry-run", "-t", str(template), "--parameter", "backend_version=v2", "bg"
    )
    names = {kind: sorted(r["resource_name"] for r in _listed(found[kind])) for kind in found}
    assert names["replaced"] == ["backend_deployment"]
    assert names["updated"] == ["frontend_deployment"]
    assert names["added"] == [] and names["deleted"] == []
    assert names["unchanged"] == ["backend_config", "backend_server", "frontend_config", "frontend_server"]
    assert _database(cp) == before


def test_dry_run_of_a_bad_template_names_the_path_and_writes_nothing(
    quiet: tuple[ControlPlane, str, dict[str, str]], tmp_path: Path
) -> None:
    """A plan of a template that would be refused is refused the same way (400 naming the path)."""
    cp, _, _ = quiet
    bad = tmp_path / "bad.yaml"
    bad.write_text(BLUE_GREEN.read_text().replace("get_resource: backend_server", "get_resource: nowhere"))
    (tmp_path / "scripts").mkdir()
    for name, text in _files().items():
        (tmp_path / name).write_text(text)
    before = _settled_database(cp)
    done = cp.cli("stack", "update", "bg", "-t", str(bad), "--dry-run")
    assert done.returncode != 0
    assert "resources.backend_deployment.properties.server" in done.stderr + done.stdout
    assert _database(cp) == before


def _listed(value: Any) -> list[dict[str, Any]]:
    """A `-f json` column holding a JSON list, as text or already parsed."""
    return json.loads(value) if isinstance(value, str) else list(value)
