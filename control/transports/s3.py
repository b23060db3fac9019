"""S3 (any S3 API, tested against Swift's s3api): presigned GET for documents, PUT for signals.

One bucket ``<prefix>-transport`` holds ``documents/<server id>.json`` and receives
``signals/<deployment id>/<generation>``. Presigned URLs are SigV4 and live at most
7 days (S3's limit); the control plane re-publishes them well before. boto3 is
synchronous: its calls run in a worker thread; presigning is local computation.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.client import Config
from botocore.exceptions import BotoCoreError, ClientError

from agent import wire_caps
from control.transports.store import StoreError, Waiting, signal_name

log = logging.getLogger(__name__)
#: SigV4 presigned URLs live at most this long (seconds).
MAX_PRESIGN = 7 * 24 * 3600
DOCS, SIGNALS = "documents/", "signals/"


@dataclass(frozen=True)
class S3Config:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    bucket: str = "anneal-transport"
    #: Endpoint agents reach the store at (SigV4 signs the host: URLs are presigned for it).
    public_url: str = ""
    poll_interval: float = 5.0


class S3Store:
    kind = "S3"

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self._client = self._make(config.endpoint)
        self._presigner = self._make(config.public_url or config.endpoint)
        self._ready = False
        self._connect: asyncio.Task[None] | None = None

    def _make(self, endpoint: str) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=self.config.access_key,
            aws_secret_access_key=self.config.secret_key,
            region_name=self.config.region,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=10,
                read_timeout=30,
            ),
        )

    def ready(self) -> bool:
        return self._ready

    async def start(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        self._connect = asyncio.create_task(self._connect_loop(on_ready))

    async def close(self) -> None:
        if self._connect is not None:
            self._connect.cancel()
            await asyncio.gather(self._connect, return_exceptions=True)

    async def _connect_loop(self, on_ready: Callable[[], Awaitable[None]]) -> None:
        failures = 0
        while True:
            try:
                await self._call("head_bucket", Bucket=self.config.bucket)
                break
            except StoreError:
                try:
                    await self._call("create_bucket", Bucket=self.config.bucket)
                    break
                except StoreError as e:
                    failures += 1
                    delay = min(30.0, 0.5 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                    log.warning("S3 at %s not ready (%s); retrying in %.1f s", self.config.endpoint, e, delay)
                    await asyncio.sleep(delay)
        self._ready = True
        log.info("S3 ready: bucket %s", self.config.bucket)
        await on_ready()

    async def _call(self, op: str, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(getattr(self._client, op), **kwargs)
        except (BotoCoreError, ClientError) as e:
            raise StoreError(f"S3 {op}: {e}") from e

    def presign(self, op: str, key: str, expires_in: int) -> str:
        url: str = self._presigner.generate_presigned_url(
            op, Params={"Bucket": self.config.bucket, "Key": key}, ExpiresIn=expires_in
        )
        return url

    def section(self, server_id: str, waiting: list[Waiting], expires: int) -> dict[str, Any]:
        lifetime = max(1, min(MAX_PRESIGN, expires - int(time.time())))
        return {
            "kind": self.kind,
            "document_url": self.presign("get_object", f"{DOCS}{server_id}.json", lifetime),
            "expires": int(time.time()) + lifetime,
            "poll_interval": self.config.poll_interval,
            "signals": {
                w.item_id: {
                    "verb": "PUT",
                    "url": self.presign(
                        "put_object", SIGNALS + signal_name(w.deployment_id, w.generation), lifetime
                    ),
                }
                for w in waiting
            },
        }

    async def put_document(self, server_id: str, body: bytes) -> None:
        await self._call(
            "put_object",
            Bucket=self.config.bucket,
            Key=f"{DOCS}{server_id}.json",
            Body=body,
            ContentType="application/json",
        )

    async def delete_document(self, server_id: str) -> None:
        await self._call("delete_object", Bucket=self.config.bucket, Key=f"{DOCS}{server_id}.json")

    async def list_signals(self, limit: int) -> list[str]:
        result = await self._call("list_objects_v2", Bucket=self.config.bucket, Prefix=SIGNALS, MaxKeys=limit)
        return [str(o["Key"])[len(SIGNALS) :] for o in result.get("Contents", [])]

    async def get_signal(self, name: str) -> bytes | None:
        try:
            result = await asyncio.to_thread(
                self._client.get_object, Bucket=self.config.bucket, Key=SIGNALS + name
            )
            body: bytes = await asyncio.to_thread(result["Body"].read, wire_caps.MAX_SIGNAL_BYTES + 1)
            return body
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError(f"S3 get_object {name}: {e}") from e
        except BotoCoreError as e:
            raise StoreError(f"S3 get_object {name}: {e}") from e

    async def delete_signal(self, name: str) -> None:
        await self._call("delete_object", Bucket=self.config.bucket, Key=SIGNALS + name)
