"""Document verification: what makes the agent accept a document.

A policy is a list of ``Verifier``s. The default policy (``signed``) checks
the control plane's signature against the key pinned at enrolment (following
a rotation chain), the expiry, the address and the serial (never lower than
the highest accepted, kept in the ledger so also after restarts and after the
cached copy expired). ``heat-compatible`` is for documents Heat itself writes
(unsigned): it must be configured explicitly and skips the signature.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Callable
from typing import Protocol

from agent import envelope, wire
from agent.errors import ConfigError, DocumentRejectedError

log = logging.getLogger(__name__)
POLICIES = ("signed", "heat-compatible")


class Verifier(Protocol):
    def verify(self, doc: wire.Document, raw: bytes) -> None:
        """Raise DocumentRejectedError when *doc* must not be applied."""


class AddressCheck:
    """The document names this server."""

    def __init__(self, server_id: str) -> None:
        self._server_id = server_id

    def verify(self, doc: wire.Document, raw: bytes) -> None:
        if doc.server_id and doc.server_id != self._server_id:
            raise DocumentRejectedError(
                f"document is for server {doc.server_id}, this is {self._server_id}", "address"
            )


class SerialCheck:
    """Rollback protection: never accept a serial lower than one already accepted under the same key.

    The floor belongs to the signing key (TUF's fast-forward recovery): a document
    signed by a newer key, reached through the chain from the pinned one, starts a
    new floor at its own serial. So a key holder who pushed the serial to 2^62 locks
    agents out only until the key is rotated; older keys are revoked by then, so
    their documents cannot come back in under the reset.
    """

    def __init__(self, highest: int, signature: SignatureCheck | None = None) -> None:
        self.highest = highest
        self._signature = signature

    def verify(self, doc: wire.Document, raw: bytes) -> None:
        check = self._signature
        if check is not None and check.signer != check.trusted:
            if doc.serial < self.highest:
                log.warning(
                    "serial floor %s reset to %s: the document is signed by a newer key %s",
                    self.highest,
                    doc.serial,
                    envelope.key_id(check.signer),
                )
            return
        if doc.serial < self.highest:
            raise DocumentRejectedError(
                f"document serial {doc.serial} is older than {self.highest}, already accepted", "rollback"
            )


class SignatureCheck:
    """The control plane signed these exact bytes, with the pinned key or one chained from it, and
    they have not expired. ``signer`` is the key of the last document that passed: once that
    document is accepted it becomes the pinned key (older keys are then refused)."""

    def __init__(self, trusted: bytes, clock: Callable[[], float] = time.time) -> None:
        self.trusted = trusted
        self.signer = trusted
        self._clock = clock

    def verify(self, doc: wire.Document, raw: bytes) -> None:
        try:
            self.signer = envelope.verify(raw, self.trusted, self._clock()).signer
        except envelope.EnvelopeError as e:
            raise DocumentRejectedError(f"document refused: {e}", e.kind) from e


def decode_key(text: str, where: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ConfigError(f"{where}: not base64") from e
    if len(raw) != 32:
        raise ConfigError(f"{where}: expected a 32-byte Ed25519 public key")
    return raw


def policy(
    name: str, server_id: str, pinned: str, highest: int, clock: Callable[[], float] = time.time
) -> tuple[list[Verifier], SerialCheck, SignatureCheck | None]:
    """The verifiers of policy *name*; the serial and signature checks are returned to be advanced."""
    if name == "heat-compatible":
        serial = SerialCheck(highest)
        return [AddressCheck(server_id), serial], serial, None
    if name != "signed":
        raise ConfigError(f"document_policy: {name!r} is not one of {', '.join(POLICIES)}")
    if not pinned:
        raise ConfigError("document_policy signed needs the control plane's public key (enrol again)")
    signature = SignatureCheck(decode_key(pinned, "control_public_key"), clock)
    serial = SerialCheck(highest, signature)  # after the signature check: it needs the signer
    return [signature, AddressCheck(server_id), serial], serial, signature


def decode_and_verify(raw: bytes, verifiers: list[Verifier]) -> wire.Document:
    try:
        doc = wire.decode_document(raw)
    except wire.WireError as e:
        raise DocumentRejectedError(f"malformed document: {e}", "malformed") from e
    for verifier in verifiers:
        verifier.verify(doc, raw)
    return doc


def expired(doc: wire.Document, now: float) -> bool:
    """True when *doc* carries an expiry and it has passed (Heat's documents carry none)."""
    if not doc.expires_at:
        return False
    try:
        return envelope.parse_time(doc.expires_at, "expires_at") <= now
    except envelope.EnvelopeError:
        return True
