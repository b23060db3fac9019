"""A revoked agent credential stops working on every control-plane process (docs/security.md, "Revocation").

Two `anneal serve` processes share one database (SQLite file or PostgreSQL) and one data
dir. A server's agent enrols through A, and B serves it (B's cache holds its credential).
The server is then re-enrolled through A (`anneal server token` + `anneal-agent enrol`
with a new state dir: a rebuild). With the OLD credential against B: a heartbeat and a
forged result signal are refused at once (both are checked in the transaction that would
apply them), a document read is refused within the bound (asserted eventually, bounded),
a long-poll that was waiting when the revocation came is refused when it wakes (never
handed the rebuilt server's document), and the rebuilt server's deployment is not turned
COMPLETE.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, Response, two_planes
from tests.support.processes import BIN
from tests.support.waiting import wait_until

TEMPLATE = """
heat_template_version: 2018-08-31
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: rebuilt}}
  cfg: {type: OS::Heat::SoftwareConfig, properties: {group: script, config: "#!/bin/sh\\ntrue\\n"}}
  dep: {type: OS::Heat::SoftwareDeployment, properties: {config: {get_resource: cfg}, server: {get_resource: box}}}
"""
ENROL_DEFAULTS = ("--provisioner", "enrol")


@pytest.fixture
def planes(tmp_path: Path, db_args: list[str]) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    """Two processes on one database and one data dir (keys, admin token)."""
    with two_planes(tmp_path, *db_args, defaults=ENROL_DEFAULTS) as (a, b):
        yield a, b


def enrol(cp: ControlPlane, token: str, state: Path) -> str:
    """Run the real `anneal-agent enrol` through *cp*; the credential it stored."""
    done = subprocess.run(
        [str(BIN / "anneal-agent"), "enrol", "--url", cp.url, f"--token={token}", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    return str(json.loads((state / "agent.json").read_text())["credential"])


def long_poll(cp: ControlPlane, credential: str, first: Response, dep_id: str, out: list[Response]) -> None:
    """Long-poll *cp* until it answers other than with a document from before the rebuild; answers in *out*.

    The stack may still change the document before the revocation (a legitimate wake-up
    with the old credential): such a document (the deployment not yet at generation 2)
    is taken and the poll parks again. Bounded: 10 polls of at most 20 s.
    """
    etag = first.headers["ETag"]
    for _ in range(10):
        got = cp.api("GET", "/v1/agent/document?wait=20", token=credential, headers={"If-None-Match": etag})
        out.append(got)
        if got.status != 200:
            return
        meta = got.body["anneal"].get("deployments", {}).values()
        if any(m["deployment_id"] == dep_id and m["generation"] >= 2 for m in meta):
            return  # the rebuilt server's document, handed to the revoked credential
        etag = got.headers["ETag"]


def test_revoked_credential_is_refused_by_every_process(
    planes: tuple[ControlPlane, ControlPlane], tmp_path: Path
) -> None:
    """After re-enrolment through A, B refuses the old credential: signals and heartbeats at once, reads in the bound."""
    a, b = planes
    created = a.api("POST", "/v1/servers", {"name": "rebuilt"})
    assert 201 == created.status, created.body
    old = enrol(a, created.body["enrol_token"], tmp_path / "state1")
    assert 201 == a.create("reb", TEMPLATE).status
    dep = wait_until(
        lambda: next(iter(a.api("GET", "/v1/deployments?stack=reb").body), None), "no deployment", 60
    )
    first = b.api("GET", "/v1/agent/document", token=old)
    assert 200 == first.status, first.body  # B now caches the old credential
    assert 200 == b.api("POST", "/v1/agent/heartbeat", {}, token=old).status

    waiting: list[Response] = []
    poll = threading.Thread(target=long_poll, args=(b, old, first, dep["id"], waiting))
    poll.start()
    time.sleep(0.5)  # the long-poll parks in B

    token = a.cli("server", "token", "rebuilt", "-f", "json")
    assert 0 == token.returncode, token.stderr
    new = enrol(a, json.loads(token.stdout)["enrol_token"], tmp_path / "state2")
    revoked_at = time.monotonic()
    rebuilt = a.api("GET", f"/v1/deployments/{dep['id']}").body
    assert 2 == rebuilt["generation"]  # a rebuild: everything on the server runs again

    # Checked in the transaction that would apply them: refused at once, on B too.
    beat = b.api("POST", "/v1/agent/heartbeat", {}, token=old)
    assert 401 == beat.status, beat.body
    forged = {"deploy_status_code": 0, "deploy_stdout": "forged", "deploy_stderr": ""}
    for generation in (1, 2):
        refused = b.api("POST", f"/v1/signal/{dep['id']}/{generation}", forged, token=old)
        assert 401 == refused.status, refused.body
    # Reads are refused once B's cache is past the bound (docs: 1 s).
    wait_until(
        lambda: b.api("GET", "/v1/agent/document", token=old).status == 401,
        "B still serves the document to the revoked credential",
        15,
        interval=0.05,
    )
    refused_after = time.monotonic() - revoked_at
    poll.join(30)
    assert not poll.is_alive()
    assert 401 == waiting[-1].status, waiting[-1].body
    print(f"\nrevoked credential refused by the other process after {refused_after:.2f} s (bound 1 s)")

    assert 200 == b.api("GET", "/v1/agent/document", token=new).status
    assert 200 == b.api("POST", "/v1/agent/heartbeat", {}, token=new).status
    after = a.api("GET", f"/v1/deployments/{dep['id']}").body
    assert ("IN_PROGRESS", 2, "") == (after["status"], after["generation"], after["deploy_stdout"])
