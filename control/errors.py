"""Errors of the control plane.

ControlError
  +-- BadRequestError        a request body or query is malformed (400)
  |     +-- TooLargeError    over a documented size cap (413)
  +-- AuthError              no or wrong credential (401)
  +-- ForbiddenError         a valid credential used outside its scope (403)
  +-- NotFoundError          no such stack, server, deployment (404)
  +-- ConflictError          the request conflicts with the current state (409)
  +-- StaleSignalError       a signal for a generation that is no longer current (409)
  +-- GoneError              the thing a credential was for no longer exists (410)

Template problems are ``control.hot.TemplateError`` (400); the API middleware maps
both families to a JSON body ``{"error": {"code", "message", "where"}}``.
"""

from __future__ import annotations


class ControlError(Exception):
    """Base of every control-plane error; ``where`` names the field or resource."""

    status = 500
    code = "internal"

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where


class BadRequestError(ControlError):
    status = 400
    code = "bad_request"


class TooLargeError(BadRequestError):
    status = 413
    code = "too_large"


class AuthError(ControlError):
    status = 401
    code = "unauthorized"


class ForbiddenError(ControlError):
    status = 403
    code = "forbidden"


class NotFoundError(ControlError):
    status = 404
    code = "not_found"


class ConflictError(ControlError):
    status = 409
    code = "conflict"


class StaleSignalError(ConflictError):
    code = "stale_signal"


class GoneError(ControlError):
    status = 410
    code = "gone"
