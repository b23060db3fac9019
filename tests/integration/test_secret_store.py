"""Secrets stay sealed in the object stores: no Swift or S3 object ever holds a hidden value in clear.

A real Swift all-in-one (its s3api serves the S3 transport), a real control plane and two
real local agents, one on SWIFT (POLL_TEMP_URL) and one on S3. Hidden values reach each
server as a member of a hidden json parameter, a str_replace into an input and into the
config body; each hook proves it got them (SHA-256). Every object of the run's containers
(documents, and signals caught while they are there) and every file of the store on disk
is searched for the canaries: zero hits, and the documents hold sealed fields.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.swift import Swift, swift_args
from tests.support.waiting import wait_until

SERVER = """
  {name}: {{type: OS::Heat::DeployedServer, properties: {{name: {name}, software_config_transport: {transport}}}}}
  dep-{name}:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: cfg}}
      server: {{get_resource: {name}}}
      input_values:
        MEMBER: {{get_param: [creds, password]}}
        REPLACED: {{str_replace: {{template: "x=$P", params: {{"$P": {{get_param: pw}}}}}}}}
"""
TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  pw: {type: string, hidden: true}
  creds: {type: json, hidden: true}
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: MEMBER}, {name: REPLACED}]
      outputs: [{name: digests}]
      config:
        str_replace:
          params: {"@PW@": {get_param: pw}}
          template: |
            #!/bin/sh
            for v in "$MEMBER" "$REPLACED" "@PW@"; do printf '%s' "$v" | sha256sum | cut -c1-64; done \\
              > "$heat_outputs_path.digests"
"""


@pytest.fixture
def store_cp(
    swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ControlPlane, str]]:
    """A control plane with SWIFT and S3 (Swift's s3api) on the shared Swift; its container prefix."""
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)  # secrets stay out of argv
    monkeypatch.setenv("ANNEAL_S3_SECRET_KEY", swift_server.key)
    prefix = "c" + "".join(c for c in tmp_path.name[-14:].lower() if c.isalnum())
    extra = (f"--s3-endpoint={swift_server.url}", f"--s3-access-key={swift_server.user}")
    cp = start_control_plane(tmp_path, *swift_args(swift_server, prefix, *extra))
    yield cp, prefix
    stop_control_plane(cp)


def store_objects(swift: Swift, prefix: str, seen: dict[str, bytes]) -> None:
    """Add every object of the run's containers (by container, name and etag) to *seen*."""
    status, body, _ = swift.request("GET", f"?format=json&prefix={prefix}")
    assert 200 == status, body
    for container in (c["name"] for c in json.loads(body)):
        status, listing, _ = swift.request("GET", f"/{container}?format=json")
        for obj in json.loads(listing) if status == 200 else []:
            key = f"{container}/{obj['name']}@{obj['hash']}"
            if key not in seen:
                status, data, _ = swift.request("GET", f"/{container}/{obj['name']}")
                if status == 200:  # a signal may be collected (deleted) between listing and reading
                    seen[key] = data


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_store_objects_never_hold_a_hidden_value_in_clear(
    store_cp: tuple[ControlPlane, str], swift_server: Swift
) -> None:
    """Documents and signals in Swift and S3 hold no canary; the hooks got the real values; documents are sealed."""
    cp, prefix = store_cp
    canaries = {name: f"cnry{name}{secrets.token_hex(10)}" for name in ("pw", "member")}
    template = TEMPLATE + SERVER.format(name="sw-box", transport="POLL_TEMP_URL")
    template += SERVER.format(name="s3-box", transport="S3")
    params = {"pw": canaries["pw"], "creds": json.dumps({"user": "u", "password": canaries["member"]})}
    created = cp.create("stored", template, params=params)
    assert 201 == created.status, created.body
    seen: dict[str, bytes] = {}

    def settled() -> str | None:
        store_objects(swift_server, prefix, seen)  # signals too, while they are in the store
        status = str(cp.api("GET", "/v1/stacks/stored").body["status"])
        return None if status.endswith("IN_PROGRESS") else status

    assert "CREATE_COMPLETE" == wait_until(settled, f"stack did not settle; log {cp.log}", 180, interval=0.3)
    store_objects(swift_server, prefix, seen)
    expected = "\n".join(sha(v) for v in (canaries["member"], f"x={canaries['pw']}", canaries["pw"])) + "\n"
    for server in ("sw-box", "s3-box"):
        dep = next(d for d in cp.api("GET", "/v1/deployments").body if d["server_name"] == server)
        shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body
        assert (server, expected) == (server, shown["output_values"]["digests"]), shown
    documents = [data for data in seen.values() if b'"anneal"' in data and b'"deployment_id"' in data]
    # sealed to each server's key, or (published before it enrolled) withheld: never in clear
    assert all(b"anneal-sealed:" in d for d in documents), sorted(seen)
    assert len([d for d in documents if b"anneal-sealed:v1:" in d]) >= 2, sorted(seen)
    on_disk = [p for p in swift_server.root.rglob("*") if p.is_file()]
    hits = [
        f"{n} in object {k}" for k, data in seen.items() for n, v in canaries.items() if v.encode() in data
    ]
    hits += [f"{n} in {p}" for p in on_disk for n, v in canaries.items() if v.encode() in p.read_bytes()]
    print(
        f"\ncanary secrets in stores: {len(seen)} objects, {len(on_disk)} store files searched, {len(hits)} hits"
    )
    assert [] == hits
