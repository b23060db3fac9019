"""The signed envelope: a per-server document with its Ed25519 signature inside.

The document stays Heat's shape; the control plane adds, under the ``anneal``
key, ``expires_at``, the signing key's chain (``key_chain``) and
``signature`` = ``{alg, key_id, value}`` over the canonical JSON of the whole
document with ``anneal.signature`` left out. The bytes a transport carries
must be exactly that canonical JSON with the signature in it: a document that
is not canonical is refused, so no two byte strings verify as the same one.

A key chain link says "key N+1 follows key N", signed by key N; an agent
pinned to key N accepts a document signed by key N+M only through M valid
links, and from then on trusts only the newest key (older ones are revoked
for it). Signatures are checked by ``agent.crypto``; signing keys are cryptography's
objects, made and used by the control plane only.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent import crypto
from agent.wire import EXTRA_KEY, canonical_json
from agent.wire_caps import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALG = "ed25519"
#: A longer chain than this is refused (TUF caps root rotations the same way).
MAX_CHAIN = 256


class EnvelopeError(ValueError):
    """A document's signature, chain or expiry does not check out; the message says which."""

    kind = "signature"


class UnsignedError(EnvelopeError):
    kind = "unsigned"


class ExpiredError(EnvelopeError):
    kind = "expired"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def strict_b64(text: Any, where: str, size: int) -> bytes:
    """Decode base64 that must be exactly the canonical encoding of *size* bytes."""
    if not isinstance(text, str):
        raise EnvelopeError(f"{where}: expected a base64 string")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise EnvelopeError(f"{where}: not base64") from e
    # Unused low bits of the last character would let two strings decode to the same bytes.
    if len(raw) != size or b64(raw) != text:
        raise EnvelopeError(f"{where}: not the canonical base64 of {size} bytes")
    return raw


def public_raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes_raw()


def key_id(public: bytes) -> str:
    """A short, stable name for a public key: ``ed25519:`` and 16 hex digits of its SHA-256."""
    return f"{ALG}:{crypto.sha256(public).hex()[:16]}"


@dataclass(frozen=True)
class Link:
    """One rotation step: *public* follows *previous*, signed by the previous key."""

    previous: str
    public: str
    issued_at: str
    signature: str

    @property
    def key_id(self) -> str:
        return key_id(base64.b64decode(self.public))

    def signed_bytes(self) -> bytes:
        return canonical_json(
            {"previous": self.previous, "public_key": self.public, "issued_at": self.issued_at, "alg": ALG}
        )

    def to_json(self) -> dict[str, str]:
        return {
            "alg": ALG,
            "previous": self.previous,
            "public_key": self.public,
            "issued_at": self.issued_at,
            "signature": self.signature,
        }


def make_link(previous: Ed25519PrivateKey, new_public: bytes, issued_at: str) -> Link:
    """The link by which holders of *previous* come to trust *new_public*."""
    unsigned = Link(key_id(public_raw(previous.public_key())), b64(new_public), issued_at, "")
    return Link(unsigned.previous, unsigned.public, issued_at, b64(previous.sign(unsigned.signed_bytes())))


def decode_link(obj: Any, where: str) -> Link:
    if not isinstance(obj, Mapping):
        raise EnvelopeError(f"{where}: expected an object")
    fields = {}
    for name in ("alg", "previous", "public_key", "issued_at", "signature"):
        if not isinstance(obj.get(name), str):
            raise EnvelopeError(f"{where}.{name}: required string")
        fields[name] = obj[name]
    if fields["alg"] != ALG:
        raise EnvelopeError(f"{where}.alg: {fields['alg']!r} is not {ALG}")
    return Link(fields["previous"], fields["public_key"], fields["issued_at"], fields["signature"])


def follow_chain(trusted: bytes, links: Sequence[Link], target: str) -> bytes:
    """Walk *links* from the *trusted* key to the key named *target*; return that key.

    Each step must be signed by the key trusted at that point; anything else is
    refused, so a chain cannot fork away from the pinned key.
    """
    current = trusted
    by_previous = {link.previous: link for link in links}
    for _ in range(MAX_CHAIN + 1):
        if key_id(current) == target:
            return current
        link = by_previous.get(key_id(current))
        if link is None:
            raise EnvelopeError(
                f"signed by key {target}, which no valid chain link from the pinned key {key_id(current)} "
                "reaches (an unknown or revoked key)"
            )
        signature = strict_b64(link.signature, f"key_chain link after {link.previous}: signature", 64)
        if not crypto.ed25519_verify(current, signature, link.signed_bytes()):
            raise EnvelopeError(f"key_chain link after {link.previous}: bad signature")
        current = strict_b64(link.public, f"key_chain link after {link.previous}: public_key", 32)
    raise EnvelopeError(f"key_chain: longer than {MAX_CHAIN} links")


# ------------------------------------------------------------------ signing


def signed_bytes(doc: Mapping[str, Any]) -> bytes:
    """What the signature covers: the canonical document without ``anneal.signature``."""
    body = dict(doc)
    ours = dict(body.get(EXTRA_KEY) or {})
    ours.pop("signature", None)
    body[EXTRA_KEY] = ours
    return canonical_json(body)


def sign(doc: Mapping[str, Any], key: Ed25519PrivateKey, chain: Sequence[Link] = ()) -> bytes:
    """The envelope's bytes: *doc* with its key chain and signature, as canonical JSON.

    The document's other keys (its deployments: nearly all of its bytes) are encoded once,
    for both the signed bytes and the envelope; only the ``anneal`` object is encoded twice.
    """
    body = copy.copy(dict(doc))
    ours = dict(body.get(EXTRA_KEY) or {})
    ours.pop("signature", None)
    if chain:
        ours["key_chain"] = [link.to_json() for link in chain]
    body[EXTRA_KEY] = ours
    if not all(isinstance(k, str) for k in body):  # json.dumps would convert such keys: let it
        signature = key.sign(signed_bytes(body))
        ours["signature"] = {"alg": ALG, "key_id": _signer_id(key), "value": b64(signature)}
        return canonical_json(body)
    parts = {k: canonical_json(k) + b":" + canonical_json(v) for k, v in body.items() if k != EXTRA_KEY}
    signature = key.sign(_joined(parts, canonical_json(ours)))
    ours["signature"] = {"alg": ALG, "key_id": _signer_id(key), "value": b64(signature)}
    return _joined(parts, canonical_json(ours))


def _joined(parts: Mapping[str, bytes], ours: bytes) -> bytes:
    """``canonical_json`` of a map from its members' encodings: sorted keys, no spaces (as json.dumps)."""
    members = {**parts, EXTRA_KEY: canonical_json(EXTRA_KEY) + b":" + ours}
    return b"{" + b",".join(members[k] for k in sorted(members)) + b"}"


@functools.lru_cache(maxsize=4)
def _signer_id(key: Ed25519PrivateKey) -> str:
    """The signing key's id (cached by key object: a control plane signs thousands of documents with
    one key, and deriving its public key and hashing it was a fifth of each signature's cost)."""
    return key_id(public_raw(key.public_key()))


@dataclass(frozen=True)
class Verified:
    """A document whose signature checked out, and the key that signed it."""

    doc: dict[str, Any]
    signer: bytes
    expires_at: float


def verify(raw: bytes, trusted: bytes, now: float) -> Verified:
    """Check *raw* against the pinned key *trusted* (through the chain if rotated) and its expiry."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise EnvelopeError(f"document is {len(raw)} bytes, over the cap of {MAX_DOCUMENT_BYTES}")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise EnvelopeError(f"not JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get(EXTRA_KEY), dict):
        raise UnsignedError(f"unsigned: no {EXTRA_KEY!r} object")
    if canonical_json(doc) != raw:
        raise EnvelopeError("not in canonical form (altered in transit?)")
    ours = doc[EXTRA_KEY]
    sig = ours.get("signature")
    if not isinstance(sig, dict):
        raise UnsignedError(f"unsigned: no {EXTRA_KEY}.signature")
    if sig.get("alg") != ALG:
        raise EnvelopeError(f"{EXTRA_KEY}.signature.alg: {sig.get('alg')!r} is not {ALG}")
    target = sig.get("key_id")
    if not isinstance(target, str):
        raise EnvelopeError(f"{EXTRA_KEY}.signature.key_id: required string")
    chain_obj = ours.get("key_chain") or []
    if not isinstance(chain_obj, list) or len(chain_obj) > MAX_CHAIN:
        raise EnvelopeError(f"{EXTRA_KEY}.key_chain: expected a list of at most {MAX_CHAIN} links")
    links = [decode_link(x, f"{EXTRA_KEY}.key_chain[{i}]") for i, x in enumerate(chain_obj)]
    signer = follow_chain(trusted, links, target)
    value = strict_b64(sig.get("value"), f"{EXTRA_KEY}.signature.value", 64)
    if not crypto.ed25519_verify(signer, value, signed_bytes(doc)):
        raise EnvelopeError(f"bad signature by key {target}")
    expires = parse_time(ours.get("expires_at"), f"{EXTRA_KEY}.expires_at")
    if expires <= now:
        raise ExpiredError(f"expired at {ours['expires_at']} (frozen or replayed document)")
    return Verified(doc, signer, expires)


def parse_time(text: Any, where: str) -> float:
    """Seconds since the epoch from ``YYYY-MM-DDTHH:MM:SSZ``."""
    if not isinstance(text, str):
        raise EnvelopeError(f"{where}: required timestamp")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError as e:
        raise EnvelopeError(f"{where}: {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from e


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
