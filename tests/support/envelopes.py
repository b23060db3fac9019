"""Signed documents for the envelope tests: a fixed clock, a ~3 KB document, chains of rotated keys."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import envelope, wire

#: The tests' "now": documents are issued then and verified then.
NOW = 1_800_000_000.0


def pub(key: Ed25519PrivateKey) -> bytes:
    """The raw public key of *key*, as documents and links name it."""
    return envelope.public_raw(key.public_key())


def document(serial: int = 7, server_id: str = "srv-a", expires: float = NOW + 3600) -> dict[str, Any]:
    """A ~3 KB document of one deployment item for *server_id*, with non-ASCII and escaped text."""
    item = wire.DeploymentItem(
        id=f"item-{serial}",
        name="10_install",
        group="script",
        creation_time="2026-11-22T04:00:00Z",
        config='#!/bin/sh\necho installing \u00e9t\u00e9 \\ "quoted"\nexit 0\n' + "x" * 2000,
        inputs=(
            wire.InputItem("foo", "bar"),
            wire.InputItem("deploy_signal_id", "http://127.0.0.1:1/v1/signal/d/1?sig=ab"),
        ),
        outputs=(wire.OutputItem("result"),),
    )
    meta = {item.id: wire.ItemMeta("dep-1", serial, "sha256:00", "CREATE", 60.0)}
    doc = wire.Document(server_id, serial, envelope.iso(NOW), (item,), meta, expires_at=envelope.iso(expires))
    return doc.to_json()


def rotated(n: int) -> tuple[list[Ed25519PrivateKey], list[envelope.Link]]:
    """*n* keys, each rotated to the next: the keys and the chain links between them."""
    keys = [Ed25519PrivateKey.generate() for _ in range(n)]
    links = [envelope.make_link(keys[i], pub(keys[i + 1]), envelope.iso(NOW)) for i in range(n - 1)]
    return keys, links
