"""Errors of the agent: the ``AgentError`` tree, and where the outlying classes live.

The command line catches ``AgentError`` (one line, exit 2); the loop catches the source and
document errors and carries on. Classes defined elsewhere are marked with their module::

    AgentError                   base of the agent's own errors
    ├── ConfigError              the state dir or the command line is unusable
    ├── EnrolError               the control plane refused the enrolment
    ├── SourceNotAvailableError  the document source did not answer (retried)
    │   └── SourceExpiredError   a store refused its URL (expired): ask the control plane
    ├── DocumentRejectedError    a document failed verification (kept out, reported)
    └── DiskFullError            (agent.diskfull) the state dir is full and the command does not wait

    ValueError                   the protocol's errors, outside AgentError: the control plane
    │                            raises and catches them too
    ├── WireError                (agent.wire) a document or signal does not match the protocol;
    │                            the agent turns it into DocumentRejectedError
    ├── EnvelopeError            (agent.envelope) a signature, chain or expiry does not check out;
    │   │                        turned into DocumentRejectedError of the same ``kind``
    │   ├── UnsignedError        (agent.envelope) no signature at all
    │   └── ExpiredError         (agent.envelope) past its ``expires_at``
    ├── SealError                (agent.sealed) a sealed value does not open; the deployment
    │                            fails with the reason, or its signal is not sent
    └── CryptoError              a key, nonce or length of the wrong size, or an operation the
                                 crypto library refused (agent.crypto: a tag that does not match)
"""

from __future__ import annotations


class AgentError(Exception):
    """Base of the agent's errors."""


class ConfigError(AgentError):
    pass


class EnrolError(AgentError):
    pass


class SourceNotAvailableError(AgentError):
    pass


class SourceExpiredError(SourceNotAvailableError):
    pass


class CryptoError(ValueError):
    """Raised by ``agent.crypto`` and both its backends, so callers catch one class."""


class DocumentRejectedError(AgentError):
    """``kind``: malformed, address, rollback, unsigned, signature, expired."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind
