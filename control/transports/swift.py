"""Swift: documents as objects read through GET TempURLs, signals PUT through TempURLs.

Two containers, each with its own TempURL key (``X-Container-Meta-Temp-URL-Key``,
derived from the control plane's secret, never the account-wide key):
``<prefix>-documents`` holds ``<server id>.json``; ``<prefix>-signals`` receives
``<deployment id>/<generation>``, one object per waiting deployment generation.
A captured URL reads one document or writes one signal object until it expires.
The control plane authenticates with tempauth/v1 (auth URL, user, key).

Key rotation (``key_rotation`` seconds, 0 for fixed keys): time is cut into epochs of
that length and each epoch has its own key per container. At an epoch's start the
container gets ``Temp-URL-Key`` = the new key and ``Temp-URL-Key-2`` = the previous
one (Swift accepts either); only once Swift took both are URLs signed with the new
key and every document re-published with fresh URLs. The key before that is gone
from the container, which is safe because an epoch is at least a URL's lifetime:
every URL it signed has expired. Any process computes the same keys from the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp

from agent import wire_caps
from agent.client import read_capped
from control.transports.store import StoreError, Waiting, signal_name

log = logging.getLogger(__name__)
TIMEOUT = aiohttp.ClientTimeout(total=30)


@dataclass(frozen=True)
class SwiftConfig:
    auth_url: str
    user: str
    key: str
    container_prefix: str = "anneal"
    #: Scheme and host agents reach the proxy at, when it differs from the storage URL's.
    public_url: str = ""
    #: Seconds between an agent's polls of its document.
    poll_interval: float = 5.0
    #: Seconds between TempURL key rotations; 0 keeps one key per container.
    key_rotation: float = 0.0


def container_key(secret: bytes, container: str, epoch: int | None = None) -> str:
    """The container's TempURL key; with rotation, the key of one *epoch*."""
    label = f"swift-tempurl-key:{container}" + ("" if epoch is None else f":{epoch}")
    return hmac.new(secret, label.encode(), hashlib.sha256).hexdigest()


def temp_url_sig(key: str, method: str, expires: int, path: str) -> str:
    return hmac.new(key.encode(), f"{method}\n{expires}\n{path}".encode(), hashlib.sha256).hexdigest()


class SwiftStore:
    kind = "SWIFT"

    def __init__(self, config: SwiftConfig, secret: bytes) -> None:
        self.config = config
        self.documents = f"{config.container_prefix}-documents"
        self.signals = f"{config.container_prefix}-signals"
        self._secret = secret
        #: The epoch whose keys sign URLs: advanced only after Swift holds its key.
        self.epoch = self.epoch_at(time.time())
        self._token = ""
        self._storage = ""
        self._http: aiohttp.ClientSession | None = None
        self._connect: asyncio.Task[None] | None = None
        self._rotate: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ keys

    def epoch_at(self, now: float) -> int:
        return int(now // self.config.key_rotation) if self.config.key_rotation > 0 else 0

    def key(self, container: str, epoch: int) -> str:
        if self.config.key_rotation <= 0:
            return container_key(self._secret, container)
        return container_key(self._secret, container, epoch)

    def _key_headers(self, container: str, epoch: int) -> dict[str, str]:
        headers = {"X-Container-Meta-Temp-URL-Key": self.key(container, epoch)}
        if self.config.key_rotation > 0:
            headers["X-Container-Meta-Temp-URL-Key-2"] = self.key(container, epoch - 1)
        else:  # no second key left over from a run with rotation
            headers["X-Remove-Container-Meta-Temp-URL-Key-2"] = "x"
        return headers

    async def install_keys(self, epoch: int, method: str = "POST") -> None:
        """Give both containers *epoch*'s key (and the previous one), then sign with it."""
        for container in (self.documents, self.signals):
            await self._request(
                method, f"/{container}", headers=self._key_headers(container, epoch), ok=(201, 202, 204)
            )
        self.epoch = epoch

    # ------------------------------------------------------------ lifecycle

    def ready(self) -> bool:
        return bool(self._storage)

    async def start(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        self._http = aiohttp.ClientSession(timeout=TIMEOUT)
        self._connect = asyncio.create_task(self._connect_loop(on_ready))

    async def close(self) -> None:
        for task in (self._connect, self._rotate):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._http is not None:
            await self._http.close()

    async def _connect_loop(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        """Authenticate and set the containers up; retried until Swift answers."""
        failures = 0
        while True:
            try:
                await self._auth()
                await self.install_keys(self.epoch_at(time.time()), "PUT")
                break
            except StoreError as e:
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                log.warning("Swift at %s not ready (%s); retrying in %.1f s", self.config.auth_url, e, delay)
                await asyncio.sleep(delay)
        log.info("Swift ready: containers %s and %s", self.documents, self.signals)
        if self.config.key_rotation > 0:
            self._rotate = asyncio.create_task(self._rotate_loop(on_ready))
        await on_ready()

    async def _rotate_loop(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        """At each epoch's start: new key into Swift, then every document re-published with it."""
        failures = 0
        while True:
            nxt = self.epoch + 1
            await asyncio.sleep(max(0.0, nxt * self.config.key_rotation - time.time()))
            try:
                await self.install_keys(self.epoch_at(time.time()))
            except StoreError as e:  # the previous key still signs, and Swift still takes it
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                log.warning("Swift: TempURL key rotation failed (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            log.info(
                "Swift: TempURL keys rotated to epoch %d; re-publishing documents with new URLs", self.epoch
            )
            await on_ready()

    # ------------------------------------------------------------ requests

    async def _auth(self) -> None:
        assert self._http is not None
        headers = {"X-Auth-User": self.config.user, "X-Auth-Key": self.config.key}
        try:
            async with self._http.get(self.config.auth_url, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise StoreError(f"Swift auth at {self.config.auth_url} answered {resp.status}")
                token, storage = resp.headers.get("X-Auth-Token"), resp.headers.get("X-Storage-Url")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise StoreError(f"Swift auth at {self.config.auth_url}: {e!r}") from e
        if not token or not storage:
            raise StoreError("Swift auth answered without X-Auth-Token / X-Storage-Url")
        self._token, self._storage = token, storage.rstrip("/")

    async def _request(
        self,
        method: str,
        path: str,
        *,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200, 201, 202, 204),
        cap: int = wire_caps.MAX_DOCUMENT_BYTES,
    ) -> tuple[int, bytes]:
        assert self._http is not None
        for attempt in (1, 2):
            if not self._token:
                await self._auth()
            hdrs = {"X-Auth-Token": self._token, **(headers or {})}
            try:
                async with self._http.request(method, self._storage + path, data=data, headers=hdrs) as resp:
                    body = await read_capped(resp.content, cap)
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError) as e:
                raise StoreError(f"Swift {method} {path}: {e!r}") from e
            if status == 401 and attempt == 1:
                self._token = ""  # expired token: authenticate again, once
                continue
            if status not in ok:
                raise StoreError(f"Swift {method} {path}: {status} {body[:200]!r}")
            return status, body
        raise StoreError(f"Swift {method} {path}: unauthorised")

    # ------------------------------------------------------------ Store

    def temp_url(self, method: str, container: str, obj: str, expires: int) -> str:
        path = urlsplit(self._storage).path + f"/{container}/{quote(obj)}"
        sig = temp_url_sig(self.key(container, self.epoch), method, expires, path)
        base = self.config.public_url.rstrip("/") or _origin(self._storage)
        return f"{base}{path}?temp_url_sig={sig}&temp_url_expires={expires}"

    def section(self, server_id: str, waiting: list[Waiting], expires: int) -> dict[str, Any]:
        signals = {
            w.item_id: {
                "verb": "PUT",
                "url": self.temp_url(
                    "PUT", self.signals, signal_name(w.deployment_id, w.generation), expires
                ),
            }
            for w in waiting
        }
        return {
            "kind": self.kind,
            "document_url": self.temp_url("GET", self.documents, f"{server_id}.json", expires),
            "expires": expires,
            "poll_interval": self.config.poll_interval,
            "signals": signals,
        }

    async def put_document(self, server_id: str, body: bytes) -> None:
        await self._request(
            "PUT",
            f"/{self.documents}/{quote(server_id)}.json",
            data=body,
            headers={"Content-Type": "application/json"},
        )

    async def delete_document(self, server_id: str) -> None:
        await self._request("DELETE", f"/{self.documents}/{quote(server_id)}.json", ok=(204, 404))

    async def list_signals(self, limit: int) -> list[str]:
        _, body = await self._request("GET", f"/{self.signals}?format=json&limit={limit}", ok=(200, 204))
        if not body:
            return []
        try:
            return [str(o["name"]) for o in json.loads(body)]
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(f"Swift listing of {self.signals} is not JSON: {e}") from e

    async def get_signal(self, name: str) -> bytes | None:
        status, body = await self._request(
            "GET", f"/{self.signals}/{quote(name)}", ok=(200, 404), cap=wire_caps.MAX_SIGNAL_BYTES
        )
        return body if status == 200 else None

    async def delete_signal(self, name: str) -> None:
        await self._request("DELETE", f"/{self.signals}/{quote(name)}", ok=(204, 404))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
