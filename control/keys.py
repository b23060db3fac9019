"""The control plane's secrets in its data dir: admin token, signing key, signal key.

Each is created on first start with mode 0600 and read back afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ADMIN_TOKEN_FILE = "admin-token"  # noqa: S105 (a file name, not a secret)
SIGNING_KEY_FILE = "signing-key.pem"
SIGNAL_KEY_FILE = "signal-key"


@dataclass(frozen=True)
class Keys:
    admin_token: str
    signing_key: Ed25519PrivateKey
    signal_key: bytes

    @property
    def public_key_b64(self) -> str:
        raw = self.signing_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return base64.b64encode(raw).decode()

    def signal_signature(self, deployment_id: str, generation: int) -> str:
        """The capability that lets a URL holder signal exactly one deployment generation."""
        msg = f"signal:{deployment_id}:{generation}".encode()
        return hmac.new(self.signal_key, msg, hashlib.sha256).hexdigest()

    def check_signal_signature(self, deployment_id: str, generation: int, sig: str) -> bool:
        return hmac.compare_digest(self.signal_signature(deployment_id, generation), sig)


def load_or_create(data_dir: Path) -> Keys:
    """Read the data dir's secrets, creating any that are missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    admin = _read_or_write(data_dir / ADMIN_TOKEN_FILE, lambda: secrets.token_urlsafe(32).encode())
    signal = _read_or_write(data_dir / SIGNAL_KEY_FILE, lambda: secrets.token_hex(32).encode())
    pem = _read_or_write(data_dir / SIGNING_KEY_FILE, _new_signing_key)
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{data_dir / SIGNING_KEY_FILE}: not an Ed25519 private key")
    return Keys(admin.decode().strip(), key, bytes.fromhex(signal.decode().strip()))


def _new_signing_key() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _read_or_write(path: Path, make: Callable[[], bytes]) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    data = make()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return data


def token_hash(token: str) -> str:
    """Tokens are stored only as their SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)
