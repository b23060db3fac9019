"""The server's own key pairs; the private halves never leave the state dir.

``sign`` (Ed25519) will sign the agent's reports; ``box`` (X25519) receives
secrets encrypted to this server (``Unsealer`` opens them). cryptography makes and reads the
key files; it is loaded only then, and a running agent that reads its own box key never loads it.
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path

from agent import sealed, wire
from agent.fsutil import private_dir, write_atomic

KEY_DIR = "keys"


def ensure_keys(state_dir: Path) -> dict[str, str]:
    """Create the key pairs if missing; return the public keys, base64 raw bytes."""
    # cryptography (11 MiB with its PEM reader) is loaded only to make or read a key file.
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: PLC0415

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
        raw = key.public_key().public_bytes_raw()
        publics[kind] = base64.b64encode(raw).decode()
    return publics


#: A PKCS#8 X25519 private key (RFC 8410), as ``ensure_keys`` writes it, is this DER and the 32 key bytes.
_X25519_PKCS8 = bytes.fromhex("302e020100300506032b656e04220420")
_PEM = ("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----")


def load_box_key(state_dir: Path) -> bytes:
    """The server's X25519 private key (32 raw bytes), which opens the secrets sealed to it.

    The key this agent wrote is read straight from its fixed DER; any other PEM goes through
    cryptography's PEM reader, which an idle agent would otherwise keep loaded (11 MiB).
    """
    path = state_dir / KEY_DIR / "box.pem"
    pem = path.read_bytes()
    head, _, rest = pem.decode("ascii", "replace").strip().partition("\n")
    body, _, tail = rest.partition("\n")
    if (head, tail) == _PEM:
        with contextlib.suppress(ValueError):  # not base64: cryptography's reader names the problem
            der = base64.b64decode(body, validate=True)
            if len(der) == 48 and der.startswith(_X25519_PKCS8):
                return der[16:]
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - as in ensure_keys
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: PLC0415

    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, X25519PrivateKey):
        raise ValueError(f"{path}: not an X25519 private key")
    return key.private_bytes_raw()


class Unsealer:
    """Opens the sealed fields of this server's deployments; the box key is read when first needed."""

    def __init__(self, state_dir: Path, server_id: str) -> None:
        self.state_dir = state_dir
        self.server_id = server_id
        self._box_key: bytes | None = None

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
