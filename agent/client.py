"""HTTP calls the agent makes: enrol, fetch the document, signal, heartbeat."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp

from agent import wire_caps
from agent.errors import EnrolError, SourceNotAvailableError

log = logging.getLogger(__name__)
#: Whole-request deadline on top of the long-poll wait (seconds).
REQUEST_SLACK = 15.0


@dataclass(frozen=True)
class Fetched:
    """A new document, or ``body is None`` when unchanged."""

    etag: str
    body: bytes | None


async def enrol(
    session: aiohttp.ClientSession,
    url: str,
    token: str,
    public_keys: dict[str, str],
    hostname: str,
    found: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    payload = {"token": token, "public_keys": public_keys, "hostname": hostname, "addresses": found or []}
    try:
        async with session.post(
            f"{url.rstrip('/')}/v1/agent/enrol", json=payload, timeout=aiohttp.ClientTimeout(total=30)
        ) as resp:
            body = await resp.read()
            if resp.status != 201:
                raise EnrolError(f"enrolment refused ({resp.status}): {_message(body)}")
            result: dict[str, Any] = json.loads(body)
            return result
    except aiohttp.ClientError as e:
        raise EnrolError(f"cannot reach {url}: {e}") from e


async def read_capped(stream: aiohttp.StreamReader, cap: int) -> bytes:
    """The whole body, or its first ``cap + 1`` bytes when longer (the caller refuses those).

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


async def fetch_document(
    session: aiohttp.ClientSession, url: str, credential: str, etag: str, wait: float
) -> Fetched:
    """One (long-)poll with If-None-Match; the body is capped at MAX_DOCUMENT_BYTES."""
    headers = {"Authorization": f"Bearer {credential}"}
    if etag:
        headers["If-None-Match"] = etag
    timeout = aiohttp.ClientTimeout(total=wait + REQUEST_SLACK)
    try:
        async with session.get(url, params={"wait": f"{wait:g}"}, headers=headers, timeout=timeout) as resp:
            if resp.status == 304:
                return Fetched(resp.headers.get("ETag", etag), None)
            if resp.status != 200:
                raise SourceNotAvailableError(f"{url}: {resp.status} {_message(await resp.read())}")
            body = await read_capped(resp.content, wire_caps.MAX_DOCUMENT_BYTES)
            if len(body) > wire_caps.MAX_DOCUMENT_BYTES:
                raise SourceNotAvailableError(f"{url}: document over {wire_caps.MAX_DOCUMENT_BYTES} bytes")
            return Fetched(resp.headers.get("ETag", ""), body)
    except (aiohttp.ClientError, TimeoutError) as e:
        raise SourceNotAvailableError(f"{url}: {e!r}") from e


async def send(
    session: aiohttp.ClientSession, verb: str, url: str, body: bytes, headers: dict[str, str]
) -> tuple[int, str]:
    """Deliver one signal; returns the status and a short reason."""
    try:
        async with session.request(
            verb,
            url,
            data=body,
            headers={"Content-Type": "application/json", **headers},
            timeout=aiohttp.ClientTimeout(total=30),
        ) as resp:
            return resp.status, _message(await resp.content.read(4096))
    except (aiohttp.ClientError, TimeoutError) as e:
        return 0, repr(e)


class Heartbeat:
    """Posts heartbeats; one that fails or is refused is logged when the outcome changes, not every beat."""

    def __init__(self, credential: str) -> None:
        self.credential = credential
        #: The last beat's status, 0 when the control plane was not reached; a new agent starts at "fine".
        self._last = 200

    async def send(self, session: aiohttp.ClientSession, url: str, payload: dict[str, Any]) -> None:
        """One heartbeat, best effort: a failure is logged (once) and the next beat tries again."""
        try:
            async with session.post(
                url,
                json=payload,
                headers={"Authorization": f"Bearer {self.credential}"},
                timeout=aiohttp.ClientTimeout(total=10),
            ) as resp:
                status, body = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            self._note(url, 0, repr(e))
            return
        self._note(url, status, _message(body))

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
