"""Resources with ``external_id`` (control/hot/external.py): adopted, never updated, never deleted.

The engine asks ``unchanged`` before updating a resource: an adopted one stays as it is,
and a changed (added, removed, other) ``external_id`` fails the update as Heat's does.
"""

from __future__ import annotations

from typing import Any

from control import hot
from control.hot.external import KEPT
from control.resources.base import Res
from control.store.orm import ResourceRow


def checked_id(value: Any, path: str) -> str | None:
    """The resource's external_id as evaluated (the engine evaluates it: it may call yaql), checked."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise hot.TemplateError(path, f"expected the id of the existing resource, got {value!r}")
    return value


def unchanged(res: Res, row: ResourceRow) -> bool:
    """True for an adopted resource whose external_id stays; raises when the update changes it."""
    before = (row.attributes or {}).get(KEPT)
    if before != res.external_id and row.status != "FAILED":
        raise hot.TemplateError(
            f"{res.where}.external_id",
            f"Update to property external_id of {res.name} ({res.type}) is not supported "
            f"({before or 'none'} -> {res.external_id or 'none'}), as in Heat",
        )
    return before is not None and before == res.external_id


def keep(res: Res, row: ResourceRow) -> None:
    """Record on the created row which external_id it was adopted by."""
    if res.external_id is not None and row.status != "FAILED":
        row.attributes = {**(row.attributes or {}), KEPT: res.external_id}
