"""Scoped signal credentials (R23, and the duplicate/stale rules of I5) against the real control plane.

Two servers are enrolled by the test itself with key pairs it holds, so it can read
their documents and open the sealed signal URLs as their agents would; no agent
runs, so every signal here is one the test sends.
"""

from __future__ import annotations

import base64
import json
import secrets
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import sealed, wire
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.waiting import wait_until

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  step: {type: string, default: one}
resources:
  a: {type: OS::Heat::DeployedServer, properties: {name: scope-a}}
  b: {type: OS::Heat::DeployedServer, properties: {name: scope-b}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: STEP}]
      outputs: [{name: out}]
      config: "#!/bin/sh\\necho $STEP\\n"
  dep_a:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: a}, input_values: {STEP: {get_param: step}}}
  dep_b:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: {get_resource: b}, input_values: {STEP: {get_param: step}}}
"""


def raw_public(key: Any) -> str:
    return base64.b64encode(
        key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ).decode()


@dataclass
class Server:
    name: str
    id: str
    credential: str
    box: X25519PrivateKey

    def signal_url(self, cp: ControlPlane) -> tuple[str, str, int]:
        """The (opened) signal URL of this server's one deployment, its id and generation."""
        doc = cp.api("GET", "/v1/agent/document", token=self.credential)
        assert doc.status == 200 and doc.body["anneal"]["server_id"] == self.id
        (item_json,) = doc.body["deployments"]
        meta = doc.body["anneal"]["deployments"][item_json["id"]]
        item = sealed.open_item(wire.decode_item(item_json), meta["sealed"], self.id, self.box)
        url = str(item.input_value("deploy_signal_id"))
        assert url.startswith(cp.url) and "sig=" in url
        return url[len(cp.url) :], meta["deployment_id"], meta["generation"]


def enrol(cp: ControlPlane, name: str) -> Server:
    # The engine creates the server soon after the stack.
    wait_until(lambda: cp.api("GET", f"/v1/servers/{name}").status != 404, f"server {name}", interval=0.1)
    token = cp.api("POST", f"/v1/servers/{name}/token").body["enrol_token"]
    box = X25519PrivateKey.generate()
    keys = {"sign": raw_public(Ed25519PrivateKey.generate()), "box": raw_public(box)}
    resp = cp.api("POST", "/v1/agent/enrol", {"token": token, "public_keys": keys}, token=None)
    assert resp.status == 201, resp.body
    return Server(name, resp.body["server_id"], resp.body["credential"], box)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Server, Server]]:
    cp = start_control_plane(tmp_path_factory.mktemp("scope"), "--provisioner", "enrol")
    assert cp.create("scope", TEMPLATE).status == 201
    a, b = enrol(cp, "scope-a"), enrol(cp, "scope-b")
    yield cp, a, b
    stop_control_plane(cp)


def signal(nonce: str, generation: int | None = None, code: int = 0) -> dict[str, Any]:
    extra: dict[str, Any] = {"nonce": nonce}
    if generation is not None:
        extra["generation"] = generation
    return {
        "deploy_stdout": "ok",
        "deploy_stderr": "",
        "deploy_status_code": code,
        "out": "x",
        "anneal": extra,
    }


def status_of(cp: ControlPlane, deployment_id: str) -> str:
    return str(cp.api("GET", f"/v1/deployments/{deployment_id}").body["status"])


def events(cp: ControlPlane) -> int:
    return len(cp.api("GET", "/v1/stacks/scope/events").body)


@pytest.mark.catalogue("R23")
def test_a_captured_signal_url_does_one_thing_only(setup: tuple[ControlPlane, Server, Server]) -> None:
    """R23: the URL signals its own deployment generation; every other use is refused, B untouched."""
    cp, a, b = setup
    path, dep_a, gen = a.signal_url(cp)
    _, dep_b, _ = b.signal_url(cp)
    sig = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)["sig"][0]
    attempts = {
        "read a document with it": cp.api("GET", f"/v1/agent/document?sig={sig}", token=None),
        "read the signal URL": cp.api("GET", path, token=None),
        "PUT to it": cp.api("PUT", path, signal("p"), token=None),
        "signal another deployment": cp.api(
            "POST", f"/v1/signal/{dep_b}/{gen}?sig={sig}", signal("x"), token=None
        ),
        "signal another generation": cp.api(
            "POST", f"/v1/signal/{dep_a}/{gen + 1}?sig={sig}", signal("y"), token=None
        ),
        "use it as a bearer token": cp.api("GET", "/v1/agent/document", token=sig),
        "use it as an admin token": cp.api("GET", "/v1/stacks", token=sig),
        "exchange it at enrolment": cp.api(
            "POST", "/v1/agent/enrol", {"token": sig, "public_keys": {"sign": "", "box": ""}}, token=None
        ),
        "heartbeat with it": cp.api("POST", f"/v1/agent/heartbeat?sig={sig}", {}, token=None),
    }
    allowed = {k: v.status for k, v in attempts.items() if v.status < 400}
    assert allowed == {}
    assert attempts["signal another deployment"].status == 403
    assert attempts["signal another generation"].status == 403
    guesses = [
        cp.api(
            "POST", f"/v1/signal/{dep_a}/{gen}?sig={secrets.token_hex(32)}", signal("g"), token=None
        ).status
        for _ in range(300)
    ]
    assert set(guesses) == {403}
    assert status_of(cp, dep_b) == "IN_PROGRESS" and status_of(cp, dep_a) == "IN_PROGRESS"


def test_an_agent_credential_reaches_only_its_own_server(setup: tuple[ControlPlane, Server, Server]) -> None:
    """Server A's credential reads A's document only and cannot signal B's deployment or read the API."""
    cp, a, b = setup
    _, dep_b, gen_b = b.signal_url(cp)
    forged = cp.api("POST", f"/v1/signal/{dep_b}/{gen_b}", signal("z"), token=a.credential)
    assert forged.status == 403 and "another server" in forged.body["error"]["message"]
    assert cp.api("GET", "/v1/servers/scope-b", token=a.credential).status == 401
    assert cp.api("GET", "/v1/agent/document", token=a.credential).body["anneal"]["server_id"] == a.id
    assert status_of(cp, dep_b) == "IN_PROGRESS"


def test_duplicates_are_idempotent_and_stale_generations_refused(
    setup: tuple[ControlPlane, Server, Server],
) -> None:
    """Same nonce: same answer, no new event; other nonce: 409; wrong body generation: 400; old generation: 409."""
    cp, a, b = setup
    path, dep_a, gen = a.signal_url(cp)
    assert cp.api("POST", path, signal("n1", gen + 1), token=None).status == 400  # body contradicts URL
    first = cp.api("POST", path, signal("n1", gen), token=None)
    assert first.status == 200 and first.body["duplicate"] is False and first.body["status"] == "COMPLETE"
    seen = events(cp)
    again = cp.api("POST", path, signal("n1", gen), token=None)
    assert again.status == 200 and again.body["duplicate"] is True and again.body["status"] == "COMPLETE"
    other = cp.api("POST", path, signal("n2", gen, code=1), token=None)
    assert other.status == 409 and "already answered" in other.body["error"]["message"]
    assert events(cp) == seen and status_of(cp, dep_a) == "COMPLETE"

    b_path, _, b_gen = b.signal_url(cp)
    assert cp.api("POST", b_path, signal("b1", b_gen), token=None).status == 200
    assert cp.wait_stack("scope")["status"] == "CREATE_COMPLETE"
    body = {"template": TEMPLATE, "parameters": {"step": "two"}}
    assert cp.api("PUT", "/v1/stacks/scope", body).status == 202
    # The engine starts generation 2 shortly after the update.
    new_gen = wait_until(lambda: (g := a.signal_url(cp)[2]) != gen and g, "generation 2", interval=0.1)
    assert new_gen == gen + 1
    stale = cp.api("POST", path, signal("n3", gen), token=None)  # the old URL, validly signed
    assert stale.status == 409
    assert (
        f"generation {gen} of deployment {dep_a} is stale; current is {new_gen}"
        in stale.body["error"]["message"]
    )
    assert status_of(cp, dep_a) == "IN_PROGRESS"
    json.dumps(stale.body)


@pytest.mark.catalogue("R15")
def test_a_re_enrolled_server_gets_secrets_sealed_to_its_new_key(
    setup: tuple[ControlPlane, Server, Server],
) -> None:
    """R15 (per-server key): after enrolling again, the old key opens nothing and the old credential is dead."""
    cp, a, _ = setup
    doc = cp.api("GET", "/v1/agent/document", token=a.credential).body
    (item_json,) = doc["deployments"]
    fields = doc["anneal"]["deployments"][item_json["id"]]["sealed"]
    old_box, old_credential = a.box, a.credential
    renewed = enrol(cp, a.name)
    assert renewed.id == a.id
    assert cp.api("GET", "/v1/agent/document", token=old_credential).status == 401
    fresh = cp.api("GET", "/v1/agent/document", token=renewed.credential).body
    assert fresh["anneal"]["serial"] > doc["anneal"]["serial"]
    (fresh_item,) = fresh["deployments"]
    fresh_fields = fresh["anneal"]["deployments"][fresh_item["id"]]["sealed"]
    assert fresh_fields == fields
    opened = sealed.open_item(wire.decode_item(fresh_item), fresh_fields, a.id, renewed.box)
    assert "sig=" in str(opened.input_value("deploy_signal_id"))
    with pytest.raises(sealed.SealError):
        sealed.open_item(wire.decode_item(fresh_item), fresh_fields, a.id, old_box)
    a.credential, a.box = renewed.credential, renewed.box  # the next test goes on as the new agent


@pytest.mark.catalogue("R23")
def test_a_signal_url_of_a_deleted_deployment_is_gone(setup: tuple[ControlPlane, Server, Server]) -> None:
    """R23: once the deployment is deleted, its URL answers 410 and changes nothing."""
    cp, a, b = setup
    for server in (a, b):  # let the update finish, so that the stack can be deleted
        path, _, gen = server.signal_url(cp)
        assert cp.api("POST", path, signal(f"d-{server.name}", gen), token=None).status == 200
    assert cp.api("DELETE", "/v1/stacks/scope").status == 202
    assert cp.wait_stack("scope")["status"] == "DELETED"
    gone = cp.api("POST", path, signal("d2", gen), token=None)
    assert gone.status == 410 and "no longer exists" in gone.body["error"]["message"]
