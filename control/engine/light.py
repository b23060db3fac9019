"""Light records: what a big step holds of each resource it does not act on.

A step over a million resources holds one for each of them (``Slices``), so a record is small:
no ORM object, no properties, its attributes kept as stored text until read, and equal values
(types, statuses, dependency lists) shared between records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, cast, select
from sqlalchemy.ext.asyncio import AsyncSession

from control.store import crypt
from control.store.orm import ResourceRow


@dataclass(slots=True)
class Light:
    """A resource as a big step holds it while it does not act on it: no ORM object, no properties.

    A full row with its instance state and decrypted properties is about 4 KB of
    Python objects; this is a fifth of that. It carries what the walk (``done``),
    the expressions of dependent resources (``StackContext``: ``physical_id``,
    ``attributes``) and the cleanup's ordering (``requires``) read. Its attributes
    stay the column's stored text until something reads them (``opener`` set): a
    server's decrypted attributes are tens of objects, and a step over a million
    resources reads a few of them.
    """

    id: int
    name: str
    type: str
    status: str
    traversal: int
    current: bool
    physical_id: str | None
    requires: list[Any]
    #: The attributes, or while ``opener`` is set their stored text.
    stored: Any
    opener: Callable[[str | None], Any] | None = None

    @property
    def attributes(self) -> Mapping[str, Any]:
        if self.opener is not None:
            self.stored, self.opener = self.opener(self.stored), None
        return self.stored  # type: ignore[no-any-return]

    @attributes.setter
    def attributes(self, value: Mapping[str, Any]) -> None:
        self.stored, self.opener = value, None

    @classmethod
    def of(cls, row: ResourceRow) -> Light:
        return cls(
            row.id,
            row.name,
            row.type,
            row.status,
            row.traversal,
            row.current,
            row.physical_id,
            row.requires,
            row.attributes,
        )


_LIGHT_COLUMNS = [
    *(getattr(ResourceRow, f) for f in Light.__dataclass_fields__ if f not in ("stored", "opener")),
    cast(ResourceRow.attributes, Text),
]


#: A row of ``_LIGHT_COLUMNS``.
_LightRow = tuple[int, str, str, str, int, bool, str | None, list[Any], str | None]


async def lights(session: AsyncSession, *where: Any) -> list[Light]:
    """Light records of the resources matching *where*, their attributes opened when read.

    Equal types, statuses and dependency lists are one object each: a million records hold a
    few distinct ones, and each row decodes its own copy (0.4 KB a record)."""
    opener = functools.partial(crypt.from_text, session.get_bind().dialect)
    rows: Iterable[_LightRow] = await session.execute(select(*_LIGHT_COLUMNS).where(*where))
    same: dict[Any, Any] = {}
    return [
        Light(
            rid,
            name,
            same.setdefault(rtype, rtype),
            same.setdefault(status, status),
            traversal,
            current,
            physical_id,
            same.setdefault(tuple(requires), requires) if requires else requires,
            stored,
            opener,
        )
        for rid, name, rtype, status, traversal, current, physical_id, requires, stored in rows
    ]


#: What a step holds of a resource: its full row, or a light record of it.
Row = ResourceRow | Light


def done(row: Row | None, traversal: int) -> bool:
    """True when *row* is complete in *traversal*."""
    return row is not None and row.status == "COMPLETE" and row.traversal == traversal
