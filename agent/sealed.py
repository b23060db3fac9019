"""Secret values sealed to one server's X25519 key, opened only by that server's agent.

Construction (``v1``): a fresh X25519 key pair per value; the shared secret with
the server's public key goes through HKDF-SHA256 (salt = ephemeral public key ||
server public key, info = ``anneal-seal-v1``) to a 32-byte ChaCha20-Poly1305 key,
used once with a zero nonce. The associated data is the value's place
(``<server>/<item>/<field>``), so a sealed value moved elsewhere does not open.
The plaintext is the canonical JSON of the value. The text form is
``anneal-sealed:v1:`` + base64(ephemeral public key || ciphertext and tag).
The agent opens with ``agent.crypto``; the control plane seals with cryptography.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agent import crypto, wire
from agent.wire import canonical_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    #: A box key as raw bytes (the agent's) or cryptography's object (the control plane's tests).
    BoxKey = bytes | X25519PrivateKey

PREFIX = "anneal-sealed:v1:"
#: Written instead of a secret when the server has no key to seal it to (not enrolled).
UNAVAILABLE = "anneal-sealed:unavailable"
_INFO = b"anneal-seal-v1"
_NONCE = bytes(12)  # each key encrypts exactly one message


class SealError(ValueError):
    """A sealed value cannot be opened (wrong key, altered, or never sealed to this server)."""


def _key(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:
    return crypto.hkdf_sha256(shared, ephemeral + recipient, _INFO, 32)


def seal(value: Any, recipient: bytes, place: str) -> str:
    """Encrypt *value* to the X25519 public key *recipient*, bound to *place*."""
    # Key generation and encryption happen on the control plane only: cryptography, loaded here.
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey  # noqa: PLC0415
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305  # noqa: PLC0415

    ephemeral = X25519PrivateKey.generate()
    ephemeral_pub = ephemeral.public_key().public_bytes_raw()
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient))
    box = ChaCha20Poly1305(_key(shared, ephemeral_pub, recipient))
    sealed = box.encrypt(_NONCE, canonical_json(value), place.encode())
    return PREFIX + base64.b64encode(ephemeral_pub + sealed).decode()


def open_sealed(text: Any, private: BoxKey, place: str) -> Any:
    """The value sealed in *text* for this server at *place*."""
    if text == UNAVAILABLE:
        raise SealError(f"{place}: the control plane had no key of this server to seal it to (enrol first)")
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise SealError(f"{place}: not a sealed value")
    try:
        raw = base64.b64decode(text[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as e:
        raise SealError(f"{place}: not base64") from e
    if len(raw) < 32 + 16:
        raise SealError(f"{place}: too short to be sealed")
    ephemeral_pub, sealed = raw[:32], raw[32:]
    own = private if isinstance(private, bytes) else private.private_bytes_raw()
    try:
        shared = crypto.x25519(own, ephemeral_pub)
        key = _key(shared, ephemeral_pub, crypto.x25519_public(own))
        plain = crypto.chacha20poly1305_open(key, _NONCE, sealed, place.encode())
    except ValueError as e:  # CryptoError: a low-order ephemeral key, or a tag that does not match
        raise SealError(f"{place}: does not open with this server's key") from e
    return json.loads(plain)


def unavailable(item: wire.DeploymentItem, fields: Iterable[str]) -> bool:
    """Whether a sealed field of *item* holds UNAVAILABLE: rendered before this server enrolled."""
    wanted = set(fields)
    if "config" in wanted and item.config == UNAVAILABLE:
        return True
    return any(f"inputs.{i.name}" in wanted and i.value == UNAVAILABLE for i in item.inputs)


def open_item(
    item: wire.DeploymentItem, fields: Iterable[str], server_id: str, private: BoxKey
) -> wire.DeploymentItem:
    """*item* with the sealed *fields* (``config``, ``inputs.<name>``) opened."""
    wanted = set(fields)
    known = {"config"} | {f"inputs.{i.name}" for i in item.inputs}
    if wanted - known:
        raise SealError(f"sealed fields {sorted(wanted - known)} are not in deployment {item.id}")
    config = item.config
    if "config" in wanted:
        config = open_sealed(config, private, f"{server_id}/{item.id}/config")
    inputs = tuple(
        dataclasses.replace(
            inp, value=open_sealed(inp.value, private, f"{server_id}/{item.id}/inputs.{inp.name}")
        )
        if f"inputs.{inp.name}" in wanted
        else inp
        for inp in item.inputs
    )
    return dataclasses.replace(item, config=config, inputs=inputs)
