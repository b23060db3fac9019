"""The server's own key pairs; the private halves never leave the state dir.

``sign`` (Ed25519) will sign the agent's reports; ``box`` (X25519) receives
secrets encrypted to this server (``Unsealer`` opens them).
"""

from __future__ import annotations

import base64
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import sealed, wire
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


class Unsealer:
    """Opens the sealed fields of this server's deployments; the box key is read when first needed."""

    def __init__(self, state_dir: Path, server_id: str) -> None:
        self.state_dir = state_dir
        self.server_id = server_id
        self._box_key: X25519PrivateKey | None = None

    def open(
        self, item: wire.DeploymentItem, meta: wire.ItemMeta | None, only: str | None = None
    ) -> wire.DeploymentItem:
        """*item* with its sealed fields (or just *only*) opened with this server's key; never logged."""
        fields = [f for f in (meta.sealed if meta else ()) if only is None or f == only]
        if not fields:
            return item
        if self._box_key is None:
            try:
                self._box_key = load_box_key(self.state_dir)
            except (OSError, ValueError) as e:
                raise sealed.SealError(f"this server's box key cannot be read: {e}") from e
        return sealed.open_item(item, fields, self.server_id, self._box_key)
