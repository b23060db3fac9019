"""The control plane's own document endpoint (or a relay's): long-poll with the agent's credential."""

from __future__ import annotations

from collections.abc import Callable

from agent import client
from agent.config import AgentConfig
from agent.httpclient import Session


async def fetch(
    session: Session, config: AgentConfig, route: Callable[[str], str], etag: str, wait: float
) -> client.Fetched:
    return await client.fetch_document(session, route(config.document_url), config.credential, etag, wait)
