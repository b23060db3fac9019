"""The schema check at start-up reads the revision chain from the files' text (control/store/schema.py)."""

from __future__ import annotations

import subprocess
import sys

from alembic.script import ScriptDirectory

from control.store import schema


def test_the_chain_read_from_the_files_is_alembics() -> None:
    """Every revision, its parent and the head are what Alembic itself reads from the same files."""
    script = ScriptDirectory.from_config(schema.alembic_config())
    alembic_chain = {r.revision: r.down_revision for r in script.walk_revisions()}
    assert alembic_chain == schema.chain()
    assert script.get_current_head() == schema.head()


def test_serving_imports_no_alembic_and_no_boto3() -> None:
    """`anneal serve`'s modules leave Alembic and boto3 (20 MiB together) out until they are needed."""
    probe = "import sys, control.cli.serve; print(sorted({'alembic', 'boto3'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert "[]" == out.stdout.strip(), out.stdout + out.stderr
