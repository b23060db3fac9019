"""The run-once journal in the state dir (SQLite, synchronous=FULL).

Each deployment generation (a document item id) moves through
received -> started -> finished -> signalled. A generation found in the
ledger never runs again; one found started but not finished was
interrupted. The outbox holds every signal until the receiver acknowledges it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import wire
from agent.errors import ConfigError

LEDGER_FILE = "ledger.sqlite"
#: Rejected documents remembered with their reason (all are counted).
MAX_REJECTIONS = 10
#: The ledger's schema, one step per version (SQLite's ``PRAGMA user_version``): step N
#: brings a ledger from version N-1 to N, in one transaction with the version bump. Add a
#: step for every change; never edit one that was released (ledgers on servers are at it).
#: Release 36f815b's ledgers are at version 0 with step 1's tables already made.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE IF NOT EXISTS generations (
            item_id TEXT PRIMARY KEY,
            deployment_id TEXT NOT NULL DEFAULT '',
            generation INTEGER NOT NULL DEFAULT 0,
            name TEXT NOT NULL DEFAULT '',
            hash TEXT NOT NULL DEFAULT '',
            action TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL,
            received_at REAL, started_at REAL, finished_at REAL, signalled_at REAL,
            status_code INTEGER,
            note TEXT NOT NULL DEFAULT ''
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            item_id TEXT NOT NULL,
            url TEXT NOT NULL,
            verb TEXT NOT NULL,
            body BLOB NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            done_at REAL,
            outcome TEXT NOT NULL DEFAULT ''
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)
        """,
    ),
)


@dataclass(frozen=True)
class Entry:
    item_id: str
    deployment_id: str
    generation: int
    name: str
    hash: str
    action: str
    state: str
    status_code: int | None
    note: str


@dataclass(frozen=True)
class Outgoing:
    id: int
    item_id: str
    url: str
    verb: str
    body: bytes
    attempts: int


class Ledger:
    """One SQLite file; every write is its own committed transaction."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LEDGER_FILE
        #: Called after each commit (agent/diskfull.py: a write went through, the disk has room).
        self.on_commit: Callable[[], None] | None = None
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        # A small page cache: the agent reads its document back when it needs it, and keeps no copy.
        self._db.execute("PRAGMA cache_size=-256")
        self._upgrade()

    def close(self) -> None:
        self._db.close()

    def _upgrade(self) -> None:
        """Bring the ledger to the newest version; refuse one a newer agent wrote (ConfigError)."""
        if self._version() == len(MIGRATIONS):
            return
        with self._tx() as db:
            found = self._version()  # again, under the write lock: another process may have upgraded it
            if found > len(MIGRATIONS):
                raise ConfigError(
                    f"{self.path}: ledger version {found} was written by a newer agent "
                    f"(this one knows up to {len(MIGRATIONS)}): run that agent's version"
                )
            for step in MIGRATIONS[found:]:
                for statement in step:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")

    def _version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")  # where a full disk shows, in WAL mode
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled back already (SQLITE_FULL)
                self._db.execute("ROLLBACK")
            raise
        if self.on_commit is not None:
            self.on_commit()

    # -------------------------------------------------------------- state

    def get_state(self, key: str, default: str | None = None) -> str | None:
        row = self._db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_state(self, key: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", (key, value))

    def accept_document(
        self, serial: int, body: bytes, items: list[dict[str, Any]], state: dict[str, str] | None = None
    ) -> None:
        """Keep the document, its serial and *state*, and mark its new generations received, at once."""
        now = time.time()
        with self._tx() as db:
            for key, value in (state or {}).items():
                db.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", (key, value))
            db.execute("INSERT OR REPLACE INTO state VALUES ('serial', ?)", (str(serial),))
            db.execute("INSERT OR REPLACE INTO state VALUES ('document', ?)", (body.decode(),))
            db.execute("INSERT OR REPLACE INTO state VALUES ('document_at', ?)", (f"{now:.3f}",))
            for item in items:
                db.execute(
                    "INSERT OR IGNORE INTO generations (item_id, deployment_id, generation, name, hash,"
                    " action, state, received_at) VALUES (?, ?, ?, ?, ?, ?, 'received', ?)",
                    (
                        item["item_id"],
                        item["deployment_id"],
                        item["generation"],
                        item["name"],
                        item["hash"],
                        item["action"],
                        now,
                    ),
                )

    # -------------------------------------------------------------- generations

    def entry(self, item_id: str) -> Entry | None:
        row = self._db.execute(
            "SELECT item_id, deployment_id, generation, name, hash, action, state, status_code, note"
            " FROM generations WHERE item_id = ?",
            (item_id,),
        ).fetchone()
        return Entry(*row) if row else None

    def entries(self) -> list[Entry]:
        rows = self._db.execute(
            "SELECT item_id, deployment_id, generation, name, hash, action, state, status_code, note"
            " FROM generations ORDER BY received_at, name"
        ).fetchall()
        return [Entry(*r) for r in rows]

    def mark_started(self, item_id: str) -> None:
        """Written before the hook runs: a crash after this point is never a silent re-run."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO generations (item_id, state, received_at, started_at)"
                " VALUES (?, 'started', ?, ?) ON CONFLICT(item_id) DO UPDATE SET"
                " state = 'started', started_at = excluded.started_at",
                (item_id, time.time(), time.time()),
            )

    def mark_finished(self, item_id: str, status_code: int, signal: Outgoing | None, note: str = "") -> None:
        """Record the result and queue its signal in one transaction."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE generations SET state = ?, finished_at = ?, status_code = ?, note = ?"
                " WHERE item_id = ?",
                ("finished" if signal else "signalled", now, status_code, note, item_id),
            )
            if signal is not None:
                db.execute(
                    "INSERT INTO outbox (item_id, url, verb, body, created_at) VALUES (?, ?, ?, ?, ?)",
                    (item_id, signal.url, signal.verb, signal.body, now),
                )

    def mark_received(self, item_id: str, note: str) -> None:
        """Back to received: an interrupted generation whose config allows a re-run."""
        with self._tx() as db:
            db.execute(
                "UPDATE generations SET state = 'received', started_at = NULL, note = ? WHERE item_id = ?",
                (note, item_id),
            )

    def interrupted(self) -> list[Entry]:
        return [e for e in self.entries() if e.state == "started"]

    # -------------------------------------------------------------- outbox

    def due(self, now: float) -> list[Outgoing]:
        rows = self._db.execute(
            "SELECT id, item_id, url, verb, body, attempts FROM outbox"
            " WHERE done_at IS NULL AND next_at <= ? ORDER BY id",
            (now,),
        ).fetchall()
        return [Outgoing(*r) for r in rows]

    def pending(self) -> list[dict[str, Any]]:
        """Signals not yet acknowledged, oldest first, for `anneal-agent status`."""
        rows = self._db.execute(
            "SELECT id, item_id, verb, url, attempts, next_at, created_at, outcome FROM outbox"
            " WHERE done_at IS NULL ORDER BY id"
        ).fetchall()
        keys = ("id", "item_id", "verb", "url", "attempts", "next_at", "created_at", "last_outcome")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def pending_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox WHERE done_at IS NULL").fetchone()[0])

    def next_due(self) -> float | None:
        row = self._db.execute("SELECT MIN(next_at) FROM outbox WHERE done_at IS NULL").fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def delivered(self, out: Outgoing, outcome: str) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE outbox SET done_at = ?, outcome = ?, attempts = attempts + 1 WHERE id = ?",
                (now, outcome, out.id),
            )
            db.execute(
                "UPDATE generations SET state = 'signalled', signalled_at = ? WHERE item_id = ?",
                (now, out.item_id),
            )

    def retry_later(self, out: Outgoing, delay: float, error: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_at = ?, outcome = ? WHERE id = ?",
                (time.time() + delay, error[:500], out.id),
            )

    def note_rejection(self, kind: str, reason: str, now: float) -> None:
        """Count a refused document by kind and keep the last few reasons."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM state WHERE key = 'rejections'").fetchone()
            seen: dict[str, Any] = json.loads(row[0]) if row else {"counts": {}, "last": []}
            seen["counts"][kind] = seen["counts"].get(kind, 0) + 1
            seen["last"] = [*seen["last"], {"at": now, "kind": kind, "reason": reason[:500]}][
                -MAX_REJECTIONS:
            ]
            db.execute(
                "INSERT OR REPLACE INTO state (key, value) VALUES ('rejections', ?)", (json.dumps(seen),)
            )

    def rejections(self) -> dict[str, Any]:
        raw = self.get_state("rejections")
        return json.loads(raw) if raw else {"counts": {}, "last": []}

    def summary(self) -> dict[str, Any]:
        counts = dict(self._db.execute("SELECT state, COUNT(*) FROM generations GROUP BY state").fetchall())
        return {
            "serial": int(self.get_state("serial", "0") or 0),
            "generations": counts,
            "queued": self.pending_count(),
            "rejections": self.rejections(),
        }


def encode_body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def ledger_items(doc: wire.Document) -> list[dict[str, Any]]:
    """The rows ``accept_document`` keeps for *doc*'s deployments."""
    rows = []
    for item in doc.deployments:
        meta = doc.meta.get(item.id)
        rows.append(
            {
                "item_id": item.id,
                "deployment_id": meta.deployment_id if meta else "",
                "generation": meta.generation if meta else 0,
                "name": item.name,
                "hash": meta.hash if meta else "",
                "action": meta.action if meta else str(item.input_value("deploy_action") or ""),
            }
        )
    return rows
