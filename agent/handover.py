"""Hand-over to another control plane (docs/protocol.md, "Hand-over"): a signed document moves the agent.

The control plane whose key this agent trusts names, in a document it signed, the control
plane that takes this server over (`stack abandon --to`): its URL and its public key. The
agent takes both at once: it polls and signals the new URL from then on and trusts only the
new key (the old one is revoked for it, as after a key rotation). Its credential stays (the
new control plane was given its hash, sealed) and its ledger is untouched, so nothing that
ran runs again. A document that is not signed (``heat-compatible``) moves nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from agent import config, envelope, verify
from agent.errors import ConfigError
from agent.ledger import Ledger
from agent.transports.switch import AgentTransport

log = logging.getLogger(__name__)
URL_FIELDS = ("url", "document_url", "heartbeat_url")


class Moving(Protocol):
    """What of the agent a hand-over changes."""

    config: config.AgentConfig
    state_dir: Path
    ledger: Ledger
    transport: AgentTransport
    signature_check: verify.SignatureCheck | None


def read(section: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """The new URLs and the new key (raw) a hand-over names; ConfigError naming a bad field."""
    urls = {}
    for name in URL_FIELDS:
        value = section.get(name)
        parts = urlsplit(value) if isinstance(value, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ConfigError(f"anneal.handover.{name}: expected an http(s) URL, got {value!r}")
        urls[name] = str(value).rstrip("/")
    text = section.get("public_key")
    key = verify.decode_key(text if isinstance(text, str) else "", "anneal.handover.public_key")
    return urls, key


def follow(agent: Moving, section: Mapping[str, Any] | None) -> bool:
    """Move *agent* to the control plane *section* names (once, if any); True when it moved."""
    if section is None:
        return False
    check = agent.signature_check
    if check is None:
        log.error("the document hands this server over, but it is not signed: staying where it is")
        return False
    try:
        urls, key = read(section)
    except ConfigError as e:
        log.error("hand-over refused: %s", e)
        return False
    if key == check.trusted and urls["document_url"] == agent.config.document_url:
        return False  # already moved: the old control plane's copy, served again
    moved = dataclasses.replace(
        agent.config,
        url=urls["url"],
        document_url=urls["document_url"],
        heartbeat_url=urls["heartbeat_url"],
        control_public_key=envelope.b64(key),
    )
    config.save(agent.state_dir, moved)
    agent.ledger.set_state("trusted_key", envelope.b64(key))
    agent.ledger.set_state("etag", "")
    check.trusted = check.signer = key
    agent.config = agent.transport.config = moved
    agent.transport.accept({"kind": "HTTP"})
    log.warning(
        "handed over to the control plane at %s (key %s): polling it from now on",
        urls["url"],
        envelope.key_id(key),
    )
    return True
