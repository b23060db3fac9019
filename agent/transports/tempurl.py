"""Swift TempURLs and S3 presigned URLs: plain HTTP, the signature is in the URL.

The document URL is polled every ``poll_interval`` seconds with ``If-None-Match``;
a 401/403 means the URL expired (or the clock is off): the caller asks the
control plane for fresh ones. Signals are PUT to their own per-deployment URL.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent import client, wire_caps
from agent.errors import SourceExpiredError, SourceNotAvailableError
from agent.httpclient import ClientError, Session

#: Statuses of a store that mean "this URL no longer works" rather than "try again".
EXPIRED = frozenset({401, 403})


async def fetch(session: Session, section: dict[str, Any], etag: str, wait: float) -> client.Fetched:
    url = section.get("document_url")
    if not isinstance(url, str) or not url:
        raise SourceExpiredError(f"transport {section.get('kind')} names no document_url")
    headers = {"If-None-Match": etag} if etag else {}
    try:
        resp = await session.request(
            "GET", url, headers=headers, timeout=30, cap=wire_caps.MAX_DOCUMENT_BYTES
        )
    except (ClientError, TimeoutError) as e:
        raise SourceNotAvailableError(f"store: {e!r}") from e
    if resp.status == 200:
        if len(resp.body) > wire_caps.MAX_DOCUMENT_BYTES:
            raise SourceNotAvailableError(f"store document over {wire_caps.MAX_DOCUMENT_BYTES} bytes")
        return client.Fetched(resp.headers.get("etag", ""), resp.body)
    if resp.status in EXPIRED:
        raise SourceExpiredError(f"store refused the document URL ({resp.status}): expired?")
    if resp.status != 304:
        raise SourceNotAvailableError(f"store answered {resp.status} for the document")
    fetched = client.Fetched(etag, None)
    interval = float(section.get("poll_interval") or 5.0)
    if wait > 0:
        await asyncio.sleep(min(wait, interval))
    return fetched


async def deliver(session: Session, verb: str, url: str, body: bytes) -> tuple[int, str]:
    """PUT the signal; an expired URL is retried (a fresh one comes with the next document)."""
    status, reason = await client.send(session, verb, url, body, {})
    if status in EXPIRED or status == 404:
        return 0, f"store refused the signal URL ({status}): expired?"
    return status, reason
