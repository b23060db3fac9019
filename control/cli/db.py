"""`anneal db`: where the database's schema stands (`status`) and bringing it to the newest (`upgrade`).

Imported only when an `anneal db` command runs, as serve.py is: it opens the database itself.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path

from sqlalchemy import make_url
from sqlalchemy.exc import SQLAlchemyError

from control.settings import Settings
from control.store.schema import SchemaError, Version, status, upgrade


def db(args: argparse.Namespace) -> int:
    settings = Settings(data_dir=args.data_dir.resolve(), database_url=args.db)
    url = settings.db_url
    given = args.db or f"sqlite:///{settings.data_dir / 'anneal.db'}"
    shown = make_url(given).render_as_string(hide_password=True)
    database = make_url(url).database or ""
    if make_url(url).get_backend_name() == "sqlite" and not Path(database).exists():
        print(f"anneal db: no database at {database} (`anneal serve` creates a new one)", file=sys.stderr)
        return 2
    try:
        if args.command == "status":
            return _status(shown, asyncio.run(status(url)))
        found, sql = asyncio.run(upgrade(url, dry_run=args.dry_run))
    except SchemaError as e:
        print(f"anneal db: {e}", file=sys.stderr)
        return 2
    except (OSError, SQLAlchemyError) as e:
        print(f"anneal db: {shown}: {e}", file=sys.stderr)
        return 1
    if found.current == found.head:
        print(f"{shown}: at revision {found.head}, the newest: nothing to do")
    elif args.dry_run:
        print(f"-- {shown}: at revision {found.current}; the upgrade to {found.head} would run:")
        print(sql, end="")
    else:
        print(f"{shown}: was at revision {_name(found)}")
        for revision in found.pending:
            print(f"  applied {revision}")
        print(f"now at revision {found.head}, the newest")
    return 0


def _status(shown: str, found: Version) -> int:
    """Print where the database stands; exit 1 when it needs an upgrade."""
    print(f"{shown}: revision {_name(found)}; the newest is {found.head}")
    for revision in found.pending:
        print(f"  to apply: {revision}")
    return 0 if found.current in (None, found.head) else 1


def _name(found: Version) -> str:
    if found.current is None:
        return "none (an empty database)"
    return f"{found.current} (release 36f815b, before Alembic)" if found.legacy else found.current


def upgrade_command(args: argparse.Namespace) -> str:
    """The `anneal db upgrade` line for the database `anneal serve` was given (a password shown as ***)."""
    argv = ["anneal", "db", "upgrade", "--data-dir", str(args.data_dir.resolve())]
    if args.db:
        argv += ["--db", make_url(args.db).render_as_string(hide_password=True)]
    return shlex.join(argv)
