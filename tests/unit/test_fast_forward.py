"""R15, fast-forward recovery: the serial floor belongs to the signing key; a rotation resets it.

The agent here is the real `agent.loop.Agent` with its real SQLite ledger in a temp dir;
only its transport's fetch is replaced by the test, which hands it the bytes an attacker
or the control plane would publish (no network is needed to show what the agent accepts).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import client, envelope
from agent.config import AgentConfig
from agent.errors import DocumentRejectedError
from agent.httpclient import Session
from agent.loop import Agent
from tests.support.envelopes import NOW, document, pub, rotated

HIGH = 2**62


class Harness:
    """An agent pinned to keys[0] at enrolment; `offer` hands it one document."""

    def __init__(self, state_dir: Path, keys: list[Ed25519PrivateKey], links: list[envelope.Link]) -> None:
        self.state_dir, self.keys, self.links = state_dir, keys, links
        self.agent = self.start()

    def start(self) -> Agent:
        config = AgentConfig(
            url="",
            server_id="srv-a",
            name="a",
            credential="c",
            document_url="",
            heartbeat_url="",
            control_public_key=base64.b64encode(pub(self.keys[0])).decode(),
        )
        agent = Agent(config, self.state_dir)
        agent.clock = lambda: NOW
        return agent

    def restart(self) -> None:
        self.agent.ledger.close()
        self.agent = self.start()

    def signed(self, signer: int, serial: int) -> bytes:
        return envelope.sign(document(serial), self.keys[signer], self.links[:signer])

    def offer(self, raw: bytes) -> str:
        """'accepted', or the kind of the rejection."""

        async def fetch(session: Session, etag: str, wait: float) -> client.Fetched:
            return client.Fetched(f'"{len(raw)}"', raw)

        self.agent.transport.fetch = fetch  # type: ignore[method-assign]
        self.agent._http = None  # type: ignore[assignment]  # the replaced fetch needs no session
        try:
            asyncio.run(self.agent.poll(0))
        except DocumentRejectedError as e:
            return e.kind
        return "accepted"

    @property
    def floor(self) -> int:
        return int(self.agent.ledger.get_state("serial", "0") or 0)

    @property
    def pinned(self) -> str:
        return envelope.key_id(self.agent.signature_check.trusted) if self.agent.signature_check else ""


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    keys, links = rotated(3)
    return Harness(tmp_path, keys, links)


def test_fast_forward_by_a_key_holder_is_recovered_by_a_rotation(h: Harness) -> None:
    """2^62 signed by the then-current key locks genuine serials out; after a rotation they flow again."""
    assert "accepted" == h.offer(h.signed(0, 7))
    attack = h.signed(0, HIGH)
    assert "accepted" == h.offer(attack)  # the key was genuine when it signed: nothing can tell
    assert HIGH == h.floor
    assert "rollback" == h.offer(h.signed(0, 8))  # the lock-out the attack causes
    assert "accepted" == h.offer(h.signed(1, 9))  # `anneal key rotate`: new key, normal serial
    assert envelope.key_id(pub(h.keys[1])) == h.pinned
    assert 9 == h.floor
    assert "accepted" == h.offer(h.signed(1, 10))


@pytest.mark.parametrize(
    ("signer", "serial", "outcome"),
    [
        (0, HIGH, "signature"),  # the attacker's document replayed: revoked key + high serial
        (0, HIGH + 1, "signature"),  # a fresh one from the revoked key
        (0, 11, "signature"),  # the revoked key with a normal serial
        (1, 9, "rollback"),  # rollback under the new key: the floor holds within a key
        (1, HIGH, "accepted"),  # the current key may move its own serial forward
        (2, 1, "accepted"),  # the next rotation resets the floor again, however low
    ],
)
def test_after_recovery_the_matrix_holds(h: Harness, signer: int, serial: int, outcome: str) -> None:
    """After the rotation: revoked key refused at any serial, no rollback under the same key, across restarts."""
    attack = h.signed(0, HIGH)
    for raw in (h.signed(0, 7), attack, h.signed(1, 10)):
        assert "accepted" == h.offer(raw)
    h.restart()  # the floor and the pinned key come back from the ledger
    raw = attack if (signer, serial) == (0, HIGH) else h.signed(signer, serial)
    assert outcome == h.offer(raw)
    assert (serial if outcome == "accepted" else 10) == h.floor


def test_two_rotations_at_once_recover_an_agent_that_was_away(h: Harness) -> None:
    """An agent offline through two rotations follows the whole chain and resets the floor once."""
    assert "accepted" == h.offer(h.signed(0, HIGH))
    assert "accepted" == h.offer(h.signed(2, 3))
    assert (envelope.key_id(pub(h.keys[2])), 3) == (h.pinned, h.floor)
    assert "signature" == h.offer(h.signed(1, HIGH))  # the middle key is revoked too


def test_no_rollback_without_a_rotation(h: Harness) -> None:
    """The reset needs a newer key through the chain: the same key never goes back."""
    assert "accepted" == h.offer(h.signed(0, 20))
    assert "rollback" == h.offer(h.signed(0, 19))
    attacker = Ed25519PrivateKey.generate()  # a key of its own, with no link from the pinned one
    forged = envelope.sign(document(1), attacker, [envelope.make_link(attacker, pub(attacker), "x")])
    assert "signature" == h.offer(forged)
    assert 20 == h.floor
