"""The agent's side of a hand-over (agent/handover.py): a signed document moves it to another control plane's URL and key."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import config, envelope, handover, verify
from agent.errors import ConfigError
from agent.ledger import Ledger
from agent.transports.switch import AgentTransport

OLD = envelope.public_raw(Ed25519PrivateKey.generate().public_key())
NEW = envelope.public_raw(Ed25519PrivateKey.generate().public_key())
TO = {
    "url": "http://127.0.0.1:9002",
    "document_url": "http://127.0.0.1:9002/v1/agent/document",
    "heartbeat_url": "http://127.0.0.1:9002/v1/agent/heartbeat",
    "public_key": base64.b64encode(NEW).decode(),
}


@dataclass
class Moving:
    """The parts of a running agent a hand-over changes, made of the real objects."""

    config: config.AgentConfig
    state_dir: Path
    ledger: Ledger
    transport: AgentTransport
    signature_check: verify.SignatureCheck | None


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Moving]:
    """An agent's config, ledger and transport in *tmp_path*, trusting OLD at the first control plane."""
    cfg = config.AgentConfig(
        url="http://127.0.0.1:9001",
        server_id="s1",
        name="box",
        credential="c",
        document_url="http://127.0.0.1:9001/v1/agent/document",
        heartbeat_url="http://127.0.0.1:9001/v1/agent/heartbeat",
        control_public_key=base64.b64encode(OLD).decode(),
    )
    config.save(tmp_path, cfg)
    ledger = Ledger(tmp_path)
    yield Moving(cfg, tmp_path, ledger, AgentTransport(cfg, ledger), verify.SignatureCheck(OLD))
    ledger.close()


def test_a_signed_hand_over_moves_the_agent_to_the_new_url_and_key_once(agent: Moving) -> None:
    """The new URLs are saved in agent.json, the new key becomes the only one trusted; the same section again moves nothing."""
    assert handover.follow(agent, TO)
    saved = json.loads((agent.state_dir / config.CONFIG_FILE).read_text())
    assert (saved["url"], saved["document_url"], saved["heartbeat_url"]) == (
        TO["url"],
        TO["document_url"],
        TO["heartbeat_url"],
    )
    assert agent.ledger.get_state("trusted_key") == TO["public_key"]
    assert agent.signature_check is not None and agent.signature_check.trusted == NEW
    assert agent.transport.config.document_url == TO["document_url"]
    assert not handover.follow(agent, TO)


def test_an_unsigned_document_or_a_bad_section_moves_nothing(agent: Moving) -> None:
    """Under heat-compatible (no signature) or with a section whose URL or key is wrong, the agent stays put."""
    unsigned = Moving(agent.config, agent.state_dir, agent.ledger, agent.transport, None)
    assert not handover.follow(unsigned, TO)
    assert not handover.follow(agent, {**TO, "document_url": "file:///etc/passwd"})
    assert not handover.follow(agent, {**TO, "public_key": "AAAA"})
    assert agent.ledger.get_state("trusted_key") is None
    assert json.loads((agent.state_dir / config.CONFIG_FILE).read_text())["url"] == "http://127.0.0.1:9001"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"url": "ftp://x"}, "anneal.handover.url"),
        ({"heartbeat_url": "http://x/?a=1"}, "anneal.handover.heartbeat_url"),
        ({"public_key": None}, "anneal.handover.public_key"),
    ],
)
def test_a_bad_hand_over_section_is_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    """Each wrong field of a hand-over is named in the refusal."""
    with pytest.raises(ConfigError, match=named):
        handover.read({**TO, **change})
