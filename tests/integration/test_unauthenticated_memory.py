"""Unauthenticated uploads cannot pin the control plane's memory.

Before, enrolment and a signal with any ``?sig=`` were read up to the 2 MiB request cap before
their own checks: 200 held uploads took RSS from 105 to 599 MB, never returned. Now the signal's
signature is checked before a byte of its body is read, a declared length over the route's cap is
refused at once (413, connection closed), and at most a few enrolment bodies are read at a time.
The test holds 200 such uploads open (half enrolments, half signals with a wrong signature; half
declaring the request cap, half just under the route's cap and stalling midway) and reads the
control plane's RSS from /proc.
"""

from __future__ import annotations

import socket
import time
from contextlib import ExitStack
from pathlib import Path

from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

UPLOADS = 200
REQUEST_CAP = 2 * 1024 * 1024
#: What one upload sends before it stalls, at most (its socket may take less).
SEND = 1024 * 1024


def rss(pid: int) -> int:
    """Resident set size of *pid* in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _upload(cp: ControlPlane, path: str, declared: int, stack: ExitStack) -> socket.socket:
    """Headers declaring *declared* bytes, then as much of the body as the socket takes now, up to SEND."""
    s = stack.enter_context(socket.create_connection(("127.0.0.1", cp.port), timeout=10))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    s.sendall(head)
    s.setblocking(False)
    chunk = b"x" * 65536
    sent = 0
    while sent < min(SEND, declared - 1):
        try:
            sent += s.send(chunk[: min(len(chunk), declared - 1 - sent)])
        except (BlockingIOError, ConnectionError):
            break
    return s


def _answer(s: socket.socket) -> str:
    """The status line the server sent, if any yet."""
    try:
        data = s.recv(200)
    except BlockingIOError:
        return ""
    except ConnectionError:
        return "reset"
    return data.split(b"\r\n", 1)[0].decode("ascii", "replace")


def test_held_unauthenticated_uploads_pin_under_50_mb(tmp_path: Path) -> None:
    """200 held enrolment and wrong-signature signal uploads grow the control plane's RSS by under 50 MB."""
    cp = start_control_plane(tmp_path, "--provisioner", "enrol")
    try:
        for _ in range(20):  # warm up: the first requests load code and fill caches
            cp.api("GET", "/v1/health", token=None)
            cp.api("POST", "/v1/agent/enrol", {"token": "x", "public_keys": {}}, token=None)
        before = rss(cp.proc.pid)
        routes = [
            ("/v1/agent/enrol", 60 * 1024),
            ("/v1/signal/some-deployment/1?sig=" + "ab" * 32, 1024 * 1024 - 1),
        ]
        with ExitStack() as stack:
            socks = []
            for i in range(UPLOADS):
                path, under_cap = routes[i % 2]
                socks.append(_upload(cp, path, REQUEST_CAP if i % 4 < 2 else under_cap, stack))
            peak = before
            for _ in range(10):  # the uploads stay open; the server has seconds to buffer what it would
                time.sleep(0.3)
                peak = max(peak, rss(cp.proc.pid))
            answers = [_answer(s) for s in socks]
        grown = peak - before
        statuses = {a: answers.count(a) for a in sorted(set(answers))}
        print(
            f"\n{UPLOADS} held uploads: RSS {before / 2**20:.1f} -> {peak / 2**20:.1f} MiB (+{grown / 2**20:.1f}); answers {statuses}"
        )
        assert grown < 50 * 2**20
        assert sum("403" in a for a in answers) == UPLOADS // 2  # every signal: wrong signature, body unread
        assert sum("413" in a for a in answers) == UPLOADS // 4  # every enrolment declaring the request cap
        assert 201 == cp.api("POST", "/v1/servers", {"name": "after"}).status  # and it still works
        log = cp.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-4000:]
    finally:
        stop_control_plane(cp)
