"""TLS only for an agent that speaks it: ``ssl`` (about 4 MiB resident) is not loaded for http:// alone.

asyncio imports ``ssl`` when it is imported itself, whether a connection ever uses it or not.
``withhold`` (called by ``anneal-agent run`` before asyncio is imported, when every URL the
agent knows is http://) makes that import find nothing, as on a Python built without ssl;
asyncio is made for that. An https URL met later (a document moving the agent to a store
over https, an https signal URL) cannot be served by that process: ``context`` then calls
the hook the agent set, which restarts the agent in place with ``ssl`` (``agent.commands``),
and the request fails meanwhile like any unreachable one, to be retried.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

#: Set by an agent that restarts itself for TLS (``agent.commands``): the new process loads ``ssl``.
RESTART_ENV = "ANNEAL_AGENT_TLS"
#: Called once when an https URL is met while ``ssl`` is withheld.
on_needed: Callable[[], None] | None = None
_context: list[ssl.SSLContext] = []


class TlsWithheldError(OSError):
    """An https URL in an agent started without ``ssl``: it restarts with it."""


def withhold() -> bool:
    """Keep ``ssl`` out of this process; False when asyncio (so ssl) is loaded already."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return False
    sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` raises ImportError from now on
    return True


def withheld() -> bool:
    return "ssl" in sys.modules and sys.modules["ssl"] is None


def needed(texts: Iterable[str]) -> bool:
    """True when any of *texts* (URLs, or JSON holding URLs) names an https URL."""
    return any("https:" in text.lower() for text in texts)


def in_files(paths: Iterable[Path]) -> bool:
    """True when any of the files (absent ones are skipped) holds ``https:`` in any case."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                tail = b""
                while chunk := f.read(1 << 20):
                    if b"https:" in (tail + chunk).lower():
                        return True
                    tail = chunk[-5:]
        except FileNotFoundError:
            continue
    return False


def context() -> ssl.SSLContext:
    """The default client context (the system's CA certificates, SSL_CERT_FILE), made once."""
    if withheld():
        if on_needed is not None:
            on_needed()
        raise TlsWithheldError("an https URL, and this agent started without TLS: it restarts with it")
    if not _context:
        import ssl  # noqa: PLC0415 - loaded for https only (module docstring)

        _context.append(ssl.create_default_context())
    return _context[0]
