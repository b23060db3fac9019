"""The control plane's secrets in its data dir: admin and metrics tokens, signing, signal and data keys.

Each is created on first start with mode 0600 and read back afterwards. The
signing key's rotation chain (``key-chain.json``, public) lists every link from
the first signing key to the current one; ``rotate`` adds a link.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import crypto, envelope

ADMIN_TOKEN_FILE = "admin-token"  # noqa: S105 (a file name, not a secret)
#: Opens /metrics and nothing else: the token a Prometheus scraper is given.
METRICS_TOKEN_FILE = "metrics-token"  # noqa: S105 (a file name, not a secret)
SIGNING_KEY_FILE = "signing-key.pem"
SIGNAL_KEY_FILE = "signal-key"
DATA_KEY_FILE = "data-key"
CHAIN_FILE = "key-chain.json"


@dataclass(frozen=True)
class Keys:
    admin_token: str
    signing_key: Ed25519PrivateKey
    signal_key: bytes
    #: Encrypts secret values at rest in the database (AES-256-GCM).
    data_key: bytes = b""
    #: Rotation links from the first signing key to the current one.
    chain: tuple[envelope.Link, ...] = ()
    #: Opens /metrics only (``<data dir>/metrics-token``); empty: the admin token alone does.
    metrics_token: str = ""

    @property
    def key_id(self) -> str:
        return envelope.key_id(envelope.public_raw(self.signing_key.public_key()))

    @property
    def public_key_b64(self) -> str:
        raw = self.signing_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return base64.b64encode(raw).decode()

    @property
    def adopt_private(self) -> bytes:
        """The X25519 key abandon data handed to this control plane is sealed to (`stack abandon --to`).

        Derived from the data key, so it needs no file of its own and changes only with it.
        """
        return crypto.hkdf_sha256(self.data_key, b"", b"anneal-adopt-key-v1", 32)

    @property
    def adopt_public_b64(self) -> str:
        return base64.b64encode(crypto.x25519_public(self.adopt_private)).decode()

    def signal_signature(self, deployment_id: str, generation: int) -> str:
        """The capability that lets a URL holder signal exactly one deployment generation."""
        msg = f"signal:{deployment_id}:{generation}".encode()
        return hmac.new(self.signal_key, msg, hashlib.sha256).hexdigest()

    def check_signal_signature(self, deployment_id: str, generation: int, sig: str) -> bool:
        """A signature is hex: any other text (non-ASCII too) is simply wrong, never an error."""
        expected = self.signal_signature(deployment_id, generation).encode()
        return sig.isascii() and hmac.compare_digest(expected, sig.encode())

    def capability(self, purpose: str, subject: str) -> str:
        """An HMAC binding one *purpose* to one *subject*: a credential that opens nothing else."""
        msg = f"{purpose}:{subject}".encode()
        return hmac.new(self.signal_key, msg, hashlib.sha256).hexdigest()

    def check_capability(self, purpose: str, subject: str, given: str) -> bool:
        """Whether *given* is the capability of *purpose* on *subject*; any non-ASCII text is not."""
        return given.isascii() and hmac.compare_digest(
            self.capability(purpose, subject).encode(), given.encode()
        )


def load_or_create(data_dir: Path) -> Keys:
    """Read the data dir's secrets, creating any that are missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    admin = _read_or_write(data_dir / ADMIN_TOKEN_FILE, lambda: new_token().encode())
    metrics = _read_or_write(data_dir / METRICS_TOKEN_FILE, lambda: new_token().encode())
    signal = _read_or_write(data_dir / SIGNAL_KEY_FILE, lambda: secrets.token_hex(32).encode())
    data = _read_or_write(data_dir / DATA_KEY_FILE, lambda: secrets.token_hex(32).encode())
    _read_or_write(data_dir / SIGNING_KEY_FILE, _new_signing_key)
    key = _signing_key(data_dir)
    return Keys(
        admin.decode().strip(),
        key,
        bytes.fromhex(signal.decode().strip()),
        bytes.fromhex(data.decode().strip()),
        _read_chain(data_dir / CHAIN_FILE),
        metrics.decode().strip(),
    )


def _signing_key(data_dir: Path) -> Ed25519PrivateKey:
    pem = (data_dir / SIGNING_KEY_FILE).read_bytes()
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{data_dir / SIGNING_KEY_FILE}: not an Ed25519 private key")
    return key


def _read_chain(path: Path) -> tuple[envelope.Link, ...]:
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return ()
    except ValueError as e:
        raise ValueError(f"{path}: not JSON: {e}") from e
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of chain links")
    try:
        return tuple(envelope.decode_link(x, f"{path}[{i}]") for i, x in enumerate(raw))
    except envelope.EnvelopeError as e:
        raise ValueError(str(e)) from e


def stamp(data_dir: Path) -> tuple[int, ...]:
    """What changes when the signing key is rotated: both key files' inodes and mtimes."""
    out: list[int] = []
    for name in (CHAIN_FILE, SIGNING_KEY_FILE):
        try:
            st = (data_dir / name).stat()
        except FileNotFoundError:
            out += [0, 0]
            continue
        out += [st.st_ino, st.st_mtime_ns]
    return tuple(out)


def rotated_elsewhere(data_dir: Path, keys: Keys) -> Keys | None:
    """*keys* with the data dir's newer signing key, if another process rotated it; else None.

    Several processes share one data dir (docs/operations.md). The new key is taken only
    when the chain on disk extends this process's chain, its new links are signed from
    this process's key on, and it ends at the key in the key file: a reader between the
    rotation's two renames sees a chain whose last link names a key not yet in place, and
    waits for the next look.
    """
    chain = _read_chain(data_dir / CHAIN_FILE)
    if len(chain) <= len(keys.chain) or chain[: len(keys.chain)] != keys.chain:
        return None
    try:  # every new link signed from our key on: a copied-in chain of another plane is not ours
        envelope.follow_chain(envelope.public_raw(keys.signing_key.public_key()), chain, chain[-1].key_id)
    except envelope.EnvelopeError:
        return None
    key = _signing_key(data_dir)
    if envelope.key_id(envelope.public_raw(key.public_key())) != chain[-1].key_id:
        return None
    return replace(keys, signing_key=key, chain=chain)


def rotate(data_dir: Path, keys: Keys, now: float) -> Keys:
    """A new signing key, linked from the current one; the old private key is destroyed.

    Both files are written whole (and synced) beside their places before either replaces
    its old self: a full disk fails the rotation with nothing changed. A crash between the
    two renames leaves the old key in use with one unused link, which a later rotation
    simply extends past.
    """
    new = Ed25519PrivateKey.generate()
    link = envelope.make_link(keys.signing_key, envelope.public_raw(new.public_key()), envelope.iso(now))
    chain = (*keys.chain, link)
    pem = new.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    chain_tmp = _write_tmp(data_dir / CHAIN_FILE, json.dumps([x.to_json() for x in chain], indent=2).encode())
    try:
        key_tmp = _write_tmp(data_dir / SIGNING_KEY_FILE, pem)
    except BaseException:
        chain_tmp.unlink(missing_ok=True)
        raise
    os.replace(chain_tmp, data_dir / CHAIN_FILE)
    os.replace(key_tmp, data_dir / SIGNING_KEY_FILE)
    return replace(keys, signing_key=new, chain=chain)


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
    _write_private(path, data)
    return data


def _write_private(path: Path, data: bytes) -> None:
    os.replace(_write_tmp(path, data), path)


def _write_tmp(path: Path, data: bytes) -> Path:
    """*data* in a synced 0600 file beside *path*; removed again if it cannot be written whole."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def token_hash(token: str) -> str:
    """Tokens are stored only as their SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """256 random bits, URL-safe. Never starts with '-': a token pasted after `--token`
    must not read as an option to argparse (or any other command line)."""
    return "t" + secrets.token_urlsafe(32)
