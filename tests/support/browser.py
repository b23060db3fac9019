"""A real headless Chromium driven over the DevTools protocol (a websocket, aiohttp's client).

No WebDriver: Chromium's own protocol gives navigation, script evaluation, screenshots and
the page's console, which is all the web view's test needs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.processes import stop_process

#: Seconds Chromium may take to start listening (a bound on a hang, not a measurement).
START_BOUND = 90.0
#: Records Content-Security-Policy violations in the page (scripts injected over the protocol are not bound by it).
CSP_PROBE = (
    "window.__csp = []; document.addEventListener('securitypolicyviolation',"
    " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def chromium() -> str | None:
    """Debian's chromium (ci/tools.d/72-chromium.sh installs it), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(AssertionError):
    """The browser answered a command with an error, or a page did not get where it should."""


class Page:
    """One tab: send protocol commands, evaluate expressions, wait for conditions."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws, self._ids = ws, itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.console: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._waiting:
                self._waiting.pop(data["id"]).set_result(data)
            elif data.get("method") == "Runtime.exceptionThrown":
                self.console.append(
                    str(data["params"]["exceptionDetails"].get("exception", {}).get("description"))
                )
            elif data.get("method") == "Log.entryAdded" and data["params"]["entry"]["level"] == "error":
                self.console.append(data["params"]["entry"]["text"])

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        await self._ws.send_json({"id": ident, "method": method, "params": params})
        answer = await asyncio.wait_for(future, 20)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        """The value of *expression* in the page (a promise is awaited)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, what: str, timeout: float = 15.0) -> Any:
        """Poll *expression* until it is truthy (bounded); its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            with contextlib.suppress(BrowserError):  # between two documents, evaluation may fail
                value = await self.evaluate(expression)
                if value:
                    return value
            if asyncio.get_running_loop().time() > deadline:
                raise BrowserError(f"timed out waiting for {what}; console: {self.console}")
            await asyncio.sleep(0.1)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", url)

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    async def close(self) -> None:
        await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def open_page(binary: str, profile: Path, width: int = 1280, height: int = 900) -> AsyncIterator[Page]:
    """Start headless Chromium with its own profile in *profile*, open one tab, stop it all after."""
    argv = [
        binary,
        "--headless",
        "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        port = await _debugging_port(profile, proc)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with http.ws_connect(url, max_msg_size=64 * 1024 * 1024) as ws:
                page = Page(ws)
                for domain in ("Page", "Runtime", "Log"):
                    await page.send(f"{domain}.enable")
                await page.send("Page.addScriptToEvaluateOnNewDocument", source=CSP_PROBE)
                try:
                    yield page
                finally:
                    await page.close()
    finally:
        stop_process(proc)


async def _debugging_port(profile: Path, proc: subprocess.Popen[bytes]) -> int:
    """The port Chromium chose, from the DevToolsActivePort file it writes in its profile (bounded wait)."""
    active = profile / "DevToolsActivePort"
    # 90 s: a first start on a 2-core machine at load 10+ (the suite's 4 workers) took over 30.
    deadline = time.monotonic() + START_BOUND
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrowserError(f"chromium exited with {proc.returncode} before listening")
        if active.exists() and active.read_text().strip():
            return int(active.read_text().split()[0])
        await asyncio.sleep(0.1)
    raise BrowserError(f"chromium did not write DevToolsActivePort within {START_BOUND:g} s")
