"""Our agent on Heat's POLL_TEMP_URL + TEMP_URL_SIGNAL documents, against a real Swift.

Swift (tests/support/swift.py, installed by ci/tools.d/40-swift.sh) holds what heat-engine
would put there: the server's document behind a GET TempURL (os-collect-config's `request`
collector) and an empty signal object per deployment behind a PUT TempURL, signed with the
account's Temp-URL-Key exactly as Heat's swift client signs them (HMAC-SHA256 over
"METHOD\\nexpires\\npath"). heat-engine itself cannot run here; the test reads the
signal objects back as heat-engine's `_refresh_swift_software_deployment` would.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import subprocess
import urllib.parse
from pathlib import Path

from tests.support.processes import BIN
from tests.support.swift import Swift

EXPIRES = 2147483587  # what Heat uses: effectively never


def temp_url(storage_url: str, key: str, method: str, container: str, obj: str) -> str:
    parts = urllib.parse.urlsplit(storage_url)
    path = f"{parts.path}/{container}/{obj}"
    sig = hmac.new(key.encode(), f"{method}\n{EXPIRES}\n{path}".encode(), hashlib.sha256).hexdigest()
    return f"{parts.scheme}://{parts.netloc}{path}?temp_url_sig={sig}&temp_url_expires={EXPIRES}"


def test_temp_url_signal_put_to_real_swift(swift_server: Swift, tmp_path: Path) -> None:
    """With TEMP_URL_SIGNAL the agent reads a Swift TempURL and PUTs its result into Heat's signal object."""
    key = secrets.token_hex(16)
    assert swift_server.request("POST", "", headers={"X-Account-Meta-Temp-Url-Key": key})[0] in (200, 204)
    _, storage = swift_server.auth()
    stack_id = "9bd57090-8954-48ab-bab9-adf9e1ac70fc"
    for container in ("web-0-server", stack_id):
        assert swift_server.request("PUT", f"/{container}")[0] in (201, 202)
    signal_obj = "web-deployment-q2xk7d"
    assert swift_server.request("PUT", f"/{stack_id}/{signal_obj}", b"")[0] == 201  # Heat pre-creates it
    put_url = temp_url(storage, key, "PUT", stack_id, signal_obj)
    doc = {
        "os-collect-config": {"collectors": ["request", "local"]},
        "deployments": [
            {
                "id": "3d5ec2a8-7004-43b6-a7f6-542bdbe9d434",
                "name": "10_write_file",
                "group": "script",
                "creation_time": "2026-05-01T10:00:02Z",
                "options": None,
                "config": "#!/bin/sh\necho hi\necho -n done > $heat_outputs_path.result\n",
                "outputs": [{"name": "result", "type": "String", "error_output": False}],
                "inputs": [
                    {"name": "deploy_server_id", "type": "String", "value": "ec14c864"},
                    {"name": "deploy_action", "type": "String", "value": "CREATE"},
                    {"name": "deploy_stack_id", "type": "String", "value": f"web/{stack_id}"},
                    {"name": "deploy_resource_name", "type": "String", "value": "deployment"},
                    {"name": "deploy_signal_transport", "type": "String", "value": "TEMP_URL_SIGNAL"},
                    {"name": "deploy_signal_id", "type": "String", "value": put_url},
                    {"name": "deploy_signal_verb", "type": "String", "value": "PUT"},
                ],
            }
        ],
    }
    metadata_obj = "0b6e9d0a-2f3c-4a51-9d42-7f1d5c0e8a11"
    body = json.dumps(doc).encode()
    assert swift_server.request("PUT", f"/web-0-server/{metadata_obj}", body)[0] == 201
    get_url = temp_url(storage, key, "GET", "web-0-server", metadata_obj)
    conf = tmp_path / "os-collect-config.conf"
    conf.write_text(f"[DEFAULT]\ncollectors = request\n\n[request]\nmetadata_url = {get_url}\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    run = subprocess.run(
        [
            str(BIN / "anneal-agent"),
            "once",
            "--heat-compat",
            "--os-collect-config",
            str(conf),
            "--state-dir",
            str(tmp_path / "state"),
            "--hook-dir",
            str(hooks),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    status, signal_body, headers = swift_server.request("GET", f"/{stack_id}/{signal_obj}")
    assert status == 200 and "Last-Modified" in headers
    assert json.loads(signal_body) == {
        "result": "done",
        "deploy_stdout": "hi\n",
        "deploy_stderr": "",
        "deploy_status_code": 0,
    }
