"""R21: secrets never in logs, the database, published documents or error bodies.

A real control plane and a real local agent, both at DEBUG, run a stack whose
hidden parameter and `secret: true` input carry unique canaries; the hook proves
it received them by writing their SHA-256. The same values also reach a hook through
a StructuredConfig's `get_input`, and an OS::Heat::RandomString value flows into
inputs, a structured config and a stack output: the script hands that value (which
the test cannot know beforehand) to a directory outside the scanned tree. Then every artefact is grepped for
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
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

pytestmark = pytest.mark.catalogue("R21")

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  db_password: {type: string, hidden: true, constraints: [{allowed_pattern: "cnry-.*"}]}
  api_key: {type: string}
  out: {type: string}
  vault: {type: string}
resources:
  box: {type: OS::Heat::DeployedServer, properties: {name: vault}}
  token: {type: OS::Heat::RandomString, properties: {length: 40}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: PW}, {name: API_KEY, secret: true}, {name: DSN}, {name: OUT}, {name: TOKEN}, {name: VAULT}]
      outputs: [{name: done}]
      config: |
        #!/bin/sh
        printf '%s' "$TOKEN" > "$VAULT/token"
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
        TOKEN: {get_attr: [token, value]}
        VAULT: {get_param: vault}
  scfg:
    type: OS::Heat::StructuredConfig
    properties:
      group: canary
      inputs: [{name: API_KEY, secret: true}, {name: PW}, {name: TOKEN}, {name: OUT}]
      config:
        api_key: {get_input: API_KEY}
        dsn: {get_input: PW}
        token: {get_input: TOKEN}
        out: {get_input: OUT}
  sdep:  # only the secret input's value is secret in its config
    type: OS::Heat::StructuredDeployment
    properties:
      config: {get_resource: scfg}
      server: {get_resource: box}
      input_values: {API_KEY: {get_param: api_key}, OUT: {get_param: out}}
  sdep2:  # only the hidden parameter's and the random string's values
    type: OS::Heat::StructuredDeployment
    properties:
      config: {get_resource: scfg}
      server: {get_resource: box}
      input_values: {PW: {get_param: db_password}, TOKEN: {get_attr: [token, value]}, OUT: {get_param: out}}
outputs:
  password: {value: {get_param: db_password}}
  token: {value: {get_attr: [token, value]}}
"""

# A hook for structured configs: proves what it got by writing SHA-256s, nothing in clear.
CANARY_HOOK = f"""#!{sys.executable}
import hashlib, json, sys
config = json.load(sys.stdin)["config"]
for key in [k for k in ("api_key", "dsn", "token") if config[k] is not None]:
    with open(config["out"] + "/structured-" + key, "w") as f:
        f.write(hashlib.sha256(str(config[key]).encode()).hexdigest())
print(json.dumps({{"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}}))
"""


def canary(kind: str) -> str:
    return f"cnry-{kind}-{secrets.token_hex(12)}"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def cp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    monkeypatch.setenv("ANNEAL_LOG_LEVEL", "DEBUG")  # the local agents inherit it
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "canary").write_text(CANARY_HOOK)
    (hooks / "canary").chmod(0o755)
    # exec_: its /proc/PID/environ and cmdline are searched, the command's own (not a zygote's)
    plane = start_control_plane(
        tmp_path, "--log-level", "DEBUG", f"--agent-arg=--hook-dir={hooks}", exec_=True
    )
    yield plane
    stop_control_plane(plane)


@pytest.fixture
def vault() -> Iterator[Path]:
    """Outside the scanned tree: where the hook hands over the random value, 0700."""
    path = Path(tempfile.mkdtemp(prefix="anneal-r21-vault-"))
    yield path
    shutil.rmtree(path)


def test_canary_secrets_appear_nowhere_in_clear(cp: ControlPlane, tmp_path: Path, vault: Path) -> None:
    """Hidden values, secret inputs and random strings reach the hooks, and nothing else holds them in clear."""
    out = tmp_path / "out"
    out.mkdir()
    hidden, hidden2, key, rejected = canary("hidden"), canary("hidden2"), canary("key"), canary("err")
    env = f"parameters:\n  api_key: {key}\n"
    params = {"db_password": hidden, "out": str(out), "vault": str(vault)}
    resp = cp.create("vault", TEMPLATE, params=params, environments=[env])
    assert resp.status == 201, resp.body
    assert cp.wait_stack("vault")["status"] == "CREATE_COMPLETE"
    assert (out / "pw").read_text().strip() == sha(hidden)  # opened into the hook's environment
    assert (out / "key").read_text().strip() == sha(key)
    assert (out / "dsn").read_text().strip() == sha(f"postgres://app:{hidden}@db/app")
    token = (vault / "token").read_text()
    assert len(token) == 40
    for name, value in (("api_key", key), ("dsn", hidden), ("token", token)):  # opened into the config
        assert (out / f"structured-{name}").read_text() == sha(value)

    body = {
        "template": TEMPLATE,
        "parameters": {**params, "db_password": hidden2},
        "environments": [env],
    }
    assert cp.api("PUT", "/v1/stacks/vault", body).status == 202
    assert cp.wait_stack("vault")["status"] == "UPDATE_COMPLETE"
    pw = out / "pw"
    wait_until(
        lambda: pw.exists() and pw.read_text().strip() == sha(hidden2), f"{pw} never became the new hash"
    )

    # Error bodies: a request carrying a secret that fails, a forged signal.
    errors = []
    bad = {"name": "vault2", "template": TEMPLATE, "parameters": {"db_password": f"x{rejected}", "out": "/x"}}
    failed = cp.api("POST", "/v1/stacks", bad)
    assert failed.status == 400
    errors.append(json.dumps(failed.body))
    deps = {d["resource_name"]: d for d in cp.api("GET", "/v1/deployments?stack=vault").body}
    dep, sdep, sdep2 = deps["dep"], deps["sdep"], deps["sdep2"]
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
            f"/v1/deployments/{sdep['id']}",
            f"/v1/deployments/{sdep2['id']}",
            "/v1/servers/vault",
        )
    ]
    shown.append(cp.cli("stack", "show", "vault", "-f", "json").stdout)
    shown.append(cp.cli("stack", "outputs", "vault", "-f", "json").stdout)
    shown.append(cp.cli("deployment", "show", dep["id"], "-f", "json").stdout)
    assert json.loads(shown[-1])["input_values"]["API_KEY"] == "******"

    # The published document, as any transport carries it.
    state = cp.agent_dir("vault")
    credential = json.loads((state / "agent.json").read_text())["credential"]
    document = cp.api("GET", "/v1/agent/document", token=credential)
    assert document.status == 200
    published = json.dumps(document.body)
    sealed = document.body["anneal"]["deployments"]
    assert {"inputs.PW", "inputs.API_KEY", "inputs.DSN", "inputs.TOKEN", "inputs.deploy_signal_id"} <= {
        f for meta in sealed.values() for f in meta.get("sealed", [])
    }
    for each, fields in (
        (sdep, {"config", "inputs.API_KEY"}),
        (sdep2, {"config", "inputs.TOKEN", "inputs.PW"}),
    ):
        item = cp.api("GET", f"/v1/deployments/{each['id']}").body["derived_config_id"]
        assert fields <= set(sealed[item]["sealed"]), each["resource_name"]

    signal_key = bytes.fromhex((cp.data_dir / "signal-key").read_text().strip())
    sigs = [
        hmac.new(signal_key, f"signal:{dep['id']}:{g}".encode(), hashlib.sha256).hexdigest() for g in (1, 2)
    ]
    everywhere = [hidden, hidden2, key, rejected, token]

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
        for value in (hidden, hidden2, rejected, token, credential, *sigs):
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
