"""Document verification: what makes the agent accept a document.

Today: the document must parse, be addressed to this server, and carry a
serial no lower than the highest the agent accepted (kept in the ledger, so
also after restarts). Signature and expiry checks plug in here as further
``Verifier``s.
"""

from __future__ import annotations

from typing import Protocol

from agent import wire
from agent.errors import DocumentRejectedError


class Verifier(Protocol):
    def verify(self, doc: wire.Document, raw: bytes) -> None:
        """Raise DocumentRejectedError when *doc* must not be applied."""


class AddressCheck:
    """The document names this server."""

    def __init__(self, server_id: str) -> None:
        self._server_id = server_id

    def verify(self, doc: wire.Document, raw: bytes) -> None:
        if doc.server_id and doc.server_id != self._server_id:
            raise DocumentRejectedError(f"document is for server {doc.server_id}, this is {self._server_id}")


class SerialCheck:
    """Rollback protection: never accept a serial lower than one already accepted."""

    def __init__(self, highest: int) -> None:
        self.highest = highest

    def verify(self, doc: wire.Document, raw: bytes) -> None:
        if doc.serial < self.highest:
            raise DocumentRejectedError(
                f"document serial {doc.serial} is older than {self.highest}, already accepted"
            )


def decode_and_verify(raw: bytes, verifiers: list[Verifier]) -> wire.Document:
    try:
        doc = wire.decode_document(raw)
    except wire.WireError as e:
        raise DocumentRejectedError(f"malformed document: {e}") from e
    for verifier in verifiers:
        verifier.verify(doc, raw)
    return doc
