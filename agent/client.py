"""HTTP calls the agent makes: enrol, fetch the document, signal, heartbeat."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from agent import wire_caps
from agent.errors import EnrolError, SourceNotAvailableError
from agent.httpclient import ClientError, Session

log = logging.getLogger(__name__)
#: Whole-request deadline on top of the long-poll wait (seconds).
REQUEST_SLACK = 15.0
#: The most of a signal's or a heartbeat's answer read: its status and a short reason are used.
ANSWER_CAP = 4096
JSON = {"Content-Type": "application/json"}


class Readable(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_capped(stream: Readable, cap: int) -> bytes:
    """The whole body of an aiohttp stream (the relay's, the Swift store's), or its first ``cap + 1`` bytes.

    ``StreamReader.read(n)`` returns what is buffered, up to *n* bytes, not *n* bytes: a
    single call cut every body longer than one network read (about 128 KiB here).
    """
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = await stream.read(cap + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Fetched:
    """A new document, or ``body is None`` when unchanged."""

    etag: str
    body: bytes | None


async def enrol(
    session: Session,
    url: str,
    token: str,
    public_keys: dict[str, str],
    hostname: str,
    found: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    payload = {"token": token, "public_keys": public_keys, "hostname": hostname, "addresses": found or []}
    body = json.dumps(payload).encode()
    try:
        resp = await session.request(
            "POST",
            f"{url.rstrip('/')}/v1/agent/enrol",
            body=body,
            headers=JSON,
            timeout=30,
            cap=wire_caps.MAX_DOCUMENT_BYTES,
        )
    except (ClientError, TimeoutError) as e:
        raise EnrolError(f"cannot reach {url}: {e!r}") from e
    if resp.status != 201:
        raise EnrolError(f"enrolment refused ({resp.status}): {_message(resp.body)}")
    result: dict[str, Any] = json.loads(resp.body)
    return result


async def fetch_document(session: Session, url: str, credential: str, etag: str, wait: float) -> Fetched:
    """One (long-)poll with If-None-Match; the body is capped at MAX_DOCUMENT_BYTES."""
    headers = {"Authorization": f"Bearer {credential}"}
    if etag:
        headers["If-None-Match"] = etag
    polled = f"{url}{'&' if '?' in url else '?'}wait={wait:g}"
    try:
        resp = await session.request(
            "GET", polled, headers=headers, timeout=wait + REQUEST_SLACK, cap=wire_caps.MAX_DOCUMENT_BYTES
        )
    except (ClientError, TimeoutError) as e:
        raise SourceNotAvailableError(f"{url}: {e!r}") from e
    if resp.status == 304:
        return Fetched(resp.headers.get("etag", etag), None)
    if resp.status != 200:
        raise SourceNotAvailableError(f"{url}: {resp.status} {_message(resp.body)}")
    if len(resp.body) > wire_caps.MAX_DOCUMENT_BYTES:
        raise SourceNotAvailableError(f"{url}: document over {wire_caps.MAX_DOCUMENT_BYTES} bytes")
    return Fetched(resp.headers.get("etag", ""), resp.body)


async def send(
    session: Session, verb: str, url: str, body: bytes, headers: dict[str, str]
) -> tuple[int, str]:
    """Deliver one signal; returns the status and a short reason."""
    try:
        resp = await session.request(
            verb, url, body=body, headers={**JSON, **headers}, timeout=30, cap=ANSWER_CAP
        )
    except (ClientError, TimeoutError) as e:
        return 0, repr(e)
    return resp.status, _message(resp.body)


class Heartbeat:
    """Posts heartbeats; one that fails or is refused is logged when the outcome changes, not every beat.

    Where the agent long-polls the control plane itself, each poll tells it the agent is
    alive (heartbeats folded into polls): a beat is then sent only when what it reports
    changed, when asked to (``forced``), or when the last one failed. The addresses' own
    periodic re-assertion (agent/addresses.py) still sends an unchanged report now and then.
    """

    def __init__(self, credential: str) -> None:
        self.credential = credential
        #: The last beat's status, 0 when the control plane was not reached; a new agent starts at "fine".
        self._last = 200
        #: What the last accepted beat said (without ``addresses_changed``); None: send the next one.
        self._said: dict[str, Any] | None = None
        #: Beats sent and left out (for the tests and the bench).
        self.sent = 0
        self.skipped = 0

    def due(self, payload: dict[str, Any], *, polls_say_alive: bool, forced: bool = False) -> bool:
        """Whether *payload* must be sent: always unless the polls say the agent is alive and nothing changed."""
        said = {k: v for k, v in payload.items() if k != "addresses_changed"}
        if forced or not polls_say_alive or said != self._said or payload.get("addresses_changed") is True:
            return True
        self.skipped += 1
        return False

    async def send(self, session: Session, url: str, payload: dict[str, Any]) -> Any:
        """One heartbeat, best effort: its answer, or None (a failure is logged once; the next beat tries again)."""
        headers = {**JSON, "Authorization": f"Bearer {self.credential}"}
        self._said = None  # until accepted: a failed beat is sent again next time
        self.sent += 1
        try:
            resp = await session.request(
                "POST", url, body=json.dumps(payload).encode(), headers=headers, timeout=10, cap=ANSWER_CAP
            )
        except (ClientError, TimeoutError) as e:
            self._note(url, 0, repr(e))
            return None
        self._note(url, resp.status, _message(resp.body))
        if not 200 <= resp.status < 300:
            return None
        self._said = {k: v for k, v in payload.items() if k != "addresses_changed"}
        try:
            return json.loads(resp.body)
        except ValueError:
            return None

    def _note(self, url: str, status: int, reason: str) -> None:
        outcome = 200 if 200 <= status < 300 else status
        if outcome == self._last:
            return
        where = url.partition("?")[0]  # a query could carry a capability: never logged
        if outcome == 200:
            log.info("heartbeats to %s are accepted again", where)
        elif outcome == 0:
            log.warning("heartbeat to %s failed: %s (not logged again until that changes)", where, reason)
        else:
            log.warning(
                "heartbeat to %s answered %s: %s (not logged again until that changes)", where, status, reason
            )
        self._last = outcome


def _message(body: bytes) -> str:
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            return str(obj["error"].get("message"))
    except ValueError:
        pass
    return body[:300].decode("utf-8", "replace")
