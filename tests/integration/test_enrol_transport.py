"""Enrolment names the transport: an agent enrolled over HTTP fetches its first document from its store.

A real control plane with a real Swift (tempurl) and a LOCAL directory; agents enrol over
the control plane's HTTP and then never ask it for a document: the enrolment answer
already named the Swift TempURL (or the media), so even the first document comes from there.
The control plane's access log (`--access-log`) is the witness.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.agents import transport_section
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN
from tests.support.swift import Swift
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_log, wait_until


def template(server: str) -> str:
    """One deployment on the enrolled *server*; its output `said` says where it came from."""
    script = """
    #!/bin/sh
    printf 'first from the store' > "$heat_outputs_path.said"
    """
    return one_script_deployment(script, outputs=["said"], server=server)


@pytest.fixture
def cp(swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    prefix = "e" + "".join(c for c in tmp_path.name[-14:].lower() if c.isalnum())
    plane = start_control_plane(
        tmp_path,
        "--provisioner=enrol",
        "--access-log",
        f"--swift-auth-url={swift_server.auth_url}",
        f"--swift-user={swift_server.user}",
        f"--store-prefix={prefix}",
        f"--local-dir={tmp_path / 'published'}",
        "--store-poll-interval=0.5",
        "--store-signal-poll=0.5",
    )
    wait_log(plane.log, "Swift ready")
    yield plane
    stop_control_plane(plane)


def enrol(cp: ControlPlane, name: str, transport: str, state: Path) -> str:
    created = cp.api("POST", "/v1/servers", {"name": name, "transport": transport})
    assert 201 == created.status, created.body
    argv = [str(BIN / "anneal-agent"), "enrol", "--url", cp.url, "--state-dir", str(state)]
    subprocess.run(
        [*argv, "--token", created.body["enrol_token"]], check=True, capture_output=True, timeout=60
    )
    return str(created.body["id"])


def run_once_until_signalled(state: Path, *extra: str, courier: Callable[[], None] = lambda: None) -> None:
    """`anneal-agent once` until the deployment's signal left the outbox (the store may lag a moment)."""

    def signalled() -> int:
        argv = [str(BIN / "anneal-agent"), "once", "--state-dir", str(state), *extra]
        subprocess.run(argv, check=False, capture_output=True, timeout=120)
        courier()
        db = sqlite3.connect(state / "ledger.sqlite")
        try:
            return int(db.execute("SELECT count(*) FROM generations WHERE state = 'signalled'").fetchone()[0])
        finally:
            db.close()

    wait_until(signalled, f"no signal left the outbox of {state}", 90, interval=0.5)


def document_requests(cp: ControlPlane, mark: int) -> list[str]:
    lines = [line for line in cp.log.read_text()[mark:].splitlines() if "control.access" in line]
    return [line for line in lines if re.search(r'"\w+ /v1/(agent/document|signal/)', line)]


def test_enrolled_over_http_first_document_comes_from_swift(
    cp: ControlPlane, swift_server: Swift, tmp_path: Path
) -> None:
    """The enrolment answer names the TempURL; the agent never polls the control plane for a document."""
    state = tmp_path / "agent-swift"
    mark = len(cp.log.read_text())
    server_id = enrol(cp, "en-swift", "SWIFT", state)
    section = transport_section(state)
    assert "SWIFT" == section["kind"]
    assert section["document_url"].startswith(swift_server.url + "/v1/AUTH_test/")
    assert server_id in section["document_url"]
    assert 201 == cp.create("ens", template("en-swift")).status
    run_once_until_signalled(state)
    assert "CREATE_COMPLETE" == cp.wait_stack("ens")["status"]
    assert {"said": "first from the store"} == cp.outputs("ens")
    assert [] == document_requests(cp, mark)
    assert "SWIFT: signal for deployment" in cp.log.read_text()[mark:]


def test_enrolled_over_http_first_document_comes_from_media(cp: ControlPlane, tmp_path: Path) -> None:
    """LOCAL: the enrolment answer names the media; the document is read from the carried file."""
    state, media, outbox = tmp_path / "agent-local", tmp_path / "media", tmp_path / "outbox"
    media.mkdir()
    mark = len(cp.log.read_text())
    server_id = enrol(cp, "en-local", "LOCAL", state)
    assert "LOCAL" == transport_section(state)["kind"]
    assert 201 == cp.create("enl", template("en-local")).status
    published = tmp_path / "published" / server_id / "document.json"

    def carry() -> None:  # the courier: newest document onto the media, signals back
        if published.exists():
            (media / "document.json").write_bytes(published.read_bytes())
        if outbox.exists() and any(outbox.iterdir()):
            assert 0 == cp.cli("signal", "import", str(outbox)).returncode

    run_once_until_signalled(state, f"--media-dir={media}", f"--signal-dir={outbox}", courier=carry)
    assert "CREATE_COMPLETE" == cp.wait_stack("enl")["status"]
    assert {"said": "first from the store"} == cp.outputs("enl")
    assert [] == document_requests(cp, mark)
