"""The web view on a stack of many resources: its graph and lists against the REST API's own list.

A stack of RESOURCES resources (one OS::Heat::Value that OS::Heat::None resources all depend on)
is created through the API; then each answer the stack page needs is timed (median of ROUNDS):
the graph (aggregated by type above the view's limit), the first and last page of the resource
list, and, when Debian's chromium is installed, the page itself in a headless browser until its
graph is drawn and at rest. The baseline, measured in the same run, is the REST API's
`GET /v1/stacks/NAME/resources` (every row at once). Run: `.venv/bin/python -m bench.ui_scale
[--resources 10000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from http.cookiejar import CookieJar
from pathlib import Path

from bench.harness import start_plane
from tests.support.browser import chromium, open_page
from tests.support.controlplane import ControlPlane, stop_control_plane

ROUNDS = 5
PER_PAGE = 100
#: True when the graph has drawn and is neither reading nor laying out (as the browser test waits).
AT_REST = (
    "window.annealGraph && annealGraph.nodes().length > 0"
    " && Number(document.getElementById('graph').dataset.busy || 0) === 0"
)


def wide_template(resources: int) -> str:
    """One value and resources - 1 None resources depending on it (short names: the template cap is 512 KiB)."""
    lines = [
        "heat_template_version: 2018-08-31",
        "resources:",
        "  f: {type: OS::Heat::Value, properties: {value: a}}",
    ]
    lines += [f"  n{i}: {{type: OS::Heat::None, depends_on: f}}" for i in range(resources - 1)]
    return "\n".join(lines) + "\n"


def median_seconds(fetch: Callable[[], bytes]) -> tuple[float, int]:
    """The median time of ROUNDS calls of *fetch*, and the size of its answer in bytes."""
    times, size = [], 0
    for _ in range(ROUNDS):
        began = time.monotonic()
        size = len(fetch())
        times.append(time.monotonic() - began)
    return statistics.median(times), size


def ui_opener(cp: ControlPlane) -> urllib.request.OpenerDirector:
    """An HTTP client logged in to the web view (its session cookie in a jar)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    form = urllib.request.Request(cp.url + "/ui/login", data=f"token={cp.token}".encode(), method="POST")
    with opener.open(form, timeout=60) as answer:
        answer.read()
    return opener


async def browser_seconds(cp: ControlPlane, binary: str, profile: Path) -> tuple[float, int]:
    """Seconds from navigating to the stack page to its graph at rest, and the nodes drawn."""
    async with open_page(binary, profile) as page:
        await page.goto(cp.url + "/ui/login")
        await page.evaluate(f"document.getElementById('token').value = '{cp.token}'")
        await page.evaluate("document.getElementById('login').submit(); true")
        await page.wait_for("location.pathname === '/ui/' && document.readyState === 'complete'", "login")
        times, nodes = [], 0
        for _ in range(ROUNDS):
            began = time.monotonic()
            await page.goto(cp.url + "/ui/stacks/wide")
            nodes = await page.wait_for(f"({AT_REST}) && annealGraph.nodes().length", "the graph", 120)
            times.append(time.monotonic() - began)
        return statistics.median(times), int(nodes)


def measure(cp: ControlPlane, resources: int, work: Path) -> list[tuple[str, float, int]]:
    """(what, median seconds, bytes or nodes) for the baseline first, then the web view's answers."""

    def get(path: str, opener: urllib.request.OpenerDirector | None = None) -> Callable[[], bytes]:
        headers = {} if opener else {"Authorization": f"Bearer {cp.token}"}
        request = urllib.request.Request(cp.url + path, headers=headers)
        client = opener or urllib.request.build_opener()

        def fetch() -> bytes:
            with client.open(request, timeout=120) as answer:
                return bytes(answer.read())

        return fetch

    ui = ui_opener(cp)
    last = (resources + PER_PAGE - 1) // PER_PAGE
    rows = [
        ("REST API: all resources (baseline)", *median_seconds(get("/v1/stacks/wide/resources"))),
        ("web view: graph data", *median_seconds(get("/ui/api/stacks/wide/graph", ui))),
        (
            "web view: first page of resources",
            *median_seconds(get(f"/ui/api/stacks/wide/resources?page=1&per_page={PER_PAGE}", ui)),
        ),
        (
            f"web view: page {last} of resources",
            *median_seconds(get(f"/ui/api/stacks/wide/resources?page={last}&per_page={PER_PAGE}", ui)),
        ),
    ]
    binary = chromium()
    if binary is not None:
        rows.append(
            (
                "chromium: stack page to graph at rest (nodes)",
                *asyncio.run(browser_seconds(cp, binary, work / "profile")),
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=10_000)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    (work / "plane").mkdir()
    cp = start_plane(work / "plane", extra=("--provisioner", "enrol"))
    try:
        began = time.monotonic()
        created = cp.create("wide", wide_template(args.resources))
        if created.status != 201:
            raise SystemExit(f"create refused: {created.body}")
        status = cp.wait_stack("wide", timeout=1800)["status"]
        print(f"{args.resources} resources: {status} in {time.monotonic() - began:.1f} s")
        rows = measure(cp, args.resources, work)
    finally:
        stop_control_plane(cp)
    baseline = rows[0][1]
    for what, seconds, size in rows:
        print(f"{what:<52} {seconds * 1000:9.1f} ms {size:>10}  {seconds / baseline:5.2f}x baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
