"""The operator CLI's REST client: JSON over HTTP with the admin token (stdlib only)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8770"


def api_path(*segments: Any) -> str:
    """``/v1/<segment>/...`` with each segment quoted whole: a name's '/', '?', '#', '%' or '..'
    stays a part of that segment and can never reach another route or add a query."""
    quoted = (urllib.parse.quote(str(s), safe="") for s in segments)
    return "/v1/" + "/".join(q.replace(".", "%2E") if q in (".", "..") else q for q in quoted)


class ClientError(Exception):
    """A request failed; the message is what the operator should read."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Client:
    url: str
    token: str
    #: The project an admin's names resolve in first and its creates go to (``?project=``).
    project: str | None = None

    @classmethod
    def from_env(cls, config_file: str | None = None, project: str | None = None) -> Client:
        """ANNEAL_URL and ANNEAL_TOKEN, else a JSON file {"url", "token"} (ANNEAL_CONFIG); *project*,
        else ANNEAL_PROJECT."""
        url, token = os.environ.get("ANNEAL_URL"), os.environ.get("ANNEAL_TOKEN")
        path = Path(
            config_file or os.environ.get("ANNEAL_CONFIG") or Path.home() / ".config" / "anneal" / "cli.json"
        )
        if (not url or not token) and path.is_file():
            try:
                saved = json.loads(path.read_text())
            except ValueError as e:
                raise ClientError(f"{path}: not JSON: {e}") from e
            url, token = url or saved.get("url"), token or saved.get("token")
        if not token:
            raise ClientError(
                "no admin token: set ANNEAL_TOKEN (the file admin-token in the "
                "control plane's data dir) or write it to " + str(path)
            )
        return cls(
            (url or DEFAULT_URL).rstrip("/"), token, project or os.environ.get("ANNEAL_PROJECT") or None
        )

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        if not path.startswith("/v1") or any(c in path for c in "?# "):
            raise ValueError(f"{path!r}: build API paths with api_path(); the query goes in query=")
        url = self.url + path
        if self.project:
            query = {"project": self.project, **(query or {})}
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 (the operator's own http(s) URL)
            url,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        # The URL is the operator's own control plane (http or https), never from input.
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise ClientError(_error_text(e.read(), e.code), e.code) from e
        except (urllib.error.URLError, OSError) as e:
            raise ClientError(f"cannot reach the control plane at {self.url}: {e}") from e
        return json.loads(raw) if raw else None


def _error_text(raw: bytes, status: int) -> str:
    try:
        err = json.loads(raw)["error"]
        where = f" (at {err['where']})" if err.get("where") else ""
        return f"{err['message']}{where} [HTTP {status}]"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}"
