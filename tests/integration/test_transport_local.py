"""LOCAL transport: documents written as files, carried to the server's media; signals carried back.

The test plays the courier: it copies the control plane's document file onto the agent's
"media" directory and imports the agent's signal outbox with `anneal signal import`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.controlplane import start_control_plane, stop_control_plane
from tests.support.courier import Media
from tests.support.templates import said_stack
from tests.support.waiting import wait_until

TEMPLATE = said_stack("LOCAL")


def test_local_media_round_trip_and_signal_import(tmp_path: Path) -> None:
    """LOCAL media carry documents out and signals back; re-import is idempotent, bad files are named."""
    local = Media.under(tmp_path)
    outbox = local.outbox
    cp = start_control_plane(tmp_path, *local.serve_args())
    try:
        assert 201 == cp.create("lm", TEMPLATE).status
        wait_until(lambda: cp.api("GET", "/v1/servers/lm-box").status != 404, "the server lm-box")
        server = cp.api("GET", "/v1/servers/lm-box").body
        assert "LOCAL" == server["transport"]
        doc_file = local.document(server["id"])

        def courier(stack: str) -> dict[str, Any]:
            """Carry documents out and signals back until the stack settles (bounded)."""

            def settled() -> dict[str, Any] | None:
                local.carry(cp, server["id"])
                body = cp.api("GET", f"/v1/stacks/{stack}").body
                return None if body["status"].endswith("IN_PROGRESS") else dict(body)

            return wait_until(settled, f"stack {stack} did not settle; log {cp.log}", 120, interval=0.3)

        assert "CREATE_COMPLETE" == courier("lm")["status"]
        assert {"said": "said one"} == cp.outputs("lm")
        assert server["id"] == json.loads(doc_file.read_bytes())["anneal"]["server_id"]

        body = {"template": TEMPLATE, "parameters": {"message": "two"}}
        assert 202 == cp.api("PUT", "/v1/stacks/lm", body).status
        assert "UPDATE_COMPLETE" == courier("lm")["status"]
        assert {"said": "said two"} == cp.outputs("lm")

        # Importing the same directory again is idempotent; nothing is deleted.
        files = sorted(p.name for p in outbox.iterdir())
        assert len(files) == 2
        again = cp.cli("signal", "import", str(outbox), "-f", "json")
        assert 0 == again.returncode, again.stderr
        outcomes = sorted(
            (r["generation"], r["status"], r.get("duplicate")) for r in json.loads(again.stdout)
        )
        assert [(1, "STALE", None), (2, "COMPLETE", True)] == outcomes
        assert files == sorted(p.name for p in outbox.iterdir())

        # Bad files each get an error naming them; the good ones are still imported.
        (outbox / "notes.txt").write_text("hello")
        (outbox / "0f0f0f0f-0000-0000-0000-000000000000.1.json").write_text("{}")
        (outbox / "a.b.c.json").write_text("{")
        (outbox / f"{files[0].rsplit('.', 2)[0]}.9.json").write_text("{nope")
        mixed = cp.cli("signal", "import", str(outbox), "-f", "json")
        assert 1 == mixed.returncode
        assert "notes.txt: not a signal file" in mixed.stderr
        assert "0f0f0f0f-0000-0000-0000-000000000000.1.json" in mixed.stderr
        assert "not found" in mixed.stderr
        assert "a.b.c.json: not a signal file" in mixed.stderr
        assert ".9.json" in mixed.stderr and "not JSON" in mixed.stderr
        assert 2 == len(json.loads(mixed.stdout))
    finally:
        stop_control_plane(cp)
