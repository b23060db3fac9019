"""R15 fast-forward recovery end to end: a real control plane, a real agent, `anneal key rotate`.

The server is on LOCAL, so the test is the courier carrying documents onto the agent's media,
and also the attacker: it holds a copy of the signing key taken before the rotation and puts
a document with serial 2^62 on the media. The agent accepts it (the key was genuine then) and
refuses every genuine document after it, until the operator rotates the key; then the
genuine documents flow again, and the attacker's key and document are refused for good.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import envelope
from tests.support import agents
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.courier import Media
from tests.support.templates import said_stack
from tests.support.waiting import wait_until

HIGH = 2**62

TEMPLATE = said_stack("LOCAL", server_name="ff-box")


def agent_status(cp: ControlPlane) -> dict[str, Any]:
    return agents.agent_status(cp.agent_dir("ff-box"))


def wait(check: Callable[[], bool], what: str, carry: Callable[[], None] = lambda: None) -> None:
    """Wait for *check*, carrying between tries (check first: *carry* runs only when it fails)."""

    def attempt() -> bool:
        if check():
            return True
        carry()
        return False

    wait_until(attempt, what, 120, interval=0.3)


def rejections(cp: ControlPlane, kind: str) -> int:
    return int(agent_status(cp)["rejections"]["counts"].get(kind, 0))


@pytest.mark.catalogue("R15")
def test_a_fast_forwarded_agent_recovers_after_key_rotation(tmp_path: Path) -> None:
    """A document pushed to serial 2^62 with a stolen key locks the agent out until `anneal key rotate`."""
    local = Media.under(tmp_path)
    media = local.media
    cp = start_control_plane(tmp_path, *local.serve_args())
    try:
        assert 201 == cp.create("ff", TEMPLATE).status
        wait(lambda: cp.api("GET", "/v1/servers/ff-box").status == 200, "the server")
        server_id = cp.api("GET", "/v1/servers/ff-box").body["id"]
        doc_file = local.document(server_id)

        def carry() -> None:  # the honest courier
            local.carry(cp, server_id)

        def stack(status: str) -> Callable[[], bool]:
            return lambda: cp.api("GET", "/v1/stacks/ff").body["status"] == status

        wait(stack("CREATE_COMPLETE"), "create", carry)

        # The attacker: the signing key as it is now, and a genuine document pushed to 2^62.
        pem = (cp.data_dir / "signing-key.pem").read_bytes()
        stolen = serialization.load_pem_private_key(pem, password=None)
        assert isinstance(stolen, Ed25519PrivateKey)
        forged = json.loads(doc_file.read_bytes())
        forged["anneal"]["serial"] = HIGH
        attack = envelope.sign(forged, stolen)
        (media / "document.json").write_bytes(attack)
        wait(lambda: agent_status(cp)["serial"] == HIGH, "the agent to take serial 2^62")

        # Locked out: the next genuine document is refused as a rollback, nothing runs.
        body = {"template": TEMPLATE, "parameters": {"message": "two"}}
        assert 202 == cp.api("PUT", "/v1/stacks/ff", body).status
        wait(lambda: rejections(cp, "rollback") > 0, "the genuine document refused", carry)
        assert "UPDATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/ff").body["status"]

        # Recovery: the operator rotates; the new key's documents start a new serial floor.
        rotated = cp.cli("key", "rotate", "-f", "json")
        assert 0 == rotated.returncode, rotated.stderr
        new_key = json.loads(rotated.stdout)["key_id"]
        wait(stack("UPDATE_COMPLETE"), "the update after the rotation", carry)
        assert {"said": "said two"} == cp.outputs("ff")
        status = agent_status(cp)
        assert new_key == status["trusted_key_id"]
        floor = status["serial"]
        assert floor < 1000

        # The attacker's document (and anything new from the revoked key) is refused now.
        before = rejections(cp, "signature")
        (media / "document.json").write_bytes(attack)
        wait(lambda: rejections(cp, "signature") > before, "the revoked key refused")
        forged["anneal"]["serial"] = HIGH + 1
        (media / "document.json").write_bytes(envelope.sign(forged, stolen))
        wait(lambda: rejections(cp, "signature") > before + 1, "a fresh document of the revoked key refused")
        assert floor == agent_status(cp)["serial"]

        # No rollback under the new key either: an older document it signed is refused.
        older = doc_file.read_bytes()
        body = {"template": TEMPLATE, "parameters": {"message": "three"}}
        assert 202 == cp.api("PUT", "/v1/stacks/ff", body).status
        wait(stack("UPDATE_COMPLETE"), "the next update", carry)
        assert {"said": "said three"} == cp.outputs("ff")
        rollbacks = rejections(cp, "rollback")
        (media / "document.json").write_bytes(older)
        wait(lambda: rejections(cp, "rollback") > rollbacks, "an older document of the new key refused")
    finally:
        stop_control_plane(cp)
