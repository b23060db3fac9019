"""Input that used to give a 500 and a traceback gets a 4xx naming the field; HTTP details as RFC 9110 asks.

Each case of issue 21's list is sent to a real control plane (provisioner `enrol`: the test
plays the agent with a credential of its own), and the log is checked for tracebacks at the end.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.keys import ensure_keys
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

BIG = str(2**70)


@dataclass
class Plane:
    cp: ControlPlane
    credential: str
    server_id: str


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """A control plane with short body and idle timeouts and one enrolled (test-played) agent."""
    tmp = tmp_path_factory.mktemp("hostile")
    cp = start_control_plane(tmp, "--provisioner", "enrol", "--body-timeout", "1", "--idle-timeout", "2")
    try:
        created = cp.api("POST", "/v1/servers", {"name": "target"}).body
        keys = ensure_keys(tmp / "agent-keys")
        enrolled = cp.api(
            "POST", "/v1/agent/enrol", {"token": created["enrol_token"], "public_keys": keys}, token=None
        )
        assert 201 == enrolled.status, enrolled.body
        yield Plane(cp, enrolled.body["credential"], created["id"])
        log = cp.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-6000:]
    finally:
        stop_control_plane(cp)


def _error(resp_body: object) -> dict[str, str]:
    assert isinstance(resp_body, dict), resp_body
    return dict(resp_body["error"])


def test_a_non_ascii_bearer_token_is_401_naming_authorization(plane: Plane) -> None:
    """A non-ASCII token on an admin and an agent route: 401, where Authorization, WWW-Authenticate: Bearer."""
    for path in ("/v1/stacks", "/v1/agent/document"):
        resp = plane.cp.api("GET", path, headers={"Authorization": "Bearer t\u00f6ken"}, token=None)
        assert 401 == resp.status, resp.body
        assert "Authorization" == _error(resp.body)["where"]
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_non_ascii_signature_is_403_naming_sig(plane: Plane) -> None:
    """A non-ASCII ?sig= on the signal and Heat metadata routes: 403 naming sig."""
    sig = urllib.parse.quote("\u00e9\u00e9")
    for method, path in (("POST", f"/v1/signal/x/1?sig={sig}"), ("GET", f"/v1/heat/metadata/x?sig={sig}")):
        resp = plane.cp.api(method, path, {} if method == "POST" else None, token=None)
        assert 403 == resp.status, resp.body
        assert "sig" == _error(resp.body)["where"]


def test_a_deeply_nested_signal_body_is_400(plane: Plane) -> None:
    """100,000 nested arrays on the signal route (with a good credential): 400 naming the body."""
    raw = b"[" * 100_000 + b"]" * 100_000
    resp = plane.cp.api("POST", "/v1/signal/x/1", raw=raw, token=plane.credential)
    assert 400 == resp.status, resp.body
    assert "body" == _error(resp.body)["where"]


@pytest.mark.parametrize(
    "query",
    [f"after={BIG}", f"traversal={BIG}", f"limit={BIG}", "limit=0", "after=-1", "wait=-1", "wait=nan"],
)
def test_integers_past_the_columns_are_400_naming_the_parameter(plane: Plane, query: str) -> None:
    """after, traversal and limit past 32 bits (or below their least), wait negative: 400 naming it."""
    resp = plane.cp.api("GET", f"/v1/stacks/none/events?{query}")
    assert 400 == resp.status, resp.body
    assert query.split("=", maxsplit=1)[0] == _error(resp.body)["where"]


def test_a_generation_past_the_column_is_400(plane: Plane) -> None:
    """A signal URL's generation past 32 bits: 400 naming generation."""
    resp = plane.cp.api("POST", f"/v1/signal/x/{BIG}", {"deploy_status_code": 0}, token=plane.credential)
    assert (400, "generation") == (resp.status, _error(resp.body)["where"])


def test_an_out_of_range_status_code_fails_the_deployment_and_is_refused_for_good(plane: Plane) -> None:
    """deploy_status_code 2**70: 400 naming it (the agent drops the signal), the deployment FAILED saying why."""
    cp = plane.cp
    assert 201 == cp.create("big-code", one_script_deployment("#!/bin/sh\n", server=plane.server_id)).status
    dep = wait_until(lambda: cp.api("GET", "/v1/deployments?stack=big-code").body, "the deployment", 60)[0]
    resp = cp.api("POST", f"/v1/signal/{dep['id']}/1", {"deploy_status_code": 2**70}, token=plane.credential)
    assert 400 == resp.status, resp.body
    assert "deploy_status_code" == _error(resp.body)["where"]
    shown = cp.api("GET", f"/v1/deployments/{dep['id']}").body
    assert "FAILED" == shown["status"]
    assert "deploy_status_code" in shown["status_reason"] and "out of range" in shown["status_reason"]
    assert "CREATE_FAILED" == cp.wait_stack("big-code", 60)["status"]


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ('"parameters": {"p": "\\ud800"}', "body.parameters.p"),
        ('"files": {"f.sh": "\\udc00"}', "body.files.f.sh"),
        ('"name": "s\\ud800"', "body.name"),
    ],
)
def test_lone_surrogates_are_400_naming_the_field(plane: Plane, field: str, where: str) -> None:
    """A lone surrogate in a parameter, a file or a name: 400 naming it; nothing is created."""
    body = '{"name": "sur", "template": "heat_template_version: 2018-08-31\\n", ' + field + "}"
    body = body.replace('"name": "sur", ', "") if field.startswith('"name"') else body
    resp = plane.cp.api("POST", "/v1/stacks", raw=body.encode())
    assert (400, where) == (resp.status, _error(resp.body)["where"]), resp.body
    assert 404 == plane.cp.api("GET", "/v1/stacks/sur").status


def test_a_lone_surrogate_in_a_path_or_query_is_400(plane: Plane) -> None:
    """A percent-encoded lone surrogate (as Python's surrogatepass writes it) in a query: 400 naming it."""
    resp = plane.cp.api("GET", "/v1/deployments?stack=%ED%A0%80")
    assert resp.status in (400, 404), resp.body  # undecodable bytes reach the handler replaced, never raw


def test_a_duplicate_template_key_is_400_naming_key_and_line(plane: Plane) -> None:
    """resources given twice: 400 invalid_template naming the key and its line, as Heat refuses it."""
    text = "heat_template_version: 2018-08-31\nresources: {}\nresources: {}\n"
    resp = plane.cp.create("dup-key", text)
    assert 400 == resp.status
    message = _error(resp.body)["message"]
    assert "duplicate key 'resources'" in message and "line 3" in message


def test_405_names_the_allowed_methods(plane: Plane) -> None:
    """DELETE on /v1/servers: 405 with Allow listing the methods the route takes."""
    resp = plane.cp.api("DELETE", "/v1/servers")
    assert 405 == resp.status
    assert {"GET", "POST"} <= set(resp.headers["Allow"].split(","))


def _raw(cp: ControlPlane, request: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", cp.port), timeout=10)
    s.sendall(request)
    return s


def _read_until_closed(s: socket.socket, bound: float = 20) -> bytes:
    """All the server sends until it closes the connection (bounded: fails after *bound* s)."""
    data = b""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    raise AssertionError(f"the connection stayed open {bound:g} s; got {data[:200]!r}")


def test_after_a_413_the_connection_is_closed_not_drained(plane: Plane) -> None:
    """A body declared over the cap: 413 at once, then the connection closes while the client still sends."""
    head = b"POST /v1/agent/enrol HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
    with _raw(plane.cp, head + b"{" + b" " * 1000) as s:
        answer = _read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"Connection: close" in answer


def test_a_body_that_stalls_gets_408_and_the_connection_closes(plane: Plane) -> None:
    """Half a body, then nothing: 408 after --body-timeout (1 s here), connection closed."""
    body = json.dumps({"name": "slow"}).encode()
    head = f"POST /v1/servers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {plane.cp.token}\r\nContent-Length: {len(body) + 50}\r\n\r\n"
    with _raw(plane.cp, head.encode() + body) as s:
        answer = _read_until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert 404 == plane.cp.api("GET", "/v1/servers/slow").status


def test_an_idle_connection_is_closed_after_the_idle_timeout(plane: Plane) -> None:
    """A connection that sends nothing, and one kept alive after a request, close after --idle-timeout (2 s)."""
    with _raw(plane.cp, b"") as silent:
        assert b"" == _read_until_closed(silent)
    with _raw(plane.cp, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n") as kept:
        assert _read_until_closed(kept).startswith(b"HTTP/1.1 200")


def test_get_file_outside_the_template_directory_warns_or_is_refused(plane: Plane, tmp_path: Path) -> None:
    """get_file of ../x and of an absolute path: uploaded with a warning; --no-upload-outside refuses."""
    (tmp_path / "outside.sh").write_text("#!/bin/sh\necho outside\n")
    here = tmp_path / "stack"
    here.mkdir()
    (here / "inside.sh").write_text("#!/bin/sh\necho inside\n")
    template = here / "t.yaml"
    for ref in ("../outside.sh", str(tmp_path / "outside.sh")):
        template.write_text(
            one_script_deployment("#!/bin/sh\n", server=plane.server_id).replace(
                "config: |\n        #!/bin/sh", f"config: {{get_file: '{ref}'}}\n        #"
            )
        )
        refused = plane.cp.cli("stack", "create", "gf-refused", "-t", str(template), "--no-upload-outside")
        assert 1 == refused.returncode and "outside the template's directory" in refused.stderr, (
            refused.stderr
        )
        assert 404 == plane.cp.api("GET", "/v1/stacks/gf-refused").status
        name = f"gf-{len(ref)}"
        warned = plane.cp.cli("stack", "create", name, "-t", str(template))
        assert 0 == warned.returncode, warned.stderr
        assert "warning" in warned.stderr and "outside the template's directory" in warned.stderr
    template.write_text(
        one_script_deployment("#!/bin/sh\n", server=plane.server_id).replace(
            "config: |\n        #!/bin/sh", "config: {get_file: inside.sh}\n        #"
        )
    )
    inside = plane.cp.cli("stack", "create", "gf-inside", "-t", str(template), "--no-upload-outside")
    assert 0 == inside.returncode and "warning" not in inside.stderr, inside.stderr
