"""Offline enrolment over media: a server that reaches nothing at all enrols, runs a sealed secret, signals.

A real `anneal serve` and a real `anneal-agent run` that is given no URL at all (no
``--url``, no enrolment token in its environment) and runs in a network namespace of its
own without any route (`unshare --net`: a loopback that is down, nothing else; the test
checks `ip route get` fails there): everything it learns comes from the "media"
directory and everything it says goes to its outbox. The test is the courier:
it writes the enrolment bundle with `anneal server media`, carries the agent's
enrolment request back with `anneal signal import`, copies documents onto the media
and imports the signals. Tampered and foreign enrolment requests and signal files are
refused with an error naming why, and nothing is lost: the genuine ones import after.
The control plane's access log shows no agent route was ever requested.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.transports import offline
from tests.support.agents import agent_status, stop_agent
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.processes import BIN
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

PASSWORD = "canary-offline-5d1e9a"  # a canary: looked for in clear on the media and in the logs

TEMPLATE = one_script_deployment(
    """
    #!/bin/sh
    printf '%s' "$PASSWORD" | sha256sum | cut -c1-16 | tr -d '\\n' > "$heat_outputs_path.digest"
    """,
    params={"password": "string, hidden: true"},
    inputs={"PASSWORD": "{get_param: password}"},
    outputs=["digest"],
    server="off-box",
)


def raw_public(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def signed_request(key: Ed25519PrivateKey, server_id: str, token: str, box: str) -> dict[str, Any]:
    request = {
        "format": offline.REQUEST_FORMAT,
        "server_id": server_id,
        "enrol_token": token,
        "public_keys": {"sign": raw_public(key), "box": box},
        "hostname": "intruder",
    }
    request["signature"] = base64.b64encode(key.sign(offline.request_message(request))).decode()
    return request


def import_refused(cp: ControlPlane, tmp: Path, name: str, files: dict[str, bytes]) -> str:
    """Import a directory holding only *files*; it must fail; the error text."""
    folder = tmp / name
    folder.mkdir()
    for fname, body in files.items():
        (folder / fname).write_bytes(body)
    done = cp.cli("signal", "import", str(folder))
    assert 1 == done.returncode, (done.stdout, done.stderr)
    return done.stderr


def test_offline_enrolment_sealed_secret_and_signed_signals(tmp_path: Path) -> None:
    """An agent with no network enrols from media, gets sealed secrets, signs its signals; forgeries fail."""
    published, media, outbox, state = (tmp_path / n for n in ("published", "media", "outbox", "agent"))
    cp = start_control_plane(
        tmp_path,
        "--provisioner=enrol",
        "--access-log",
        f"--local-dir={published}",
        "--store-poll-interval=0.5",
    )
    agent = None
    try:
        created = cp.api("POST", "/v1/servers", {"name": "off-box", "transport": "LOCAL"})
        assert 201 == created.status, created.body
        server_id = created.body["id"]
        other = cp.api("POST", "/v1/servers", {"name": "off-other", "transport": "LOCAL"}).body
        not_local = cp.api("POST", "/v1/servers", {"name": "off-http"}).body
        refused = cp.cli("server", "media", not_local["name"], str(tmp_path / "nope"))
        assert 1 == refused.returncode and "offline enrolment needs LOCAL" in refused.stderr

        made = cp.cli("server", "media", "off-box", str(media))
        assert 0 == made.returncode, made.stderr
        bundle_file = media / offline.BUNDLE_FILE
        assert 0o600 == bundle_file.stat().st_mode & 0o777
        bundle = json.loads(bundle_file.read_bytes())
        assert server_id == bundle["server_id"]
        assert cp.api("GET", "/v1/keys").body["public_key"] == bundle["control_public_key"]
        other_bundle = tmp_path / "other-media"
        assert 0 == cp.cli("server", "media", "off-other", str(other_bundle)).returncode
        other_token = json.loads((other_bundle / offline.BUNDLE_FILE).read_bytes())["enrol_token"]

        # The agent: no URL, no token, and in a network namespace of its own with no route at
        # all (only a loopback that is down): everything it knows comes from the media.
        isolate = ["unshare", "--net", "--"]
        host = cp.url.split("//")[1].split(":")[0]
        probe = subprocess.run(
            [*isolate, "ip", "route", "get", host], capture_output=True, text=True, check=False
        )
        assert 0 != probe.returncode and "unreachable" in probe.stderr, (probe.stdout, probe.stderr)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANNEAL_")}
        with open(tmp_path / "agent.log", "wb") as log:  # the agent keeps its own copy
            agent = subprocess.Popen(
                [
                    *isolate,
                    str(BIN / "anneal-agent"),
                    "run",
                    "--state-dir",
                    str(state),
                    f"--media-dir={media}",
                    f"--signal-dir={outbox}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        request_file = outbox / offline.request_file_name(server_id)
        wait_until(request_file.exists, "the enrolment request in the outbox", 90)
        wait_until(
            (state / "agent.json").exists, "the agent's saved config", 90
        )  # written just after the request
        config = json.loads((state / "agent.json").read_bytes())
        assert ("", "", "") == (config["url"], config["credential"], config["heartbeat_url"])
        assert bundle["control_public_key"] == config["control_public_key"]
        request = json.loads(request_file.read_bytes())
        assert "ENROLLED" != cp.api("GET", "/v1/servers/off-box").body["status"]

        # Tampered: the box key swapped (an attacker's, to read the secrets): the signature breaks.
        intruder = Ed25519PrivateKey.generate()
        tampered = dict(request, public_keys={**request["public_keys"], "box": raw_public(intruder)})
        err = import_refused(cp, tmp_path, "tampered", {request_file.name: json.dumps(tampered).encode()})
        assert "signature: does not verify" in err
        # Foreign: a validly self-signed request for this server with another server's token.
        foreign = signed_request(intruder, server_id, other_token, raw_public(intruder))
        err = import_refused(cp, tmp_path, "foreign", {request_file.name: json.dumps(foreign).encode()})
        assert "belongs to another server" in err
        # A guessed token, and a request for a server that does not exist.
        guessed = signed_request(intruder, server_id, "x" * 43, raw_public(intruder))
        err = import_refused(cp, tmp_path, "guessed", {request_file.name: json.dumps(guessed).encode()})
        assert "unknown or already used" in err
        ghost = signed_request(
            intruder, "00000000-0000-4000-8000-000000000000", other_token, raw_public(intruder)
        )
        err = import_refused(cp, tmp_path, "ghost", {"enrol.x.json": json.dumps(ghost).encode()})
        assert "not found" in err
        assert "ENROLLED" != cp.api("GET", "/v1/servers/off-box").body["status"]
        assert "ENROLLED" != cp.api("GET", "/v1/servers/off-other").body["status"]

        # The genuine request: enrolled with the agent's own keys; importing it again is a duplicate.
        done = cp.cli("signal", "import", str(outbox), "-f", "json")
        assert 0 == done.returncode, done.stderr
        assert [False] == [r["duplicate"] for r in json.loads(done.stdout)]
        server = cp.api("GET", "/v1/servers/off-box").body
        assert "ENROLLED" == server["status"]
        again = cp.cli("signal", "import", str(outbox), "-f", "json")
        assert 0 == again.returncode and [True] == [r["duplicate"] for r in json.loads(again.stdout)]
        # The request's token is spent: an intruder's request with it is refused now.
        late = signed_request(intruder, server_id, request["enrol_token"], raw_public(intruder))
        assert "unknown or already used" in import_refused(
            cp, tmp_path, "late", {request_file.name: json.dumps(late).encode()}
        )

        # A deployment with a hidden parameter: sealed to the key the agent made offline.
        created_stack = cp.api(
            "POST", "/v1/stacks", {"name": "offs", "template": TEMPLATE, "parameters": {"password": PASSWORD}}
        )
        assert created_stack.status in (201, 202), created_stack.body
        doc_file = published / server_id / "document.json"

        def doc_with_deployment() -> bytes | None:
            body = doc_file.read_bytes() if doc_file.exists() else b""
            return body if b'"deployments"' in body and b"anneal-sealed:v1:" in body else None

        doc = wait_until(doc_with_deployment, "a document with the sealed deployment", 90)
        assert PASSWORD.encode() not in doc
        shutil.copyfile(doc_file, media / "document.json")
        signal_file = wait_until(
            lambda: next((p for p in outbox.glob("*.json") if p != request_file), None), "the signal file", 90
        )
        envelope = json.loads(signal_file.read_bytes())
        assert offline.SIGNAL_FORMAT == envelope["format"] and server_id == envelope["server_id"]
        assert PASSWORD not in signal_file.read_text()

        # Refused signal files, each with its reason; the stack waits, nothing recorded.
        inner = json.loads(envelope["signal"])
        forged = dict(envelope, signal=json.dumps({**inner, "deploy_status_code": 1}))
        err = import_refused(cp, tmp_path, "forged", {signal_file.name: json.dumps(forged).encode()})
        assert "signature does not verify" in err
        moved = dict(envelope, server_id=other["id"])
        err = import_refused(cp, tmp_path, "moved", {signal_file.name: json.dumps(moved).encode()})
        assert "but the deployment is on" in err
        err = import_refused(cp, tmp_path, "bare", {signal_file.name: envelope["signal"].encode()})
        assert "not a signed signal file" in err
        dep_id, gen = signal_file.name.removesuffix(".json").rsplit(".", 1)
        renamed = f"{dep_id}.{int(gen) + 1}.json"
        err = import_refused(cp, tmp_path, "renamed", {renamed: signal_file.read_bytes()})
        assert "is signed for" in err
        assert "CREATE_IN_PROGRESS" == cp.api("GET", "/v1/stacks/offs").body["status"]

        done = cp.cli("signal", "import", str(outbox))
        assert 0 == done.returncode, done.stderr
        assert "CREATE_COMPLETE" == cp.wait_stack("offs")["status"]
        assert {"digest": hashlib.sha256(PASSWORD.encode()).hexdigest()[:16]} == cp.outputs("offs")

        shown = agent_status(state)["transport"]
        assert {"kind": "LOCAL media", "document_url": f"{media}/document.json"} == shown

        # No agent route was ever asked for: the agent had none.
        access = [line for line in cp.log.read_text().splitlines() if "control.access" in line]
        assert access, "the access log is empty: --access-log did not work"
        assert [] == [line for line in access if "/v1/agent/" in line or "/v1/signal/" in line]
        assert PASSWORD not in (tmp_path / "agent.log").read_text()
    finally:
        stop_agent(agent)
        stop_control_plane(cp)
