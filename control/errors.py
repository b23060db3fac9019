"""Errors of the control plane, and what the API answers for each.

ControlError                     base of the domain errors; ``status`` and ``code`` are the answer
  +-- BadRequestError            a request body or query is malformed (400 bad_request)
  |     +-- TooLargeError        over a documented size cap (413 too_large)
  |     +-- LengthRequiredError  an unauthenticated body without Content-Length (411 length_required)
  |     +-- TooSlowError         a body that did not arrive within --body-timeout (408 too_slow)
  +-- AuthError                  no or wrong credential (401 unauthorized)
  +-- ForbiddenError             a valid credential used outside its scope (403 forbidden)
  +-- NotFoundError              no such stack, server, deployment (404 not_found)
  +-- ConflictError              the request conflicts with the current state (409 conflict)
  |     +-- StaleSignalError     a signal for a generation that is no longer current (409 stale_signal)
  +-- GoneError                  the thing a credential was for no longer exists (410 gone)
  +-- UnavailableError           retry later: too busy (503 unavailable)
        +-- DiskFullError        a disk the control plane writes to is full, named in ``where`` (503 disk_full)

Raised by control outside that tree, each caught at its own boundary:

  control.hot.errors.TemplateError (Exception)
      a template, environment or parameter is invalid: 400 invalid_template, ``where`` its path
  control.transports.store.StoreError (Exception)
      an object store is unreachable or refused: the transports retry; never reaches the API
  control.store.work.LeaseLostError (RuntimeError)
      another process holds a stack's work: the engine drops the step, uncommitted
  control.store.schema.SchemaError (RuntimeError)
      the database was made by another version: `anneal serve` prints it and exits 2
  control.store.crypt.DataKeyError (RuntimeError)
      a stored secret does not open with this data dir's key: 500 internal, logged
  control.cli.client.ClientError (Exception)
      an operator command failed (the CLI's side): `anneal` prints it and exits 1

The API's ``errors`` middleware (control/api) answers every failure with
``{"error": {"code", "message", "where"}}``:

  ControlError                          its status and code
  hot.TemplateError                     400 invalid_template
  a body over the request cap           413 too_large
  IntegrityError (a concurrent write)   409 conflict
  OperationalError, StaleDataError, a PostgreSQL deadlock (store.db.raced)  503 unavailable, ``Retry-After: 5``
  the same, or OSError, for a full disk 503 disk_full naming the database or the file (control/api/diskfull.py)
  aiohttp's HTTPException (>= 400)      its status, code ``http``, ``where`` the path (unknown route...)
  anything else                         500 internal: a bug, logged with its traceback
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


class LengthRequiredError(BadRequestError):
    status = 411
    code = "length_required"


class TooSlowError(BadRequestError):
    status = 408
    code = "too_slow"


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


class UnavailableError(ControlError):
    status = 503
    code = "unavailable"


class DiskFullError(UnavailableError):
    code = "disk_full"
