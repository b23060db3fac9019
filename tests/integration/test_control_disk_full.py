"""The control plane's data dir on a full disk: 503 saying "disk full" and where, nothing half-written.

The data dir is a small tmpfs the test mounts (root only, as R24); the log stays on the
ordinary disk. A stack create and `anneal key rotate` on the full disk each answer 503
disk_full naming the database file or the key file (they answered "busy or raced a concurrent
change" and 500 before); the signing key is unchanged; once space is freed both succeed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.disk import fill, mount_tmpfs, unmount
from tests.support.templates import one_script_deployment

TEMPLATE = one_script_deployment("#!/bin/sh\n", server_name="far")


@pytest.fixture
def full(tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane whose data dir is a 4 MB tmpfs (filled by the test)."""
    mount_tmpfs(tmp_path / "data")
    try:
        cp = start_control_plane(tmp_path, "--provisioner", "enrol")
        try:
            yield cp
        finally:
            stop_control_plane(cp)
    finally:
        unmount(tmp_path / "data")


def test_a_full_data_dir_answers_disk_full_naming_where_and_recovers(full: ControlPlane) -> None:
    """Create and key rotate on a full disk: 503 disk_full naming the file; the key unchanged; freed, both work."""
    cp = full
    key_before = cp.api("GET", "/v1/keys").body["key_id"]
    fill(cp.data_dir, 0)
    resp = cp.create("s1", TEMPLATE)
    assert 503 == resp.status, resp.body
    error = resp.body["error"]
    assert "disk_full" == error["code"] and "disk full" in error["message"]
    assert str(cp.data_dir / "anneal.db") in error["where"]
    assert resp.headers["Retry-After"]
    rotated = cp.cli("key", "rotate")
    assert 1 == rotated.returncode
    assert "disk full" in rotated.stderr and str(cp.data_dir) in rotated.stderr, rotated.stderr
    assert key_before == cp.api("GET", "/v1/keys").body["key_id"]
    assert not list(cp.data_dir.glob("*.tmp"))  # nothing half-written left behind
    (cp.data_dir / "filler").unlink()
    assert 201 == cp.create("s1", TEMPLATE).status
    assert 201 == cp.api("POST", "/v1/keys/rotate").status
    assert key_before != cp.api("GET", "/v1/keys").body["key_id"]
    log = cp.log.read_text(errors="replace")
    assert "unhandled error" not in log and "Traceback" not in log, log[-6000:]
