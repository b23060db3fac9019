"""Secret values sealed to one server's X25519 key, opened only by that server's agent.

Construction (``v1``): a fresh X25519 key pair per value; the shared secret with
the server's public key goes through HKDF-SHA256 (salt = ephemeral public key ||
server public key, info = ``anneal-seal-v1``) to a 32-byte ChaCha20-Poly1305 key,
used once with a zero nonce. The associated data is the value's place
(``<server>/<item>/<field>``), so a sealed value moved elsewhere does not open.
The plaintext is the canonical JSON of the value. The text form is
``anneal-sealed:v1:`` + base64(ephemeral public key || ciphertext and tag).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from agent import wire
from agent.wire import canonical_json

PREFIX = "anneal-sealed:v1:"
#: Written instead of a secret when the server has no key to seal it to (not enrolled).
UNAVAILABLE = "anneal-sealed:unavailable"
_INFO = b"anneal-seal-v1"
_NONCE = bytes(12)  # each key encrypts exactly one message


class SealError(ValueError):
    """A sealed value cannot be opened (wrong key, altered, or never sealed to this server)."""


def _raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes_raw()


def _key(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=ephemeral + recipient, info=_INFO).derive(shared)


def seal(value: Any, recipient: bytes, place: str) -> str:
    """Encrypt *value* to the X25519 public key *recipient*, bound to *place*."""
    ephemeral = X25519PrivateKey.generate()
    ephemeral_pub = _raw(ephemeral.public_key())
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient))
    box = ChaCha20Poly1305(_key(shared, ephemeral_pub, recipient))
    sealed = box.encrypt(_NONCE, canonical_json(value), place.encode())
    return PREFIX + base64.b64encode(ephemeral_pub + sealed).decode()


def open_sealed(text: Any, private: X25519PrivateKey, place: str) -> Any:
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
    try:
        shared = private.exchange(X25519PublicKey.from_public_bytes(ephemeral_pub))
        plain = ChaCha20Poly1305(_key(shared, ephemeral_pub, _raw(private.public_key()))).decrypt(
            _NONCE, sealed, place.encode()
        )
    except (InvalidTag, ValueError) as e:
        raise SealError(f"{place}: does not open with this server's key") from e
    return json.loads(plain)


def unavailable(item: wire.DeploymentItem, fields: Iterable[str]) -> bool:
    """Whether a sealed field of *item* holds UNAVAILABLE: rendered before this server enrolled."""
    wanted = set(fields)
    if "config" in wanted and item.config == UNAVAILABLE:
        return True
    return any(f"inputs.{i.name}" in wanted and i.value == UNAVAILABLE for i in item.inputs)


def open_item(
    item: wire.DeploymentItem, fields: Iterable[str], server_id: str, private: X25519PrivateKey
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
