"""The server's network addresses, reported at enrolment and with heartbeats.

Templates read them as the server resource's ``networks``, ``addresses``,
``first_address`` and ``accessIPv4/6`` (Heat's Nova attributes): what iproute2's
``ip -j addr`` lists, every global address of every interface but loopback. A
heartbeat says when they changed (or every ``REASSERT`` beats, in case one was lost),
so the control plane updates the server resources only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

log = logging.getLogger(__name__)
#: Heartbeats between re-assertions of unchanged addresses.
REASSERT = 10
IP_TIMEOUT = 5.0
FAMILIES = {"inet": 4, "inet6": 6}


def parse(text: str) -> list[dict[str, Any]]:
    """``ip -j addr`` output as ``[{interface, addr, version, mac}]``, global scope, no loopback."""
    try:
        links = json.loads(text)
    except ValueError:
        return []
    found = []
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict) or "LOOPBACK" in (link.get("flags") or []):
            continue
        for entry in link.get("addr_info") or []:
            version = FAMILIES.get(entry.get("family"))
            if version is None or entry.get("scope") != "global" or not entry.get("local"):
                continue
            found.append(
                {
                    "interface": str(link.get("ifname") or ""),
                    "addr": str(entry["local"]),
                    "version": version,
                    "mac": str(link.get("address") or ""),
                }
            )
    return found


async def discover() -> list[dict[str, Any]]:
    """This machine's addresses now; [] when iproute2 is missing or fails (logged, not fatal)."""
    # Found on PATH by the exec itself: shutil.which would keep shutil, bz2 and lzma loaded (0.4 MiB).
    try:
        proc = await asyncio.create_subprocess_exec(
            "ip", "-j", "addr", "show", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
    except OSError:  # no iproute2 on PATH (or not executable)
        return []
    try:
        async with asyncio.timeout(IP_TIMEOUT):
            out, _ = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        log.warning("`ip -j addr` did not answer within %s s; no addresses reported", IP_TIMEOUT)
        return []
    return parse(out.decode("utf-8", "replace"))


class Addresses:
    """What the next heartbeat reports: the addresses, and whether they are news."""

    def __init__(self) -> None:
        self._last: list[dict[str, Any]] | None = None
        self._beats = 0

    async def fields(self, *, fresh: bool) -> dict[str, Any]:
        """``addresses`` and ``addresses_changed`` for a heartbeat: looked up anew when *fresh*,
        else the last ones (every heartbeat replaces what the control plane shows of the agent)."""
        if not fresh:
            return {} if self._last is None else {"addresses": self._last, "addresses_changed": False}
        found = await discover()
        self._beats += 1
        news = found != self._last or self._beats % REASSERT == 0
        self._last = found
        return {"addresses": found, "addresses_changed": news}
