"""The cryptography an agent does all the time, from whichever library this server has.

Verifying documents (Ed25519), opening sealed secrets (X25519, HKDF-SHA256,
ChaCha20-Poly1305) and SHA-256 go through the system's OpenSSL 3 libcrypto
(``agent.libcrypto``, by ctypes: 4 MiB resident where cryptography costs 11), else through
cryptography, chosen once at the first call and logged at debug. ``ANNEAL_AGENT_CRYPTO=cryptography``
forces cryptography. Making keys, signing and PEM stay with cryptography, imported only then.
Both backends take and give raw bytes; sizes are checked here, so both refuse the same input
with the same ``CryptoError``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from agent.errors import CryptoError

log = logging.getLogger(__name__)
ENV = "ANNEAL_AGENT_CRYPTO"
#: HKDF's limit: 255 blocks of SHA-256 (RFC 5869).
MAX_HKDF = 255 * 32


class Backend(Protocol):
    name: str

    def sha256(self, data: bytes) -> bytes: ...
    def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool: ...
    def x25519_public(self, private: bytes) -> bytes: ...
    def x25519(self, private: bytes, peer: bytes) -> bytes: ...
    def hkdf_sha256(self, secret: bytes, salt: bytes, info: bytes, length: int) -> bytes: ...
    def chacha20poly1305_open(self, key: bytes, nonce: bytes, sealed: bytes, aad: bytes) -> bytes: ...


class Cryptography:
    """The same operations through cryptography (pyca), for servers without a usable libcrypto."""

    name = "cryptography"

    def __init__(self) -> None:
        # Imported here, not at the top: the agent that has libcrypto never loads cryptography for these.
        from cryptography import exceptions  # noqa: PLC0415
        from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ed25519, x25519  # noqa: PLC0415
        from cryptography.hazmat.primitives.ciphers import aead  # noqa: PLC0415
        from cryptography.hazmat.primitives.kdf import hkdf  # noqa: PLC0415

        self._exceptions, self._hashes, self._ed25519 = exceptions, hashes, ed25519
        self._x25519, self._aead, self._hkdf = x25519, aead, hkdf

    def sha256(self, data: bytes) -> bytes:
        digest = self._hashes.Hash(self._hashes.SHA256())
        digest.update(data)
        return bytes(digest.finalize())

    def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool:
        try:
            self._ed25519.Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        except self._exceptions.InvalidSignature:
            return False
        return True

    def x25519_public(self, private: bytes) -> bytes:
        return bytes(
            self._x25519.X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()
        )

    def x25519(self, private: bytes, peer: bytes) -> bytes:
        key = self._x25519.X25519PrivateKey.from_private_bytes(private)
        try:
            return bytes(key.exchange(self._x25519.X25519PublicKey.from_public_bytes(peer)))
        except ValueError as e:  # an all-zero result: a low-order public key
            raise CryptoError("X25519 with this public key failed (cryptography)") from e

    def hkdf_sha256(self, secret: bytes, salt: bytes, info: bytes, length: int) -> bytes:
        return bytes(self._hkdf.HKDF(self._hashes.SHA256(), length, salt=salt, info=info).derive(secret))

    def chacha20poly1305_open(self, key: bytes, nonce: bytes, sealed: bytes, aad: bytes) -> bytes:
        try:
            return bytes(self._aead.ChaCha20Poly1305(key).decrypt(nonce, sealed, aad))
        except self._exceptions.InvalidTag as e:
            raise CryptoError("ChaCha20-Poly1305: the tag does not match (wrong key, or altered)") from e


_chosen: list[Backend] = []


def choose(name: str | None = None) -> Backend:
    """Pick the backend now: *name* if given, else cryptography when $ANNEAL_AGENT_CRYPTO says so,
    else libcrypto when it loads and cryptography when it does not."""
    if name not in (None, "libcrypto", "cryptography"):
        raise CryptoError(f"no crypto backend {name!r}: libcrypto or cryptography")
    wanted = name if name is not None else os.environ.get(ENV, "")
    picked: Backend
    if wanted == "cryptography":
        picked = Cryptography()
    elif name == "libcrypto":
        picked = _libcrypto()
    else:
        if wanted not in ("", "libcrypto"):
            log.warning("%s=%r is neither libcrypto nor cryptography: taken as unset", ENV, wanted)
        try:
            picked = _libcrypto()
        except CryptoError as e:
            log.debug("%s: cryptography does the agent's crypto", e)
            picked = Cryptography()
    _chosen[:] = [picked]
    return picked


def _libcrypto() -> Backend:
    try:
        from agent import libcrypto  # noqa: PLC0415 - ctypes is loaded only when the agent needs crypto
    except ImportError as e:  # a Python built without ctypes
        raise CryptoError(f"the system's libcrypto cannot be used: {e}") from e
    try:
        return libcrypto.load()
    except libcrypto.Unavailable as e:
        raise CryptoError(f"the system's libcrypto cannot be used: {e}") from e


def backend() -> Backend:
    """The backend in use, chosen at the first call."""
    return _chosen[0] if _chosen else choose()


def _size(data: Any, size: int, what: str) -> None:
    if not isinstance(data, bytes):
        raise CryptoError(f"{what} must be bytes, not {type(data).__name__}")
    if len(data) != size:
        raise CryptoError(f"{what} must be {size} bytes, got {len(data)}")


def sha256(data: bytes) -> bytes:
    return backend().sha256(data)


def ed25519_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """True when *signature* is *public*'s Ed25519 signature of *message*; a wrong-size signature is False."""
    _size(public, 32, "an Ed25519 public key")
    if not isinstance(signature, bytes) or len(signature) != 64:
        return False
    return backend().ed25519_verify(public, signature, message)


def x25519_public(private: bytes) -> bytes:
    _size(private, 32, "an X25519 private key")
    return backend().x25519_public(private)


def x25519(private: bytes, peer: bytes) -> bytes:
    """The X25519 shared secret; CryptoError for a low-order *peer* (an all-zero secret)."""
    _size(private, 32, "an X25519 private key")
    _size(peer, 32, "an X25519 public key")
    return backend().x25519(private, peer)


def hkdf_sha256(secret: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    if not 1 <= length <= MAX_HKDF:
        raise CryptoError(f"HKDF-SHA256 gives 1 to {MAX_HKDF} bytes, not {length}")
    return backend().hkdf_sha256(secret, salt, info, length)


def chacha20poly1305_open(key: bytes, nonce: bytes, sealed: bytes, aad: bytes) -> bytes:
    """The plaintext of *sealed* (ciphertext and 16-byte tag); CryptoError unless the tag matches."""
    _size(key, 32, "a ChaCha20-Poly1305 key")
    _size(nonce, 12, "a ChaCha20-Poly1305 nonce")
    if len(sealed) < 16:
        raise CryptoError(f"a ChaCha20-Poly1305 text holds a 16-byte tag, this one is {len(sealed)} bytes")
    return backend().chacha20poly1305_open(key, nonce, sealed, aad)
