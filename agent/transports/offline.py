"""Offline enrolment and signed signal files: a server that reaches nothing at all (LOCAL media).

The operator writes an enrolment bundle onto the media (`anneal server media NAME DIR`:
``DIR/enrol.json`` with the server id, the control plane's public key and a one-time
token). An agent started with ``--media-dir`` and no enrolment finds it, makes its key
pairs, pins the control plane's key and writes its enrolment request (its public keys,
the token, signed by its new Ed25519 key) into its signal outbox as
``enrol.<server id>.json``. `anneal signal import` carries it to the control plane,
which from then on seals secrets to the new box key.

Every signal the agent writes to media is wrapped in an envelope signed by the same
key, naming the server and the deployment generation, so a file carried back proves
which server wrote it, for what, and that nobody changed it on the way (docs/security.md).
The control plane checks both with the same message builders as here.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent import crypto, keys, wire
from agent.config import AgentConfig
from agent.errors import EnrolError
from agent.fsutil import write_atomic

log = logging.getLogger(__name__)
BUNDLE_FILE = "enrol.json"
BUNDLE_FORMAT = "anneal-media-enrolment-v1"
REQUEST_FORMAT = "anneal-enrol-request-v1"
SIGNAL_FORMAT = "anneal-signal-file-v1"
#: Bundle fields the agent needs, all strings.
BUNDLE_FIELDS = ("server_id", "name", "control_public_key", "enrol_token")


def request_file_name(server_id: str) -> str:
    return f"enrol.{server_id}.json"


def request_message(request: Mapping[str, Any]) -> bytes:
    """The bytes an enrolment request's signature covers: everything but the signature."""
    return (
        REQUEST_FORMAT.encode()
        + b"\n"
        + wire.canonical_json({k: v for k, v in request.items() if k != "signature"})
    )


def signal_message(server_id: str, name: str, signal: str) -> bytes:
    """The bytes a signal file's signature covers: server, ``<deployment>/<generation>``, the signal."""
    return f"{SIGNAL_FORMAT}\n{server_id}\n{name}\n".encode() + signal.encode()


def verify(public_key_b64: str, signature_b64: Any, message: bytes) -> bool:
    """True when *signature_b64* is a valid Ed25519 signature of *message* by the given raw public key."""
    try:
        key = base64.b64decode(public_key_b64, validate=True)
        return crypto.ed25519_verify(key, base64.b64decode(str(signature_b64), validate=True), message)
    except (binascii.Error, ValueError, TypeError):  # ValueError: CryptoError, a key of the wrong size
        return False


def _sign(state_dir: Path, message: bytes) -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - as in keys.ensure_keys
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: PLC0415

    path = state_dir / keys.KEY_DIR / "sign.pem"
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: not an Ed25519 private key")
    return base64.b64encode(key.sign(message)).decode()


def read_bundle(media_dir: Path) -> dict[str, Any] | None:
    """The enrolment bundle on the media, or None when there is none; a bad one is an EnrolError naming it."""
    path = media_dir / BUNDLE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EnrolError(f"{path}: {e.strerror or e}") from e
    try:
        bundle = json.loads(raw)
    except ValueError as e:
        raise EnrolError(f"{path}: not JSON: {e}") from e
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise EnrolError(f"{path}: not an enrolment bundle (format must be {BUNDLE_FORMAT!r})")
    for field in BUNDLE_FIELDS:
        if not isinstance(bundle.get(field), str) or not bundle[field]:
            raise EnrolError(f"{path}: {field} must be a non-empty string")
    section = bundle.get("transport")
    if not isinstance(section, dict) or section.get("kind") != "LOCAL":
        raise EnrolError(f"{path}: transport must be an object whose kind is LOCAL")
    return bundle


def enrol(state_dir: Path, bundle: dict[str, Any], media_dir: str, out_dir: Path) -> AgentConfig:
    """Make the keys, write the signed enrolment request to the outbox; the config to save."""
    publics = keys.ensure_keys(state_dir)
    request: dict[str, Any] = {
        "format": REQUEST_FORMAT,
        "server_id": bundle["server_id"],
        "enrol_token": bundle["enrol_token"],
        "public_keys": publics,
        "hostname": socket.gethostname(),
    }
    request["signature"] = _sign(state_dir, request_message(request))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / request_file_name(bundle["server_id"])
    write_atomic(path, json.dumps(request, indent=2, sort_keys=True).encode())
    log.info("offline enrolment: request written to %s; carry it back and run `anneal signal import`", path)
    # No URL at all: nothing is ever sent to the control plane, no credential exists.
    return AgentConfig(
        url="",
        server_id=bundle["server_id"],
        name=bundle["name"],
        credential="",
        document_url="",
        heartbeat_url="",
        control_public_key=bundle["control_public_key"],
        media_dir=media_dir,
        signal_dir=str(out_dir),
        extra={"enrolment": "offline"},
    )


def sign_signal(state_dir: Path, server_id: str, name: str, body: bytes) -> bytes:
    """A signal as written to media: the agent's signal JSON inside an envelope signed by its key."""
    text = body.decode()
    envelope = {
        "format": SIGNAL_FORMAT,
        "server_id": server_id,
        "name": name,
        "signal": text,
        "signature": _sign(state_dir, signal_message(server_id, name, text)),
    }
    return json.dumps(envelope, sort_keys=True).encode()
