"""Keystone tokens as callers of Anneal: validated against a real Keystone, cached for a bounded time.

A token that is none of Anneal's is checked with Keystone's ``GET /v3/auth/tokens``
(``X-Subject-Token``), authenticated by a service user's own token (password auth,
project-scoped; Keystone's policy lets a user with the ``service`` or ``admin`` role
validate others' tokens). A valid answer is cached until the sooner of the token's
expiry and ``cache_seconds`` after the check, so a token revoked in Keystone stops
working here within ``cache_seconds``. Keystone's roles map onto Anneal's: ``admin`` ->
admin of every project, ``member`` -> member of the token's project, ``reader`` ->
reader of it (Keystone's implied roles put all three in an admin's token: the highest
wins). Keystone unreachable or refusing the service user is a 503 naming Keystone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp

from control.errors import ForbiddenError, UnavailableError
from control.principal import Principal, Role
from control.runtime import Runtime

log = logging.getLogger(__name__)
#: Keystone's role names, highest first, and Anneal's role for each ("_member_" is Keystone's old member role).
ROLE_MAP: tuple[tuple[str, Role], ...] = (
    ("admin", "admin"),
    ("member", "member"),
    ("_member_", "member"),
    ("reader", "reader"),
)
#: Validated tokens kept at most (oldest dropped first): a flood of distinct tokens cannot grow memory.
CACHE_ENTRIES = 4096
#: A service token is renewed this long before Keystone says it expires (seconds).
RENEW_MARGIN = 60.0
TIMEOUT = aiohttp.ClientTimeout(total=10)


@dataclass(frozen=True)
class ServiceUser:
    """The credential Anneal validates tokens with: a Keystone user with the ``service`` (or ``admin``) role."""

    name: str
    password: str
    project: str
    domain: str = "default"


def principal_of(token: Mapping[str, Any]) -> Principal:
    """Anneal's caller for Keystone's token body; 403 when it carries none of the mapped roles or no project."""
    names = {str(r.get("name")) for r in token.get("roles", []) if isinstance(r, Mapping)}
    role = next((mine for theirs, mine in ROLE_MAP if theirs in names), None)
    user = token.get("user") or {}
    project = token.get("project") or {}
    who = f"keystone:{user.get('name', '?')}"
    if role is None:
        raise ForbiddenError(
            f"the Keystone token of {who} has none of the roles admin, member, reader", where="X-Auth-Token"
        )
    if role != "admin" and not project.get("id"):
        raise ForbiddenError(f"the Keystone token of {who} is not scoped to a project", where="X-Auth-Token")
    return Principal(project=None if role == "admin" else str(project["id"]), role=role, who=who)


def expiry(token: Mapping[str, Any]) -> float:
    """When Keystone's token body says the token expires (epoch seconds); a 503 if it says nothing usable."""
    try:
        return datetime.fromisoformat(str(token["expires_at"]).replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError) as e:
        raise UnavailableError(
            "Keystone answered a token without a valid expires_at", where="keystone"
        ) from e


class Keystone:
    """A client of one Keystone's v3 API that tells what a token stands for; one per control-plane process."""

    def __init__(
        self,
        url: str,
        service: ServiceUser,
        cache_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url.rstrip("/")
        self.service = service
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._cache: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        self._service_token: tuple[str, float] | None = None
        self._login = asyncio.Lock()
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def principal(self, token: str) -> Principal | None:
        """The caller *token* stands for, or None when Keystone says it is not valid (unknown, expired, revoked)."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        self._cache.pop(key, None)
        body = await self._validate(token)
        if body is None:
            return None
        found = principal_of(body)
        self._cache[key] = (found, min(expiry(body), now + self.cache_seconds))
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return found

    async def _validate(self, token: str) -> Mapping[str, Any] | None:
        """Keystone's token body, or None for 404 (not valid); the service token is renewed once on a 401."""
        for attempt in (1, 2):
            headers = {"X-Auth-Token": await self._service(renew=attempt == 2), "X-Subject-Token": token}
            status, body, _ = await self._request("GET", "/auth/tokens?nocatalog", headers=headers)
            found = body.get("token") if isinstance(body, Mapping) else None
            if status == 200 and isinstance(found, Mapping):
                return found
            if status == 404:
                return None
            if status != 401:
                break
        raise UnavailableError(
            f"Keystone at {self.url} refused to validate the token ({status}): check that the service user "
            f"{self.service.name} has the service or admin role",
            where="keystone",
        )

    async def _service(self, renew: bool) -> str:
        """The service user's token, logged in again when it is near expiry or Keystone refused it."""
        async with self._login:
            held = self._service_token
            if held is not None and not renew and held[1] - RENEW_MARGIN > self.clock():
                return held[0]
            auth = {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {"name": self.service.name, "domain": {"id": self.service.domain},
                                          "password": self.service.password}},
                },
                "scope": {"project": {"name": self.service.project, "domain": {"id": self.service.domain}}},
            }  # fmt: skip
            status, body, headers = await self._request("POST", "/auth/tokens?nocatalog", json={"auth": auth})
            token = headers.get("X-Subject-Token", "")
            if status != 201 or not token or not isinstance(body, Mapping):
                raise UnavailableError(
                    f"Keystone at {self.url} refused the service user {self.service.name} "
                    f"(project {self.service.project}): {status}",
                    where="keystone",
                )
            self._service_token = (token, expiry(body.get("token") or {}))
            return token

    async def _request(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any, Mapping[str, str]]:
        """One call to Keystone; unreachable, timed out or a 5xx is a 503 naming Keystone (never a 500)."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=TIMEOUT)
        try:
            async with self._http.request(method, self.url + path, **kwargs) as resp:
                status, headers, raw = resp.status, resp.headers.copy(), await resp.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("Keystone at %s: %s", self.url, e)
            raise UnavailableError(f"Keystone at {self.url} is unreachable: {e}", where="keystone") from e
        if status >= 500:
            raise UnavailableError(f"Keystone at {self.url} answered {status}", where="keystone")
        try:
            return status, json.loads(raw) if raw else None, headers
        except ValueError as e:
            raise UnavailableError(
                f"Keystone at {self.url} answered {status} without JSON", where="keystone"
            ) from e


async def plugged(runtime: Runtime) -> AsyncIterator[None]:
    """Validate tokens at ``--keystone-url`` for the app's lifetime (Runtime.validator; control/api/principal.py)."""
    settings = runtime.settings
    service = ServiceUser(
        settings.keystone_user,
        settings.keystone_password,
        settings.keystone_project,
        settings.keystone_domain,
    )
    keystone = Keystone(settings.keystone_url, service, settings.keystone_cache)
    runtime.validator = keystone.principal
    yield
    runtime.validator = None
    await keystone.close()
