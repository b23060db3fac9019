"""The server's own key pairs; the private halves never leave the state dir.

``sign`` (Ed25519) will sign the agent's reports; ``box`` (X25519) receives
secrets encrypted to this server.
"""

from __future__ import annotations

import base64
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent.fsutil import private_dir, write_atomic

KEY_DIR = "keys"


def ensure_keys(state_dir: Path) -> dict[str, str]:
    """Create the key pairs if missing; return the public keys, base64 raw bytes."""
    folder = private_dir(state_dir / KEY_DIR)
    publics = {}
    for kind, make in (("sign", Ed25519PrivateKey.generate), ("box", X25519PrivateKey.generate)):
        path = folder / f"{kind}.pem"
        if not path.exists():
            write_atomic(
                path,
                make().private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, (Ed25519PrivateKey, X25519PrivateKey)):
            raise ValueError(f"{path}: unexpected key type")
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        publics[kind] = base64.b64encode(raw).decode()
    return publics


def load_box_key(state_dir: Path) -> X25519PrivateKey:
    """The server's X25519 private key, which opens the secrets sealed to it."""
    path = state_dir / KEY_DIR / "box.pem"
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, X25519PrivateKey):
        raise ValueError(f"{path}: not an X25519 private key")
    return key
