"""Local media: the document is a file on media mounted at ``media_dir``; signals go to ``signal_dir``.

The control plane writes ``<server id>/document.json``; copy that directory to the
media. The agent reads ``<media_dir>/document.json`` (a change of content is a new
document) and writes each signal, signed by the server's key (``offline.sign_signal``),
as ``<deployment id>.<generation>.json`` into
``signal_dir`` (default ``<media_dir>/signals``), for ``anneal signal import``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent import client, crypto, wire, wire_caps
from agent.config import AgentConfig
from agent.errors import SourceNotAvailableError
from agent.fsutil import write_atomic
from agent.transports import offline

DOCUMENT_FILE = "document.json"


def signal_dir(config: AgentConfig) -> Path | None:
    if config.signal_dir:
        return Path(config.signal_dir)
    return Path(config.media_dir) / "signals" if config.media_dir else None


async def fetch(config: AgentConfig, section: dict[str, Any], etag: str, wait: float) -> client.Fetched:
    if not config.media_dir:
        raise SourceNotAvailableError("transport LOCAL needs the agent's --media-dir")
    path = Path(config.media_dir) / DOCUMENT_FILE
    try:
        body = await asyncio.to_thread(_read_capped, path)
    except OSError as e:
        raise SourceNotAvailableError(f"{path}: {e.strerror or e}") from e
    tag = '"' + crypto.sha256(body).hex() + '"'
    if tag != etag:
        return client.Fetched(tag, body)
    if wait > 0:
        await asyncio.sleep(min(wait, float(section.get("poll_interval") or 5.0)))
    return client.Fetched(etag, None)


def _read_capped(path: Path) -> bytes:
    with open(path, "rb") as f:
        body = f.read(wire_caps.MAX_DOCUMENT_BYTES + 1)
    if len(body) > wire_caps.MAX_DOCUMENT_BYTES:
        raise OSError(f"over {wire_caps.MAX_DOCUMENT_BYTES} bytes")
    return body


def file_name(name: str) -> str | None:
    """``<deployment>/<generation>`` as a file name: ``<deployment>.<generation>.json``."""
    dep, sep, gen = name.partition("/")
    if not sep or not dep or not gen.isdigit() or not wire.safe_output_name(dep):
        return None
    return f"{dep}.{gen}.json"


def deliver(config: AgentConfig, state_dir: Path, name: str, body: bytes) -> tuple[int, str]:
    """Write the signal, signed by the server's key, for the media; kept in the ledger's outbox until written."""
    out_dir = signal_dir(config)
    fname = file_name(name)
    if out_dir is None or fname is None:
        return 0, f"no signal directory or bad signal name {name!r}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(out_dir / fname, offline.sign_signal(state_dir, config.server_id, name, body))
    except OSError as e:
        return 0, f"{out_dir / fname}: {e.strerror or e}"
    return 201, f"written to {out_dir / fname}"
