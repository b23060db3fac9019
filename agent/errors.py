"""Errors of the agent.

AgentError
  +-- ConfigError            the state dir or the command line is unusable
  +-- EnrolError             the control plane refused the enrolment
  +-- SourceNotAvailableError  the document source did not answer (retried)
  |     +-- SourceExpiredError   a store refused its URL (expired): ask the control plane
  +-- DocumentRejectedError  a document failed verification (kept out, reported)
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


class DocumentRejectedError(AgentError):
    """``kind``: malformed, address, rollback, unsigned, signature, expired."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind
