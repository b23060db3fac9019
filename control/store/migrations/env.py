"""Alembic's entry point for this project's revisions (run by Alembic, never imported).

`control/store/schema.py` runs it: online with the connection it opened and holds in a
transaction (``config.attributes["connection"]``), or offline for `anneal db upgrade
--dry-run` with only a dialect name (``config.attributes["dialect"]``), printing the SQL.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy.types import TypeDecorator

from control.store import workrow  # noqa: F401 (registers the work table)
from control.store.orm import Base

config = context.config


def _render_item(kind: str, obj: Any, _autogen: Any) -> str | Literal[False]:
    """A draft names the stored type: an EncryptedJSON column is JSON in the database."""
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl_instance!r}"
    return False


# SQLite alters tables by copying them ("batch" operations); the whole upgrade is one
# transaction on both databases, so the printed SQL says BEGIN and COMMIT as well.
options: dict[str, Any] = {
    "target_metadata": Base.metadata,
    "render_as_batch": True,
    "transactional_ddl": True,
    "render_item": _render_item,
}

if context.is_offline_mode():
    context.configure(dialect_name=config.attributes["dialect"], literal_binds=True, **options)
else:
    context.configure(connection=config.attributes["connection"], compare_type=True, **options)
with context.begin_transaction():
    context.run_migrations()
