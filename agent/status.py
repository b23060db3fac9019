"""`anneal-agent status`: the agent's view, read from its state dir only (no network).

Transport, last document serial and age, each deployment with its ledger state,
the signals still queued. Text for people, ``--json`` for programs.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

from agent.loop import Agent


def _redact(url: str) -> str:
    """Signal and metadata URLs are capabilities: show where they go, not the secret."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "…" if parts.query else "", ""))


def _transport(agent: Agent, mode: str) -> dict[str, str]:
    """Where the agent reads its documents now: the kind its newest document named, and the place."""
    if mode == "heat-compat":
        return {
            "kind": "request collector (os-collect-config)",
            "document_url": _redact(agent.config.document_url),
        }
    t = agent.transport
    if t.kind == "LOCAL":
        media = agent.config.media_dir
        return {"kind": "LOCAL media", "document_url": f"{media}/document.json" if media else ""}
    if t.kind in ("SWIFT", "S3"):
        return {"kind": t.kind, "document_url": _redact(str(t.section.get("document_url") or ""))}
    url = t.route(agent.config.document_url) if agent.config.document_url else ""
    return {"kind": f"{t.kind} long-poll", "document_url": _redact(url)}


def view(agent: Agent) -> dict[str, Any]:
    ledger, now = agent.ledger, time.time()
    raw = agent.status()
    at = ledger.get_state("document_at")
    mode = raw.get("mode", "anneal")
    out: dict[str, Any] = {
        "mode": mode,
        "server_id": agent.config.server_id,
        "transport": _transport(agent, mode),
        "document": {
            "serial": int(ledger.get_state("serial", "0") or 0),
            "received_at": float(at) if at else None,
            "age_seconds": round(now - float(at), 1) if at else None,
        },
        "deployments": [
            {
                "name": e.name,
                "item_id": e.item_id,
                "deployment_id": e.deployment_id,
                "generation": e.generation,
                "action": e.action,
                "state": e.state,
                "status_code": e.status_code,
                "note": e.note,
            }
            for e in ledger.entries()
        ],
        "queued_signals": [
            {**s, "url": _redact(s["url"]), "next_in_seconds": round(max(0.0, s["next_at"] - now), 1)}
            for s in ledger.pending()
        ],
    }
    for key, value in raw.items():  # policy, pinned key, expiry, frozen, rejections, counts, ...
        if key not in out:
            out[key] = value
    return out


def render(v: dict[str, Any]) -> str:
    doc = v["document"]
    age = "never" if doc["age_seconds"] is None else f"{doc['age_seconds']:g} s ago"
    lines = [
        f"mode:       {v['mode']}" + (f" ({v['rule']})" if v.get("rule") else ""),
        f"server:     {v['server_id'] or '-'}",
        f"transport:  {v['transport']['kind']} {v['transport']['document_url'] or '-'}",
        f"document:   serial {doc['serial']}, received {age}"
        + (f", expires {v['document_expires_at']}" if v.get("document_expires_at") else "")
        + (" (FROZEN: expired, nothing runs)" if v.get("frozen") else ""),
        f"policy:     {v.get('document_policy', '-')}"
        + (f", trusted key {v['trusted_key_id']}" if v.get("trusted_key_id") else ""),
        f"deployments ({len(v['deployments'])}):",
    ]
    if full := v.get("disk_full"):
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(full["since"]))
        lines.insert(-1, f"DISK FULL:  {full['message']} (since {since}, {full['tries']} tries)")
    for d in v["deployments"]:
        code = "" if d["status_code"] is None else f" code {d['status_code']}"
        note = f" ({d['note']})" if d["note"] else ""
        gen = f" gen {d['generation']}" if d["generation"] else ""
        lines.append(
            f"  {d['name'] or '-':<24} {d['item_id'][:8]}{gen} {d['action']:<7} {d['state']}{code}{note}"
        )
    rejected = v.get("rejections") or {}
    if rejected.get("counts"):
        lines.append(f"refused documents: {rejected['counts']}")
        lines.extend(f"  {r['kind']}: {r['reason']}" for r in rejected.get("last", [])[-3:])
    lines.append(f"queued signals ({len(v['queued_signals'])}):")
    for s in v["queued_signals"]:
        lines.append(
            f"  #{s['id']} {s['verb']} {s['url']} for {s['item_id'][:8]}: {s['attempts']} attempts,"
            f" next in {s['next_in_seconds']:g} s; last: {s['last_outcome'] or '-'}"
        )
    return "\n".join(lines)
