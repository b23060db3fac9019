"""R21: secrets never in logs, the database, published documents or error bodies.

A real control plane and a real local agent, both at DEBUG, run a stack whose
hidden parameter and `secret: true` input carry unique canaries; the hook proves
it received them by writing their SHA-256. Then every artefact is grepped for
every canary: all files under the test's directory (logs, the SQLite database and
its WAL, the agent's state and the hook's working files), the published document,
the API's answers, error bodies, and /proc/<pid>/{cmdline,environ} of the control
plane and the agent. The agent's own credential and signal URL may live only in
its state dir files meant for them (agent.json; the ledger's outbox).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from pathlib import Path

import pytest

from tests.integration.conftest import ControlPlane, start_control_plane, stop_control_plane

pytestmark = pytest.mark.slow

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, constraints: [{allowed_pattern: "cnry-.*"}]}
  api_key: {type: string}
  out: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: vault}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PW}, {name: API_KEY, secret: true}, {name: DSN}, {name: OUT}]
      outputs: [{name: done}]
      config: |
        #!/bin/sh
        printf '%s' "$PW" | sha256sum | cut -d' ' -f1 > "$OUT/pw"
        printf '%s' "$API_KEY" | sha256sum | cut -d' ' -f1 > "$OUT/key"
        printf '%s' "$DSN" | sha256sum | cut -d' ' -f1 > "$OUT/dsn"
        echo "configured the database client"
        printf 'yes' > "$heat_outputs_path.done"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: cfg}
      server: {get_resource: box}
      signal_transport: CFN_SIGNAL
      input_values:
        PW: {get_param: db_password}
        API_KEY: {get_param: api_key}
        DSN: {str_replace: {template: "postgres://app:PASS@db/app", params: {PASS: {get_param: db_password}}}}
        OUT: {get_param: out}
outputs:
  password: {value: {get_param: db_password}}
"""


def canary(kind: str) -> str:
    return f"cnry-{kind}-{secrets.token_hex(12)}"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def wait_for(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip() == text:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never became {text}")


@pytest.fixture
def cp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ControlPlane:
    monkeypatch.setenv("ANNEAL_LOG_LEVEL", "DEBUG")  # the local agents inherit it
    plane = start_control_plane(tmp_path, "--log-level", "DEBUG")
    yield plane
    stop_control_plane(plane)


def test_canary_secrets_appear_nowhere_in_clear(cp: ControlPlane, tmp_path: Path) -> None:
    """Hidden values and secret inputs reach the hook, and nothing else holds them in clear."""
    out = tmp_path / "out"
    out.mkdir()
    hidden, hidden2, key, rejected = canary("hidden"), canary("hidden2"), canary("key"), canary("err")
    env = f"parameters:\n  api_key: {key}\n"
    resp = cp.create("vault", TEMPLATE, params={"db_password": hidden, "out": str(out)}, environments=[env])
    assert resp.status == 201, resp.body
    assert cp.wait_stack("vault")["status"] == "CREATE_COMPLETE"
    assert (out / "pw").read_text().strip() == sha(hidden)  # opened into the hook's environment
    assert (out / "key").read_text().strip() == sha(key)
    assert (out / "dsn").read_text().strip() == sha(f"postgres://app:{hidden}@db/app")

    body = {
        "template": TEMPLATE,
        "parameters": {"db_password": hidden2, "out": str(out)},
        "environments": [env],
    }
    assert cp.api("PUT", "/v1/stacks/vault", body).status == 202
    assert cp.wait_stack("vault")["status"] == "UPDATE_COMPLETE"
    wait_for(out / "pw", sha(hidden2))

    # Error bodies: a request carrying a secret that fails, a forged signal.
    errors = []
    bad = {"name": "vault2", "template": TEMPLATE, "parameters": {"db_password": f"x{rejected}", "out": "/x"}}
    failed = cp.api("POST", "/v1/stacks", bad)
    assert failed.status == 400
    errors.append(json.dumps(failed.body))
    (dep,) = cp.api("GET", "/v1/deployments?stack=vault").body
    forged = cp.api("POST", f"/v1/signal/{dep['id']}/2?sig={rejected}", {"deploy_status_code": 0}, token=None)
    assert forged.status == 403
    errors.append(json.dumps(forged.body))

    # What the API and CLI show.
    shown = [
        json.dumps(cp.api("GET", path).body)
        for path in (
            "/v1/stacks/vault",
            "/v1/stacks/vault/outputs",
            "/v1/stacks/vault/resources",
            "/v1/stacks/vault/events",
            f"/v1/deployments/{dep['id']}",
            "/v1/servers/vault",
        )
    ]
    shown.append(cp.cli("deployment", "show", dep["id"], "-f", "json").stdout)
    assert json.loads(shown[-1])["input_values"]["API_KEY"] == "******"

    # The published document, as any transport carries it.
    state = cp.agent_dir("vault")
    credential = json.loads((state / "agent.json").read_text())["credential"]
    document = cp.api("GET", "/v1/agent/document", token=credential)
    assert document.status == 200
    published = json.dumps(document.body)
    sealed = document.body["anneal"]["deployments"]
    assert {"inputs.PW", "inputs.API_KEY", "inputs.DSN", "inputs.deploy_signal_id"} <= {
        f for meta in sealed.values() for f in meta.get("sealed", [])
    }

    signal_key = bytes.fromhex((cp.data_dir / "signal-key").read_text().strip())
    sigs = [
        hmac.new(signal_key, f"signal:{dep['id']}:{g}".encode(), hashlib.sha256).hexdigest() for g in (1, 2)
    ]
    everywhere = [hidden, hidden2, key, rejected]

    # Files: logs, database bytes, agent state, hook working files.
    agent_pid = int((state / "agent.pid").read_text())
    hits = []
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for value in everywhere:
            if value.encode() in data:
                hits.append(f"{value} in {path}")
        own = {state / "agent.json", state / "ledger.sqlite", state / "ledger.sqlite-wal"}
        for value in (credential, *sigs):
            if value.encode() in data and path not in own:
                hits.append(f"credential/signal signature in {path}")
    for name, text in (("document", published), *((f"error {i}", e) for i, e in enumerate(errors))):
        for value in [*everywhere, credential, *sigs]:
            if value in text:
                hits.append(f"{value} in {name}")
    for i, text in enumerate(shown):
        for value in (hidden, hidden2, rejected, credential, *sigs):
            if value in text:
                hits.append(f"{value} in API answer {i}")
    for pid in (cp.proc.pid, agent_pid):
        for part in ("cmdline", "environ"):
            data = Path(f"/proc/{pid}/{part}").read_bytes()
            for value in [*everywhere, credential, *sigs]:
                if value.encode() in data:
                    hits.append(f"{value} in /proc/{pid}/{part}")
    assert hits == []
    assert b"DEBUG" in (tmp_path / "control.log").read_bytes()  # the scan covered debug logging
    agent_log = state / "agent.log"
    assert agent_log.exists() and agent_log.stat().st_size > 0
