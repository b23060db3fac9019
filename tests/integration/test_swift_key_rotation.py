"""Swift TempURL key rotation against the real Swift: no agent loses access, the old key is retired.

`--swift-key-rotation 10` with URLs living 6 s + 2 s margin: every 10 s both containers get
a new `Temp-URL-Key` (the previous one moves to `Temp-URL-Key-2`) and every document is
re-published with URLs under the new key. A real agent polls its document through Swift
the whole time and runs an update in each epoch; it must never meet a refused URL. The
test also signs its own long-lived URL with an epoch's key (from the control plane's
secret): Swift takes it for two epochs and refuses it after, whatever its expiry.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from control.transports.swift import container_key, temp_url_sig
from tests.support.agents import agent_log
from tests.support.controlplane import ControlPlane, serve_once, start_control_plane, stop_control_plane
from tests.support.swift import Swift, running_swift, swift_args
from tests.support.templates import said_stack

TEMPLATE = said_stack("POLL_TEMP_URL")
EPOCH = 10.0


@pytest.fixture(scope="module")
def swift_server() -> Iterator[Swift]:
    """A Swift of this module's own: the rotations change its containers' keys under the agents."""
    with running_swift() as swift:
        yield swift


@pytest.fixture
def cp(swift_server: Swift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    monkeypatch.setenv("ANNEAL_SWIFT_KEY", swift_server.key)
    plane = start_control_plane(
        tmp_path,
        *swift_args(swift_server, "krot", "--store-url-lifetime=6", "--store-clock-margin=2"),
        f"--swift-key-rotation={EPOCH:g}",
    )
    yield plane
    stop_control_plane(plane)


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        e.close()  # its unread body holds the connection
        return int(e.code)


def mid_epoch() -> int:
    """Wait until well inside an epoch (away from a rotation) and return it."""
    while not 2.5 < time.time() % EPOCH < 7.5:
        time.sleep(0.2)
    return int(time.time() // EPOCH)


def test_tempurl_keys_rotate_without_any_agent_losing_access(cp: ControlPlane, swift_server: Swift) -> None:
    """TempURL keys rotate under running updates; no agent URL is refused, and retired keys stop working."""
    assert 201 == cp.create("kr", TEMPLATE).status
    assert "CREATE_COMPLETE" == cp.wait_stack("kr", timeout=120)["status"]
    server_id = cp.api("GET", "/v1/servers/kr-box").body["id"]
    secret = bytes.fromhex((cp.data_dir / "signal-key").read_text().strip())
    path = f"/v1/AUTH_test/krot-documents/{server_id}.json"

    def url_under(epoch: int) -> str:
        key = container_key(secret, "krot-documents", epoch)
        expires = int(time.time() + 3600)  # far beyond any lifetime: only the key can make it fail
        return f"{swift_server.url}{path}?temp_url_sig={temp_url_sig(key, 'GET', expires, path)}&temp_url_expires={expires}"

    first = mid_epoch()
    assert 200 == status_of(url_under(first))
    assert 200 == status_of(url_under(first - 1))  # the previous key is still accepted
    assert 401 == status_of(url_under(first + 5))  # a key Swift was never given

    # Three epochs of updates: each runs through Swift while the keys change under it.
    for step in range(3):
        body = {"template": TEMPLATE, "parameters": {"message": f"epoch{step}"}}
        assert 202 == cp.api("PUT", "/v1/stacks/kr", body).status
        assert "UPDATE_COMPLETE" == cp.wait_stack("kr", timeout=120)["status"]
        assert {"said": f"said epoch{step}"} == cp.outputs("kr")
        while int(time.time() // EPOCH) == first + step:
            time.sleep(0.2)
    now = mid_epoch()
    assert now >= first + 2
    assert 401 == status_of(url_under(first))  # retired: two rotations later
    assert 200 == status_of(url_under(now))
    assert 200 == status_of(url_under(now - 1))
    assert cp.log.read_text().count("TempURL keys rotated") >= 2
    agent = agent_log(cp, "kr-box")
    assert "store refused" not in agent  # no document or signal URL ever refused
    assert "asking the control plane for fresh URLs" not in agent


def test_a_rotation_shorter_than_a_url_lifetime_is_refused(tmp_path: Path) -> None:
    """`anneal serve` refuses a Swift key rotation shorter than a URL's lifetime: exit 2, naming both."""
    out = serve_once(
        tmp_path,
        "--swift-auth-url=http://127.0.0.1:1/auth/v1.0",
        "--swift-key-rotation=60",
        "--store-url-lifetime=3600",
    )
    assert 2 == out.returncode
    assert "--swift-key-rotation 60 s is shorter than a URL's lifetime (4500 s" in out.stderr
