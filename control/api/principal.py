"""The one place a token becomes a Principal: the operator's API, Heat's API and the web view ask here.

Order: the data dir's admin token, then Anneal's stored tokens (added by
``anneal token create``), then the external validator, if one is plugged in.

To plug in a validator, set ``Runtime.validator`` to an async callable
``token -> Principal | None`` before the first request, in the application's lifetime
right after the Runtime is made, as ``--keystone-url`` does (``control/services/keystone.py``'s
``plugged``, a cleanup context of ``control/api/app.py``)::

    runtime.validator = keystone.principal

It is called only for a token Anneal does not know; it returns the caller's project, role
(``admin``, ``member`` or ``reader``) and a name for the audit log, or None to refuse
the token (a 401). It must bound its own time (a timeout on its calls) and may cache.
"""

from __future__ import annotations

import hmac

from control.principal import ADMIN, Principal
from control.runtime import Runtime
from control.services import tokens


async def resolve(rt: Runtime, token: str | None) -> Principal | None:
    """The Principal *token* stands for, or None when nothing knows it."""
    if not token:
        return None
    if hmac.compare_digest(token.encode(), rt.keys.admin_token.encode()):
        return ADMIN
    stored = await tokens.principal_of(rt, token)
    if stored is not None:
        return stored
    if rt.validator is not None:
        return await rt.validator(token)
    return None
