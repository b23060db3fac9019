"""Request bodies: the route's cap checked before a byte is read, a deadline, and the JSON checked whole.

* The cap is checked against Content-Length first and counted as the body arrives, so an
  over-cap body is refused after at most one read past the cap (413, connection closed).
* The body must arrive within ``--body-timeout`` seconds (408, connection closed).
* Bodies of unauthenticated requests (enrolment: its token is in the body) must declare their
  length (411) and at most UNAUTHENTICATED_BODIES are read at once; the others wait, within the
  same deadline, and get 503 when it passes. Nothing else is read before its credential is checked.
* The JSON may nest at most MAX_BODY_DEPTH levels and hold only valid Unicode text: NaN,
  Infinity, a key given twice in one object and lone surrogates (``"\\ud800"``) are refused,
  naming the path where it can be known, before anything else sees the value.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from aiohttp import web

from control.api.app_keys import RUNTIME, UNAUTHENTICATED
from control.errors import (
    BadRequestError,
    LengthRequiredError,
    TooLargeError,
    TooSlowError,
    UnavailableError,
)
from control.hot import sharing

#: Unauthenticated bodies read at once (each under its route's cap: 64 KiB for enrolment).
UNAUTHENTICATED_BODIES = 32
#: Nesting allowed in a JSON body; a template given as an object nests at most 100 (hot/loader.py).
MAX_BODY_DEPTH = 128


def unauthenticated_gate() -> asyncio.Semaphore:
    return asyncio.Semaphore(UNAUTHENTICATED_BODIES)


async def read_body(request: web.Request, cap: int | None = None) -> bytes:
    """The whole body, at most *cap* bytes (default: the request cap), read within the body deadline."""
    settings = request.app[RUNTIME].settings
    cap = settings.request_cap if cap is None else min(cap, settings.request_cap)
    declared = request.content_length
    if declared is not None and declared > cap:
        raise TooLargeError(f"body: {declared} bytes is over the cap of {cap} bytes", where="body")
    public = getattr(request.match_info.route.handler, "anneal_auth", None) == "public"
    if public and declared is None and request.body_exists:
        raise LengthRequiredError("body: an unauthenticated request must send Content-Length", where="body")
    phase = "read"
    try:
        async with asyncio.timeout(settings.body_timeout):
            if not public:
                return await _read(request, cap)
            phase = "wait"
            async with request.app[UNAUTHENTICATED]:
                phase = "read"
                return await _read(request, cap)
    except ConnectionError as e:  # the client went away mid-body: nothing to answer, nothing to log
        raise BadRequestError("body: the connection closed before the body was complete", where="body") from e
    except TimeoutError as e:
        if phase == "wait":
            raise UnavailableError(
                "too many unauthenticated uploads at once; retry later", where="body"
            ) from e
        raise TooSlowError(f"body: not received within {settings.body_timeout:g} s", where="body") from e


async def _read(request: web.Request, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.readany()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > cap:
            raise TooLargeError(f"body: over the cap of {cap} bytes", where="body")
        chunks.append(chunk)


def parse_json(raw: bytes, *, shared: bool = False) -> Any:
    """The JSON in *raw*, refused with a 400 naming the path when it is not plain, finite, valid text;
    *shared*: equal parts decoded as one object (a stack's body, which nothing writes into)."""
    if not raw:
        raise BadRequestError("body: a JSON object is required", where="body")
    options: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite}
    try:
        if shared:
            value = sharing.loads(raw, _unique, **options)
        else:
            value = json.loads(raw, object_pairs_hook=_unique, **options)
    except RecursionError as e:
        raise BadRequestError(f"body: nests deeper than {MAX_BODY_DEPTH} levels", where="body") from e
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"body: not JSON: {e}", where="body") from e
    check_json(value, "body")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"the key {twice!r} appears twice in one object")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} does not fit a finite number")
    return value


def check_json(value: Any, root: str) -> None:
    """Refuse nesting past MAX_BODY_DEPTH and strings (keys too) that are not valid Unicode."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            check_text(node, path)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth >= MAX_BODY_DEPTH:
            shown = path if len(path) < 80 else f"{path[:60]}...{path[-10:]}"
            raise BadRequestError(f"{shown}: nests deeper than {MAX_BODY_DEPTH} levels", where=root)
        if isinstance(node, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node))
            continue
        for key, v in node.items():
            check_text(key, f"{path} (a key)")
            stack.append((v, f"{path}.{key}", depth + 1))


def check_text(text: str, where: str) -> None:
    """Refuse *text* holding a lone surrogate: it is no Unicode text, nothing can store or print it."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadRequestError(
            f"{where}: a lone surrogate ({text[e.start]!a}) at character {e.start} is not valid text",
            where=where,
        ) from e


async def read_json(request: web.Request, cap: int | None = None, *, shared: bool = False) -> Any:
    """The JSON body, read under *cap* (default: the request cap) and checked whole."""
    return parse_json(await read_body(request, cap), shared=shared)


async def read_object(
    request: web.Request, cap: int | None = None, *, shared: bool = False
) -> dict[str, Any]:
    """The JSON body, which must be an object; *shared*: a stack's body (parse_json)."""
    body = await read_json(request, cap, shared=shared)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return body


async def read_details(request: web.Request, cap: int = 64 * 1024) -> dict[str, Any]:
    """A signal's optional body: nothing, or a JSON object (an alarm's details)."""
    raw = await read_body(request, cap)
    if not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise BadRequestError("body: expected an object", where="body")
    return body
