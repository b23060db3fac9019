"""The Swift all-in-one fixture itself: auth, containers, TempURL checks, stop by PID."""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.error
import urllib.request

from tests.support.swift import Swift


def temp_url(swift: Swift, method: str, path: str, key: str, lifetime: int = 300) -> str:
    expires = int(time.time()) + lifetime
    sig = hmac.new(key.encode(), f"{method}\n{expires}\n{path}".encode(), hashlib.sha256).hexdigest()
    return f"{swift.url}{path}?temp_url_sig={sig}&temp_url_expires={expires}"


def status_of(req: urllib.request.Request) -> int:
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        e.close()  # its unread body holds the connection
        return e.code


def test_container_key_temp_urls_open_only_their_object(swift_server: Swift) -> None:
    """A TempURL of the container's key opens its one object; a wrong key or another object gets 401."""
    _, storage = swift_server.auth()
    account_path = storage.removeprefix(swift_server.url)
    status, _, _ = swift_server.request("PUT", "/fx", headers={"X-Container-Meta-Temp-URL-Key": "k1"})
    assert status in (201, 202)
    path = f"{account_path}/fx/obj"
    put = urllib.request.Request(temp_url(swift_server, "PUT", path, "k1"), data=b"body", method="PUT")
    assert status_of(put) == 201
    with urllib.request.urlopen(temp_url(swift_server, "GET", path, "k1"), timeout=30) as resp:
        assert resp.read() == b"body"
    assert status_of(urllib.request.Request(temp_url(swift_server, "GET", path, "wrong"))) == 401
    assert status_of(urllib.request.Request(f"{swift_server.url}{path}")) == 401
    # A PUT URL for one object does not write another.
    other = temp_url(swift_server, "PUT", path, "k1").replace("/fx/obj?", "/fx/other?")
    assert status_of(urllib.request.Request(other, data=b"x", method="PUT")) == 401
    assert swift_server.list_objects("fx") == ["obj"]
