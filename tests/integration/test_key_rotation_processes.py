"""A signing key rotated by one process is the key every process on the data dir signs with (docs/operations.md).

Two `anneal serve` processes share one database (SQLite file or PostgreSQL) and one data
dir. Rotating on A bumps every server's serial; B re-renders those documents, and must
sign them with A's new key: an agent behind a load balancer that has seen the new key
refuses a document signed with the old one. Then rotating on B chains from A's key (no
fork of the chain) and A follows in turn.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import envelope
from agent.wire import canonical_json
from tests.support.agents import enrol_agent
from tests.support.controlplane import ControlPlane, two_planes
from tests.support.waiting import wait_until


@pytest.fixture
def planes(tmp_path: Path, db_args: list[str]) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    with two_planes(tmp_path, *db_args, defaults=("--provisioner", "enrol")) as (a, b):
        yield a, b


def signed_document(cp: ControlPlane, credential: str) -> dict[str, Any]:
    got = cp.api("GET", "/v1/agent/document", token=credential)
    assert 200 == got.status, got.body
    return dict(got.body)


def signer(doc: dict[str, Any]) -> str:
    return str(doc["anneal"]["signature"]["key_id"])


def rotate(cp: ControlPlane) -> dict[str, Any]:
    done = cp.api("POST", "/v1/keys/rotate")
    assert 201 == done.status, done.body
    return dict(done.body)


def test_every_process_signs_with_the_key_one_process_rotated_to(
    planes: tuple[ControlPlane, ControlPlane], tmp_path: Path
) -> None:
    """B signs with A's new key, its documents verify from the first pinned key; B's rotation extends the chain."""
    a, b = planes
    enrol_agent(a, "rot-box", tmp_path / "state")
    enrolled = json.loads((tmp_path / "state" / "agent.json").read_text())
    credential, pinned = enrolled["credential"], base64.b64decode(enrolled["control_public_key"])
    first = signer(signed_document(b, credential))
    assert first == a.api("GET", "/v1/keys").body["key_id"]

    second = rotate(a)
    assert (first, 1) == (second["previous_key_id"], len(second["chain"]))
    wait_until(
        lambda: signer(signed_document(b, credential)) == second["key_id"],
        "B still signs with the key A rotated away from",
        20,
        interval=0.1,
    )
    doc = signed_document(b, credential)
    envelope.verify(canonical_json(doc), pinned, time.time())  # raises if the chain is broken
    assert second["key_id"] == b.api("GET", "/v1/keys").body["key_id"]

    third = rotate(b)
    assert (second["key_id"], 2) == (third["previous_key_id"], len(third["chain"]))
    wait_until(
        lambda: signer(signed_document(a, credential)) == third["key_id"],
        "A did not follow the key B rotated to",
        20,
        interval=0.1,
    )
    envelope.verify(canonical_json(signed_document(a, credential)), pinned, time.time())
