"""The agent's current source, and the switch between sources.

The newest accepted document names the transport (``anneal.transport``):
``HTTP`` (the control plane, or a relay, long-polled with the agent's
credential), ``SWIFT`` / ``S3`` (GET and PUT URLs that carry their own
signature), or ``LOCAL`` (files on media mounted at ``media_dir``). The agent
switches after it accepted a document naming a new transport; documents and
signals are carried as they are, whatever the transport.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any
from urllib.parse import urlsplit

from agent import client
from agent.config import AgentConfig
from agent.errors import EnrolError, SourceExpiredError
from agent.httpclient import Session
from agent.ledger import Ledger, Outgoing
from agent.transports import file, http, tempurl

log = logging.getLogger(__name__)
STATE_KEY = "transport"
KINDS = ("HTTP", "SWIFT", "S3", "LOCAL", "RELAY")


def backoff(failures: int, cap: float, interval: float = 0.0) -> float:
    """Seconds from the start of the failed request to the next, after *failures* in a row.

    The first wait is twice the source's ordinary *interval* between polls (at least 2 s),
    jittered down to half, so a failing source is never asked more often than a working
    one; it doubles after each failure. Once the doubling reaches *cap* the wait is *cap*
    itself (no jitter below it), so a fleet of N agents in a long outage starts at most
    N / cap requests per second, and each agent tries again within *cap* of the source's
    return (R09). The callers count the wait from the start of the failed request, so a
    request hanging until its timeout is part of the wait, not added to it.
    """
    step = max(2.0, 2.0 * interval) * 2.0 ** (min(failures, 16) - 1)
    return step * random.uniform(0.5, 1.0) if step < cap else cap


def adopt_enrolment(ledger: Ledger, section: Any) -> str:
    """Keep the transport section the enrolment answer names (absent from older control planes).

    The agent's first poll then goes to the transport it is assigned (a store, or
    media), not to the address it enrolled through. Returns the kind it will use.
    """
    if section is None:
        return "HTTP"
    if not isinstance(section, dict) or section.get("kind") not in KINDS:
        raise EnrolError(
            f"enrolment answer: transport must be an object whose kind is one of {', '.join(KINDS)}"
        )
    ledger.set_state(STATE_KEY, json.dumps(section, sort_keys=True))
    ledger.set_state("etag", "")  # ETags belong to one place: fetch afresh from the new one
    return str(section["kind"])


class AgentTransport:
    def __init__(self, config: AgentConfig, ledger: Ledger) -> None:
        self.config = config
        self.ledger = ledger
        raw = ledger.get_state(STATE_KEY)
        self.section: dict[str, Any] = json.loads(raw) if raw else {"kind": "HTTP"}

    @property
    def kind(self) -> str:
        return str(self.section.get("kind") or "HTTP")

    @property
    def carries_progress(self) -> bool:
        """Progress goes only where the control plane (or a relay) answers: a store or media carries
        results, and an agent on one must not reach for the control plane at all."""
        return self.kind in ("HTTP", "RELAY")

    def poll_interval(self) -> float:
        """Seconds between ordinary polls of this source (0: HTTP long-polls back to back)."""
        if self.kind == "HTTP":
            return 0.0
        return float(self.section.get("poll_interval") or 5.0)

    def route(self, url: str) -> str:
        """A control-plane URL as this agent reaches it: through the relay its document names
        (RELAY), or the one it enrolled through."""
        relay = self.section.get("url") if self.kind == "RELAY" else None
        if isinstance(relay, str) and relay:
            control = _origin(self.config.document_url)
            if control and url.startswith(control + "/"):
                return relay.rstrip("/") + url[len(control) :]
        return via(self.config, url)

    def auth_headers(self, routed: str) -> dict[str, str]:
        """The agent's credential, only for the control plane or the relay that carries its requests."""
        mine = [self.config.url.rstrip("/")] if self.config.url else []
        if self.kind == "RELAY" and isinstance(self.section.get("url"), str):
            mine.append(str(self.section["url"]).rstrip("/"))
        if any(routed.startswith(m + "/") for m in mine if m):
            return {"Authorization": f"Bearer {self.config.credential}"}
        return {}  # never to a third party

    def own_signal_url(self, deployment_id: str, generation: int) -> str:
        """The control plane's signal URL of one generation, which this agent's credential opens."""
        return f"{_origin(self.config.document_url)}/v1/signal/{deployment_id}/{generation}"

    async def fetch(self, session: Session, etag: str, wait: float) -> client.Fetched:
        """One poll of the current source; an expired store URL falls back to the control plane once."""
        kind = self.kind
        try:
            if kind in ("SWIFT", "S3"):
                return await tempurl.fetch(session, self.section, etag, wait)
            if kind == "LOCAL":
                return await file.fetch(self.config, self.section, etag, wait)
        except SourceExpiredError as e:
            if not self.config.url:
                raise
            log.warning("%s; asking the control plane for fresh URLs", e)
            fetched = await http.fetch(session, self.config, self.route, "", 0)
            return client.Fetched("", fetched.body)
        return await http.fetch(session, self.config, self.route, etag, wait)

    def accept(self, section: Any) -> bool:
        """Take the transport an accepted document names; True when it changed the source."""
        if not isinstance(section, dict):
            section = {"kind": "HTTP"}
        if self.config.extra.get("enrolment") == "offline" and section.get("kind") in ("HTTP", "RELAY"):
            # Enrolled offline: no URL, no credential. Moving would strand it; stay on the media.
            log.error(
                "the document moves this server to %s, but this agent enrolled offline (no URL, no "
                "credential): staying on %s; re-enrol it with `anneal-agent enrol` to move it",
                section.get("kind"),
                self.kind,
            )
            return False
        changed = bool(section.get("kind") != self.kind)
        if changed:
            log.info("moving from transport %s to %s", self.kind, section.get("kind"))
        self.section = dict(section)
        self.ledger.set_state(STATE_KEY, json.dumps(self.section, sort_keys=True))
        return changed

    async def deliver(self, session: Session, out: Outgoing) -> tuple[int, str]:
        """Send one signal where the current transport says; (status, reason), 0 to retry."""
        target = (self.section.get("signals") or {}).get(out.item_id)
        if target is None and self.kind == "LOCAL":
            target = {"verb": "FILE", "name": _signal_name(out.url)}  # a document that names no file
        if isinstance(target, dict) and target.get("verb") == "FILE":
            return file.deliver(self.config, self.ledger.path.parent, str(target.get("name", "")), out.body)
        if isinstance(target, dict) and isinstance(target.get("url"), str):
            status, reason = await tempurl.deliver(
                session, str(target.get("verb") or "PUT"), target["url"], out.body
            )
            if status != 0 or not out.url:
                return status, reason
            log.warning("%s; trying the control plane's signal URL", reason)  # expired: where reachable
        return await self._send_http(session, out)

    async def _send_http(self, session: Session, out: Outgoing) -> tuple[int, str]:
        url = self.route(out.url)
        return await client.send(session, out.verb, url, out.body, self.auth_headers(url))


def via(config: AgentConfig, url: str) -> str:
    """Rewrite *url* from the control plane's origin to the one the agent enrolled through."""
    control = _origin(config.document_url)
    mine = config.url.rstrip("/")
    if control and mine and control != mine and url.startswith(control + "/"):
        return mine + url[len(control) :]
    return url


def _signal_name(url: str) -> str:
    """``<deployment>/<generation>`` from a control-plane signal URL ``…/v1/signal/<deployment>/<generation>``."""
    _, sep, rest = urlsplit(url).path.partition("/v1/signal/")
    return rest if sep else ""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
