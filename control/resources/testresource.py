"""OS::Heat::TestResource: Heat's own test type, so templates and API tests written for Heat run here."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from control.resources.base import REPLACE, Outcome, Res, done
from control.store.orm import ResourceRow
from control.txn import Txn


def _outcome(res: Res, physical_id: str, props: Mapping[str, Any], action: str) -> Outcome:
    """COMPLETE with `output` the `value` property, or FAILED when `fail` is set (Heat's test of failure)."""
    if props.get("fail"):
        return Outcome("FAILED", physical_id, {}, f"Test Resource failed {res.name} ({action})")
    return done(physical_id, output=props.get("value", "test_string"))


class TestResource:
    """Its `output` attribute is its `value`; `fail` fails the action; `update_replace` makes an update replace it."""

    __test__ = False  # pytest: a resource type, not a test class

    async def create(self, txn: Txn, res: Res, props: Mapping[str, Any]) -> Outcome:
        return _outcome(res, str(uuid.uuid4()), props, "CREATE")

    async def update(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> Outcome:
        if await self.replacement(txn, res, row, props) is not None:
            return REPLACE
        return _outcome(res, row.physical_id or str(uuid.uuid4()), props, "UPDATE")

    async def replacement(self, txn: Txn, res: Res, row: ResourceRow, props: Mapping[str, Any]) -> str | None:
        return "update_replace is set" if props.get("update_replace") else None

    async def delete(self, txn: Txn, res: Res, row: ResourceRow) -> Outcome:
        return done()
