"""The agent's HTTP/1.1 client, on asyncio streams: what a long-polling agent asks of HTTP.

The agent makes a handful of requests: one long-poll at a time, a heartbeat, its signals.
aiohttp's client cost it 14 MiB of resident memory and ~30 ms of start-up (it builds two
SSL contexts on import) for them; this client is the standard library. It keeps idle
connections per origin (a long-poll goes back out on its connection), sends bodies with a
Content-Length, reads bodies by Content-Length, chunked or to the end, at most ``cap + 1``
bytes (the caller refuses longer ones), and speaks TLS only to https URLs, loading ``ssl``
then (``agent.tls``). A connection is never reused after an error, a cut body or a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

from agent import tls

#: The most a status line and headers may take; more is a broken or hostile server.
MAX_HEAD_BYTES = 65536
#: Idle connections kept per origin (a long-poll, a heartbeat, a signal, a progress report).
POOL_SIZE = 4
_NO_BODY = frozenset({204, 304})

Origin = tuple[str, str, int]


class ClientError(Exception):
    """The request failed before a whole response arrived (connection, TLS or protocol)."""


class _ClosedEarly(ClientError):
    """The server closed the connection before the first byte of a response."""


@dataclass(frozen=True)
class Response:
    """A response: status, headers (names lower-cased) and the body, at most ``cap + 1`` bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Session:
    """Requests over kept-alive connections; ``async with Session() as http`` closes them after."""

    def __init__(self, pool_size: int = POOL_SIZE) -> None:
        self.pool_size = pool_size
        self._idle: dict[Origin, list[_Conn]] = {}
        #: Closed: a request still in flight closes its connection when it ends instead of keeping it.
        self._closed = False

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout: float,
        cap: int,
    ) -> Response:
        """One request, the whole of it within *timeout* seconds (TimeoutError after); ClientError when it fails."""
        try:
            origin, head = _head(method, url, body, headers or {})
            async with asyncio.timeout(timeout):
                return await self._exchange(origin, head + body, method, cap)
        except (OSError, EOFError, ValueError, asyncio.LimitOverrunError) as e:
            raise ClientError(f"{method} {_where(url)}: {e!r}") from e

    async def _exchange(self, origin: Origin, data: bytes, method: str, cap: int) -> Response:
        while True:
            conn, reused = await self._connection(origin)
            try:
                conn.writer.write(data)
                await conn.writer.drain()
                response, keep = await _read_response(conn.reader, method, cap)
            except (_ClosedEarly, ConnectionError) as e:
                conn.close()
                if reused:  # the server closed an idle connection as it was reused: a fresh one
                    continue
                raise ClientError(repr(e)) from e
            except BaseException:  # cancelled, timed out, cut off: the connection's state is unknown
                conn.close()
                raise
            if keep and not self._closed and len(self._idle.setdefault(origin, [])) < self.pool_size:
                self._idle[origin].append(conn)
            else:
                conn.close()
            return response

    async def _connection(self, origin: Origin) -> tuple[_Conn, bool]:
        idle = self._idle.get(origin, [])
        while idle:
            conn = idle.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn, True
            conn.close()
        scheme, host, port = origin
        context = tls.context() if scheme == "https" else None
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None, limit=MAX_HEAD_BYTES
        )
        return _Conn(reader, writer), False


def _head(method: str, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[Origin, bytes]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientError(f"{_where(url)}: not an http:// or https:// URL")
    default = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default
    except ValueError as e:
        raise ClientError(f"{_where(url)}: {e}") from e
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    lines = [
        f"{method} {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
        f"Host: {host}{'' if port == default else f':{port}'}",
        "User-Agent: anneal-agent",
        "Accept-Encoding: identity",
    ]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0"):
            raise ClientError(f"{_where(url)}: header {name!r} holds a line break or NUL")
        lines.append(f"{name}: {value}")
    if any(c in lines[0] for c in "\r\n\0") or lines[0].count(" ") != 2:
        raise ClientError(f"{_where(url)}: the path holds a space, a line break or NUL")
    return (parts.scheme, parts.hostname, port), ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_response(reader: asyncio.StreamReader, method: str, cap: int) -> tuple[Response, bool]:
    """The response and whether its connection can carry another request."""
    while True:
        line = await reader.readline()
        if not line:
            raise _ClosedEarly("the connection closed before a response")
        version, _, rest = line.decode("latin-1").partition(" ")
        try:
            status = int(rest[:3])
        except ValueError as e:
            raise ClientError(f"not an HTTP status line: {line[:80]!r}") from e
        headers = await _read_headers(reader, len(line))
        if not 100 <= status < 200:  # an interim answer (100 Continue) is followed by the real one
            break
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in _NO_BODY:
        return Response(status, headers, b""), keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body, whole = await _read_chunked(reader, cap)
    elif "content-length" in headers:
        body, whole = await _read_length(reader, int(headers["content-length"]), cap)
    else:
        body, whole = await _read_to_end(reader, cap), False
    return Response(status, headers, body), keep and whole


async def _read_headers(reader: asyncio.StreamReader, used: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        used += len(line)
        if used > MAX_HEAD_BYTES:
            raise ClientError(f"response head over {MAX_HEAD_BYTES} bytes")
        if not line:
            raise ClientError("the connection closed inside the response head")
        if line in (b"\r\n", b"\n"):
            return headers
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ClientError(f"not a header line: {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()


async def _read_length(reader: asyncio.StreamReader, length: int, cap: int) -> tuple[bytes, bool]:
    if length < 0:
        raise ClientError(f"negative Content-Length {length}")
    if length > cap:
        return await reader.readexactly(cap + 1), False
    return await reader.readexactly(length), True


async def _read_chunked(reader: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    body = bytearray()
    while True:
        size_line = await reader.readline()
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as e:
            raise ClientError(f"not a chunk size: {size_line[:80]!r}") from e
        if size == 0:
            await _read_headers(reader, 0)  # trailers, up to the blank line
            return bytes(body), True
        if len(body) + size > cap:
            body += await reader.readexactly(cap + 1 - len(body))
            return bytes(body), False
        body += await reader.readexactly(size)
        await reader.readexactly(2)  # the CRLF after each chunk


async def _read_to_end(reader: asyncio.StreamReader, cap: int) -> bytes:
    body = bytearray()
    while len(body) <= cap and (chunk := await reader.read(cap + 1 - len(body))):
        body += chunk
    return bytes(body)


def _where(url: str) -> str:
    """*url* without its query: a query may carry a capability (a TempURL signature), never shown."""
    return url.partition("?")[0]
