"""A throw-away PostgreSQL cluster for tests: initdb + pg_ctl in a temp dir, loopback, a free port.

Runs the server binaries `ci/tools.d/30-postgresql.sh` makes sure of (`make tools`);
as root, initdb and the server run as the `postgres` user (initdb refuses root).
Stopped by the postmaster's PID at the end; the temp dir is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import free_port


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        raise AssertionError(
            "PostgreSQL server binaries missing: run `make tools` (ci/tools.d/30-postgresql.sh)"
        )
    return Path(found[-1]).parent


@dataclass
class Postgres:
    port: int
    root: Path
    pid: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh empty database; its plain SQLAlchemy URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"

        async def create() -> None:
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(
                host="127.0.0.1", port=self.port, user="postgres", database="postgres"
            )
            try:
                await conn.execute(f'CREATE DATABASE "{name}"')
            finally:
                await conn.close()

        asyncio.run(create())
        return self.url(name)

    def dump(self, url: str) -> bytes:
        """`pg_dump` of the database *url* names (as `new_database` gave it): every row, as SQL text."""
        done = subprocess.run(
            [
                str(_bin_dir() / "pg_dump"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                url.rsplit("/", 1)[1],
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert 0 == done.returncode, done.stderr.decode("utf-8", "replace")
        return done.stdout


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    bins = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="anneal-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres([str(bins / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]),
        check=True,
        capture_output=True,
        timeout=120,
    )
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
    subprocess.run(
        _as_postgres(
            [str(bins / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    pid = int((data / "postmaster.pid").read_text().split()[0])
    try:
        yield Postgres(port, root, pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)  # "fast" shutdown
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
