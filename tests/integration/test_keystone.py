"""Keystone tokens on Anneal's Heat API: a real Keystone (PyPI, uwsgi, SQLite, fernet) and the real openstack CLI.

`anneal serve --keystone-url` validates tokens that are none of Anneal's at Keystone, with a
service user, and maps Keystone's roles onto Anneal's; the CLI logs in with a password and finds
Anneal in Keystone's catalogue as the orchestration service, exactly as against Heat.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control.principal import Principal
from control.services.keystone import Keystone, ServiceUser
from tests.support.controlplane import stop_control_plane
from tests.support.keystone import (
    PASSWORD,
    SERVICE_PASSWORD,
    SERVICE_PROJECT,
    SERVICE_USER,
    Cloud,
    KeystoneShare,
    keystone_cloud,
)
from tests.support.openstack import GREETER, start_heat_plane, write_template
from tests.support.processes import free_port
from tests.support.waiting import wait_until

#: A stack with nothing to run: enough to see who may see it.
CONFIG_ONLY = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "cfg": {"type": "OS::Heat::SoftwareConfig", "properties": {"group": "script", "config": "true"}}
    },
}
SERVICE = ServiceUser(SERVICE_USER, SERVICE_PASSWORD, SERVICE_PROJECT)
#: How long the module's control plane believes a validated token (--keystone-cache): short, so a
#: revocation shows within seconds.
CACHE = 1.0


@pytest.fixture(scope="module")
def cloud(keystone_share: KeystoneShare, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    """The run's Keystone and one control plane for the module: users alice (member of blue), rita (reader of
    blue), gus (member of green), the service user anneal; Anneal registered as the orchestration service."""
    users = (("alice", "blue", "member"), ("rita", "blue", "reader"), ("gus", "green", "member"))
    with keystone_cloud(keystone_share, tmp_path_factory, users, CACHE) as found:
        yield found


def _call(url: str, token: str, method: str = "GET", body: Any = None) -> tuple[int, Any, Any]:
    """One request with X-Auth-Token as any HTTP client sends it: (status, JSON body, headers)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"X-Auth-Token": token, "Content-Type": "application/json"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read()), e.headers


def test_password_auth_through_keystone_drives_a_stack_from_create_to_delete(
    cloud: Cloud, tmp_path: Path
) -> None:
    """alice (member of blue) runs `stack create --wait`, list, show, `output show --all`, `delete --wait`
    through Keystone; the stack is in blue's project and its script ran."""
    osc = cloud.cli("alice", "blue")
    path = write_template(tmp_path, "greeter.yaml", GREETER % {"server": "ks-one"})
    created = osc.ok("stack", "create", "-t", path, "--parameter", "who=keystone", "--wait", "ks-one")
    assert "CREATE_COMPLETE" in created
    listed = {s["Stack Name"]: s["Stack Status"] for s in osc.json("stack", "list")}
    assert listed["ks-one"] == "CREATE_COMPLETE"
    shown = osc.json("stack", "show", "ks-one")
    assert shown["parameters"]["OS::project_id"] == cloud.projects["blue"]
    assert shown["links"][0]["href"].startswith(f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks/ks-one/")
    outputs = osc.json("stack", "output", "show", "--all", "ks-one")
    greeting = outputs["greeting"]
    greeting = json.loads(greeting) if isinstance(greeting, str) else greeting
    assert greeting["output_value"] == "hello keystone"
    osc.ok("stack", "delete", "--yes", "--wait", "ks-one")
    token, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    status, body, _ = _call(f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks", token)
    assert status == 200 and "ks-one" not in [s["stack_name"] for s in body["stacks"]]


def _blue_stack(cloud: Cloud, name: str) -> str:
    """A stack alice (member of blue) creates in blue through Heat's API; its stacks URL."""
    url = f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks"
    token, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    status, body, _ = _call(url, token, "POST", {"stack_name": name, "template": CONFIG_ONLY})
    assert status == 201, body
    return url


def test_a_reader_reads_but_cannot_create_and_the_audit_log_names_keystone_users(cloud: Cloud) -> None:
    """rita (reader of blue) lists blue's stacks, alice's among them; her create is refused (403) for her role;
    the audit log names both by their Keystone user, in blue's project."""
    url = _blue_stack(cloud, "ks-read")
    token, _ = cloud.keystone.token("rita", PASSWORD, "blue")
    status, body, _ = _call(url, token)
    assert status == 200 and "ks-read" in [s["stack_name"] for s in body["stacks"]]
    status, body, _ = _call(url, token, "POST", {"stack_name": "ks-reader", "template": CONFIG_ONLY})
    assert status == 403 and "reader" in body["error"]["message"]
    rows = cloud.cp.api("GET", "/v1/audit").body
    seen = {(r["who"], r["method"], r["status"], r["project"]) for r in rows}
    blue = cloud.projects["blue"]
    assert {("keystone:alice", "POST", 201, blue), ("keystone:rita", "POST", 403, blue)} <= seen


def test_a_member_of_another_project_may_not_use_its_path(cloud: Cloud) -> None:
    """gus (member of green) sending his token to blue's path is refused (403), as Heat refuses another tenant's path."""
    url = _blue_stack(cloud, "ks-path")
    token, _ = cloud.keystone.token("gus", PASSWORD, "green")
    status, body, _ = _call(url, token)
    assert status == 403 and cloud.projects["blue"] in body["error"]["message"]


def test_a_member_of_another_project_sees_nothing_of_the_stack(cloud: Cloud) -> None:
    """gus (member of green) in his own project: blue's stack is not in his list and showing it is a 404."""
    _blue_stack(cloud, "ks-hidden")
    green = f"{cloud.heat}/v1/{cloud.projects['green']}/stacks"
    token, _ = cloud.keystone.token("gus", PASSWORD, "green")
    status, body, _ = _call(green, token)
    assert status == 200 and "ks-hidden" not in [s["stack_name"] for s in body["stacks"]]
    assert _call(f"{green}/ks-hidden", token)[0] == 404


def test_keystone_admin_may_use_any_project_and_a_bad_token_gets_keystones_challenge(cloud: Cloud) -> None:
    """Keystone's admin reads blue's stacks from the admin project; a token Keystone does not know is a 401
    in Heat's error body with WWW-Authenticate naming Keystone's URI, as keystonemiddleware answers."""
    admin, _ = cloud.keystone.token("admin", "keystone-admin-secret", "admin")
    status, body, _ = _call(f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks", admin)
    assert status == 200 and isinstance(body["stacks"], list)
    status, body, headers = _call(f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks", "gAAAAAnot-a-token")
    assert status == 401 and body["error"]["type"] == "HTTPUnauthorized"
    assert headers["WWW-Authenticate"] == f'Keystone uri="{cloud.keystone.url}"'


def test_a_token_revoked_in_keystone_stops_working_within_the_cache_bound(cloud: Cloud) -> None:
    """alice's token works; revoked in Keystone, the control plane refuses it (401) once its --keystone-cache
    of 1 s has passed, while a fresh token of hers still works."""
    url = f"{cloud.heat}/v1/{cloud.projects['blue']}/stacks"
    token, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    assert _call(url, token)[0] == 200
    cloud.keystone.revoke(token)
    wait_until(lambda: _call(url, token)[0] == 401, "the revoked token still works", timeout=30, interval=0.5)
    fresh, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    assert _call(url, fresh)[0] == 200


def test_the_validator_believes_a_token_for_its_bound_and_no_longer(cloud: Cloud) -> None:
    """With an injected clock: a revoked token is still believed before cache_seconds have passed, refused
    after; roles map admin -> admin of all projects, member and reader -> that role in the token's project."""
    now = [1_000_000.0]
    validator = Keystone(cloud.keystone.url, SERVICE, cache_seconds=30.0, clock=lambda: now[0])
    alice, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    rita, _ = cloud.keystone.token("rita", PASSWORD, "blue")
    admin, _ = cloud.keystone.token("admin", "keystone-admin-secret", "admin")
    blue = cloud.projects["blue"]

    async def check() -> None:
        try:
            member = Principal(project=blue, role="member", who="keystone:alice")
            assert await validator.principal(alice) == member
            assert await validator.principal(rita) == Principal(
                project=blue, role="reader", who="keystone:rita"
            )
            assert await validator.principal(admin) == Principal(
                project=None, role="admin", who="keystone:admin"
            )
            cloud.keystone.revoke(alice)
            now[0] += 29.9
            assert await validator.principal(alice) == member  # within the bound: believed without asking
            now[0] += 0.2
            assert await validator.principal(alice) is None  # past it: Keystone says revoked
        finally:
            await validator.close()

    asyncio.run(check())


def test_keystone_unreachable_is_a_503_naming_it_and_anneals_own_token_still_works(tmp_path: Path) -> None:
    """Pointed at a port nothing listens on, a Keystone token gets 503 in Heat's error body naming Keystone's
    URL (not 500, not 401), while the admin token, which needs no Keystone, still lists stacks."""
    dead = f"http://127.0.0.1:{free_port()}/v3"
    cp, heat = start_heat_plane(
        tmp_path, "--keystone-url", dead, "--keystone-user", "anneal", env={"ANNEAL_KEYSTONE_PASSWORD": "x"}
    )
    try:
        status, body, headers = _call(f"{heat}/v1/blue/stacks", "gAAAAAsome-keystone-token")
        assert status == 503 and dead in body["error"]["message"]
        assert body["error"]["type"] == "HTTPServiceUnavailable" and headers["Retry-After"] == "5"
        assert _call(f"{heat}/v1/blue/stacks", cp.token)[0] == 200
    finally:
        stop_control_plane(cp)


def _ui(cloud: Cloud, method: str, path: str, body: str = "", cookie: str = "") -> tuple[int, Any]:
    """One web view request on the control plane's listener: (status, headers)."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
    if cookie:
        headers["Cookie"] = cookie
    conn = http.client.HTTPConnection(urllib.parse.urlsplit(cloud.cp.url).netloc, timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.headers
    finally:
        conn.close()


def test_a_web_session_made_from_a_keystone_token_ends_when_keystone_revokes_it(cloud: Cloud) -> None:
    """alice logs in to the web view with her Keystone token; the cookie never shows the token; revoked in
    Keystone, her session's requests are refused once the cache bound has passed (pages go to the login)."""
    token, _ = cloud.keystone.token("alice", PASSWORD, "blue")
    status, headers = _ui(cloud, "POST", "/ui/login", urllib.parse.urlencode({"token": token}))
    assert status == 303, status
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    payload = cookie.partition("=")[2].partition(".")[0]
    assert token not in cookie and token.encode() not in base64.urlsafe_b64decode(payload + "==")
    assert _ui(cloud, "GET", "/ui/api/session", cookie=cookie)[0] == 200
    cloud.keystone.revoke(token)
    wait_until(
        lambda: _ui(cloud, "GET", "/ui/api/session", cookie=cookie)[0] == 401,
        "the session outlived its revoked Keystone token",
        timeout=30,
        interval=0.5,
    )
    status, headers = _ui(cloud, "GET", "/ui/", cookie=cookie)
    assert (status, headers["Location"]) == (303, "/ui/login")
