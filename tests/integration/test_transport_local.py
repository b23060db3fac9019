"""LOCAL transport: documents written as files, carried to the server's media; signals carried back.

The test plays the courier: it copies the control plane's document file onto the agent's
"media" directory and imports the agent's signal outbox with `anneal signal import`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.integration.conftest import start_control_plane, stop_control_plane

pytestmark = pytest.mark.slow

TEMPLATE = """
heat_template_version: rocky
parameters:
  message: {type: string, default: one}
resources:
  box:
    type: OS::Heat::DeployedServer
    properties: {software_config_transport: LOCAL}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: MESSAGE}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        printf 'said %s' "$MESSAGE" > "$heat_outputs_path.said"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      input_values: {MESSAGE: {get_param: message}}
outputs:
  said: {value: {get_attr: [dep, said]}}
"""


def test_local_media_round_trip_and_signal_import(tmp_path: Path):
    published, media, outbox = tmp_path / "published", tmp_path / "media", tmp_path / "outbox"
    media.mkdir()
    cp = start_control_plane(
        tmp_path,
        f"--local-dir={published}",
        "--store-poll-interval=0.5",
        f"--agent-arg=--media-dir={media}",
        f"--agent-arg=--signal-dir={outbox}",
    )
    try:
        assert 201 == cp.create("lm", TEMPLATE).status
        deadline = time.monotonic() + 60
        while (resp := cp.api("GET", "/v1/servers/lm-box")).status == 404 and time.monotonic() < deadline:
            time.sleep(0.2)
        server = resp.body
        assert "LOCAL" == server["transport"]
        doc_file = published / server["id"] / "document.json"

        def courier(stack: str) -> dict:
            """Carry documents out and signals back until the stack settles (bounded)."""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if doc_file.exists():
                    shutil.copyfile(doc_file, media / "document.json")
                if outbox.exists() and any(outbox.iterdir()):
                    cp.cli("signal", "import", str(outbox))
                status = cp.api("GET", f"/v1/stacks/{stack}").body["status"]
                if not status.endswith("IN_PROGRESS"):
                    return dict(cp.api("GET", f"/v1/stacks/{stack}").body)
                time.sleep(0.3)
            raise AssertionError(f"stack {stack} did not settle; log {cp.log}")

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
