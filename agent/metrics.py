"""`anneal-agent run --metrics-listen`: what `anneal-agent status --json` knows, for Prometheus.

The text format (version 0.0.4) is written here by hand: the agent's dependencies stay
aiohttp and cryptography. The port answers ``GET /metrics`` only, on asyncio streams
(as the agent's HTTP client is), and asks no token: it listens on loopback unless told.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The request head a scrape may send (bytes) and the seconds it may take.
MAX_HEAD = 8192
HEAD_TIMEOUT = 5.0
#: One sample: (label name -> value, value).
Sample = tuple[Mapping[str, str], float]


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> str:
    """One metric family in the text format: its HELP and TYPE lines, then a line per sample."""
    help_text = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{inner}}} {_number(value)}" if inner else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


def exposition(view: Mapping[str, Any]) -> str:
    """The metrics of one agent from its status view (``agent.status.view``)."""
    doc = view.get("document") or {}
    rejected = (view.get("rejections") or {}).get("counts") or {}
    queued = view.get("queued_signals") or []
    info = {
        "server_id": str(view.get("server_id") or ""),
        "mode": str(view.get("mode") or ""),
        "transport": str((view.get("transport") or {}).get("kind") or ""),
        "policy": str(view.get("document_policy") or ""),
    }
    parts = [
        family(
            "anneal_agent_info",
            "gauge",
            "The agent's server, mode, transport and document policy.",
            [(info, 1)],
        ),
        family(
            "anneal_agent_document_serial",
            "gauge",
            "Serial of the newest document accepted.",
            [({}, doc.get("serial") or 0)],
        ),
        family(
            "anneal_agent_generations",
            "gauge",
            "Deployment generations in the ledger by state: received, started, finished, signalled.",
            [({"state": str(s)}, n) for s, n in sorted((view.get("generations") or {}).items())],
        ),
        family(
            "anneal_agent_signals_queued",
            "gauge",
            "Signals in the outbox not yet acknowledged.",
            [({}, len(queued))],
        ),
        family(
            "anneal_agent_signal_attempts_max",
            "gauge",
            "The most send attempts of a queued signal (0: none queued).",
            [({}, max((s.get("attempts") or 0 for s in queued), default=0))],
        ),
        family(
            "anneal_agent_documents_refused_total",
            "counter",
            "Documents refused since enrolment, by check (signature, expiry, serial, server, ...).",
            [({"kind": str(k)}, n) for k, n in sorted(rejected.items())],
        ),
        family(
            "anneal_agent_document_frozen",
            "gauge",
            "1 when the document expired and nothing runs.",
            [({}, bool(view.get("frozen")))],
        ),
        family(
            "anneal_agent_disk_full",
            "gauge",
            "1 while the state dir is full.",
            [({}, bool(view.get("disk_full")))],
        ),
    ]
    if doc.get("age_seconds") is not None:
        parts.append(
            family(
                "anneal_agent_document_age_seconds",
                "gauge",
                "Seconds since the newest document arrived.",
                [({}, doc["age_seconds"])],
            )
        )
    return "".join(parts)


def check_listen(listen: str, public: bool) -> tuple[str, int]:
    """HOST:PORT to listen on; a host off loopback only with *public* (the port asks no token)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics-listen {listen!r}: expected HOST:PORT")
    if not (public or host == "localhost" or _loopback_address(host)):
        raise ValueError(
            f"--metrics-listen {listen!r}: {host} is not a loopback address, and this port answers "
            "without a token; use 127.0.0.1:PORT, or add --metrics-public to serve it there anyway"
        )
    return host, int(port)


def _loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _scrape(read_view: Callable[[], Mapping[str, Any]]) -> tuple[str, str, str]:
    """(status line, body, content type) of a scrape; a ledger that cannot be read is a 500, logged."""
    try:
        return "200 OK", exposition(read_view()), CONTENT_TYPE
    except Exception as e:  # the state dir full or locked: the scraper sees the failure, the agent goes on
        log.warning("metrics: reading the agent's state failed: %s", e)
        return "500 Internal Server Error", f"reading the agent's state failed: {e}\n", "text/plain"


async def serve(host: str, port: int, read_view: Callable[[], Mapping[str, Any]]) -> asyncio.Server:
    """Answer ``GET /metrics`` on HOST:PORT with the exposition of ``read_view()``, one request per connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = (head.split(b"\r\n", 1)[0].decode("latin-1") + "  ").split(" ", 2)
            if target.split("?", 1)[0] != "/metrics":
                status, body, kind = "404 Not Found", "only /metrics is served here\n", "text/plain"
            elif method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", "GET /metrics\n", "text/plain"
            else:
                status, body, kind = _scrape(read_view)
            data = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
                f"Connection: close\r\n\r\n".encode()
                + (b"" if method == "HEAD" else data)
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a slow, oversized or vanished client gets no answer
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port, limit=MAX_HEAD)
