"""The web view over plain HTTP: its session cookie, who may read what, its headers, pages of a large stack, its event stream."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from control.services.overview import GRAPH_LIMIT
from tests.support.controlplane import ControlPlane, start_control_plane, stop_control_plane

#: More plain resources than the graph draws one by one, in a chain every tenth link.
WIDE = GRAPH_LIMIT + 20


def wide_template() -> str:
    lines = [
        "heat_template_version: 2018-08-31",
        "resources:",
        "  first: {type: OS::Heat::Value, properties: {value: a}}",
    ]
    lines += [f"  n{i}: {{type: OS::Heat::None, depends_on: [first]}}" for i in range(WIDE)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("ui-http"), "--provisioner", "enrol")
    assert 201 == plane.create("wide", wide_template()).status
    assert "CREATE_COMPLETE" == plane.wait_stack("wide", timeout=300)["status"]
    yield plane
    stop_control_plane(plane)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # No cookie jar of its own: each test sends the cookie it means to send.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


async def login(http: aiohttp.ClientSession, cp: ControlPlane, token: str) -> aiohttp.ClientResponse:
    async with http.post(cp.url + "/ui/login", data={"token": token}, allow_redirects=False) as response:
        await response.read()
        return response


async def session_cookie(http: aiohttp.ClientSession, cp: ControlPlane) -> dict[str, str]:
    response = await login(http, cp, cp.token)
    return {"Cookie": f"anneal_ui={response.cookies['anneal_ui'].value}"}


async def get_json(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> tuple[int, Any]:
    async with http.get(url, headers=headers, allow_redirects=False) as response:
        return response.status, await response.json()


async def test_login_sets_a_strict_httponly_cookie_for_ui_only_that_does_not_hold_the_token(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """The right token gets a 303 to /ui/ and a cookie HttpOnly, SameSite=Strict, Path=/ui (no Secure over http)."""
    response = await login(http, cp, cp.token)
    assert 303 == response.status and "/ui/" == response.headers["Location"]
    cookie = response.cookies["anneal_ui"]
    assert cookie["httponly"] and "Strict" == cookie["samesite"] and "/ui" == cookie["path"]
    assert not cookie["secure"]
    assert cp.token not in cookie.value


async def test_behind_an_https_public_url_the_cookie_is_secure(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """With --public-url https://... (a TLS front before the control plane) the cookie is also Secure."""
    plane = start_control_plane(
        tmp_path, "--provisioner", "enrol", "--public-url", "https://anneal.example:8443"
    )
    try:
        response = await login(http, plane, plane.token)
        assert response.cookies["anneal_ui"]["secure"] and response.cookies["anneal_ui"]["httponly"]
    finally:
        stop_control_plane(plane)


async def test_a_wrong_token_gets_the_form_again_saying_it_was_not_accepted(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """A wrong, empty or non-ASCII token is a 401 page with the reason and no cookie."""
    for token in ("wrong", "", "t\u00f6ken"):
        async with http.post(cp.url + "/ui/login", data={"token": token}, allow_redirects=False) as response:
            page = await response.text()
            assert 401 == response.status and "not accepted" in page and "anneal_ui" not in response.cookies


async def test_the_rest_api_refuses_the_session_cookie(cp: ControlPlane, http: aiohttp.ClientSession) -> None:
    """/v1 takes bearer tokens only: a browser's cookie cannot be used there by another site (CSRF)."""
    status, body = await get_json(http, cp.url + "/v1/stacks", await session_cookie(http, cp))
    assert 401 == status and "Authorization" == body["error"]["where"]


async def test_without_a_session_data_is_401_and_pages_go_to_the_login_form(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """No cookie, a forged one, or one made from another token: JSON answers 401 naming the cookie; pages 303."""
    real = (await session_cookie(http, cp))["Cookie"]
    forged = real[:-4] + ("0000" if not real.endswith("0000") else "1111")
    for headers in ({}, {"Cookie": forged}, {"Cookie": "anneal_ui=admin.99999999999.abc"}):
        status, body = await get_json(http, cp.url + "/ui/api/stacks", headers)
        assert 401 == status and "cookie" == body["error"]["where"], headers
        async with http.get(cp.url + "/ui/servers", headers=headers, allow_redirects=False) as page:
            assert 303 == page.status and "/ui/login" == page.headers["Location"]


async def test_logout_expires_the_cookie(cp: ControlPlane, http: aiohttp.ClientSession) -> None:
    """Logging out sends the cookie back empty and expired, on the same path, and goes to the login form."""
    async with http.post(cp.url + "/ui/logout", allow_redirects=False) as response:
        assert 303 == response.status and "/ui/login" == response.headers["Location"]
        cookie = response.cookies["anneal_ui"]
        assert "" == cookie.value and "0" == cookie["max-age"] and "/ui" == cookie["path"]


async def test_every_ui_answer_forbids_framing_and_inline_script(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """Pages, data, static files, the login form and refusals all carry the CSP and X-Frame-Options DENY."""
    headers = await session_cookie(http, cp)
    for path in (
        "/ui/",
        "/ui/stacks/wide",
        "/ui/api/stacks",
        "/ui/static/cytoscape.min.js",
        "/ui/login",
        "/ui/api/x",
    ):
        async with http.get(cp.url + path, headers=headers, allow_redirects=False) as response:
            csp = response.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe" not in csp, (
                path
            )
            assert "DENY" == response.headers["X-Frame-Options"], path
    async with http.get(cp.url + "/v1/health") as response:
        assert "Content-Security-Policy" not in response.headers  # the REST API is not a page


async def test_static_files_are_only_those_shipped(cp: ControlPlane, http: aiohttp.ClientSession) -> None:
    """The static route serves the shipped files with their type and nothing else (no paths, no other suffixes)."""
    async with http.get(cp.url + "/ui/static/cytoscape.min.js") as response:
        assert 200 == response.status and "text/javascript" == response.content_type
        assert b"cytoscape" in (await response.read())[:400].lower()
    for name in ("nope.js", "..%2Fsession.py", "session.py", "shell.html", ".js"):
        async with http.get(cp.url + "/ui/static/" + name) as response:
            assert 404 == response.status, name


async def test_a_large_stack_is_drawn_by_type_and_listed_a_page_at_a_time(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """Above GRAPH_LIMIT resources the graph has one node per type with its counts; the list pages through all."""
    headers = await session_cookie(http, cp)
    _, graph = await get_json(http, cp.url + "/ui/api/stacks/wide/graph", headers)
    assert graph["aggregated"] and WIDE + 1 == graph["total"] == graph["counts"]["COMPLETE"]
    assert {"OS::Heat::None": WIDE, "OS::Heat::Value": 1} == {n["type"]: n["size"] for n in graph["nodes"]}
    ids = {n["type"]: n["id"] for n in graph["nodes"]}
    assert [{"source": ids["OS::Heat::Value"], "target": ids["OS::Heat::None"]}] == graph["edges"]
    names: list[str] = []
    for page in (1, 2, 3, 4):
        _, listed = await get_json(
            http, cp.url + f"/ui/api/stacks/wide/resources?page={page}&per_page=100", headers
        )
        assert WIDE + 1 == listed["total"]
        names += [r["name"] for r in listed["items"]]
    assert ["first", *(f"n{i}" for i in range(WIDE))] == names
    # Pages of 7: those past the middle are read from the end (a last page of a million skips a
    # page, not a million); every page is still the slice of the id order, and one past the end is empty.
    sevens: list[list[str]] = []
    for page in range(1, (WIDE + 1) // 7 + 3):
        _, listed = await get_json(
            http, cp.url + f"/ui/api/stacks/wide/resources?page={page}&per_page=7", headers
        )
        sevens.append([r["name"] for r in listed["items"]])
    assert [names[i : i + 7] for i in range(0, len(names), 7)] + [[]] == sevens
    for query, where in (
        ("per_page=0", "per_page"),
        ("per_page=501", "per_page"),
        ("page=0", "page"),
        ("state=OK", "state"),
    ):
        status, body = await get_json(http, cp.url + f"/ui/api/stacks/wide/resources?{query}", headers)
        assert 400 == status and where == body["error"]["where"], query


async def test_a_type_node_of_a_large_stack_lists_that_type_a_page_at_a_time(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """resources?type=T (what a click on a type's node asks): only that type, paged, with its own total."""
    headers = await session_cookie(http, cp)
    _, values = await get_json(http, cp.url + "/ui/api/stacks/wide/resources?type=OS::Heat::Value", headers)
    assert 1 == values["total"] and ["first"] == [r["name"] for r in values["items"]]
    _, nones = await get_json(
        http, cp.url + "/ui/api/stacks/wide/resources?type=OS::Heat::None&page=2&per_page=100", headers
    )
    assert WIDE == nones["total"] and [f"n{i}" for i in range(100, 200)] == [
        r["name"] for r in nones["items"]
    ]
    _, none = await get_json(http, cp.url + "/ui/api/stacks/wide/resources?type=OS::Nova::Server", headers)
    assert (0, []) == (none["total"], none["items"])


async def test_next_and_previous_pages_read_from_an_id_are_the_numbered_pages(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """after= the last id of page 1 is page 2, before= the first id of page 3 is page 2; both at once is a 400."""
    headers = await session_cookie(http, cp)
    url = cp.url + "/ui/api/stacks/wide/resources?per_page=100"
    pages = [(await get_json(http, url + f"&page={n}", headers))[1]["items"] for n in (1, 2, 3)]
    _, after = await get_json(http, url + f"&page=2&after={pages[0][-1]['id']}", headers)
    _, before = await get_json(http, url + f"&page=2&before={pages[2][0]['id']}", headers)
    assert pages[1] == after["items"] == before["items"] and 100 == len(pages[1])
    assert WIDE + 1 == after["total"] == before["total"]
    status, body = await get_json(http, url + "&after=1&before=9", headers)
    assert 400 == status and "before" == body["error"]["where"]


async def test_a_large_stack_without_an_outline_is_drawn_by_type_from_its_rows(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """A stack written before revision 0013 (no outline) gets the same graph: edges from its rows' requires."""
    headers = await session_cookie(http, cp)
    _, before = await get_json(http, cp.url + "/ui/api/stacks/wide/graph", headers)
    db = sqlite3.connect(cp.data_dir / "anneal.db")
    try:
        (kept,) = db.execute("SELECT outline FROM stacks WHERE name = 'wide'").fetchone()
        assert {"OS::Heat::None": WIDE, "OS::Heat::Value": 1} == json.loads(kept)["types"]
        with db:
            db.execute("UPDATE stacks SET outline = NULL WHERE name = 'wide'")
        _, after = await get_json(http, cp.url + "/ui/api/stacks/wide/graph", headers)
    finally:
        with db:
            db.execute("UPDATE stacks SET outline = ? WHERE name = 'wide'", (kept,))
        db.close()
    assert after["aggregated"] and (before["nodes"], before["edges"]) == (after["nodes"], after["edges"])
    assert 1 == len(after["edges"])


async def test_the_newest_events_come_first_a_page_at_a_time(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """newest=true gives the last events newest first; before=ID the page before it; together every event once."""
    headers = await session_cookie(http, cp)
    url = cp.url + "/ui/api/stacks/wide/events?nested_depth=0"
    every = cp.api("GET", "/v1/stacks/wide/events").body  # the REST API's: all of them, oldest first
    pages: list[int] = []
    before = ""
    for _ in range(len(every) // 100 + 2):  # bounded: one more page than there can be
        _, page = await get_json(http, url + f"&newest=true&limit=100{before}", headers)
        if not page:
            break
        pages += [e["id"] for e in page]
        before = f"&before={page[-1]['id']}"
    assert len(every) > 100 and [e["id"] for e in reversed(every)] == pages
    status, body = await get_json(http, url + "&newest=true&before=0", headers)
    assert 400 == status and "before" == body["error"]["where"]


async def test_events_filter_by_resource_and_status(cp: ControlPlane, http: aiohttp.ClientSession) -> None:
    """The events view's filters keep only that resource's events of that status; a bad status is a 400."""
    headers = await session_cookie(http, cp)
    _, found = await get_json(
        http, cp.url + "/ui/api/stacks/wide/events?resource=n7&status=COMPLETE", headers
    )
    assert [("n7", "CREATE", "COMPLETE")] == [(e["resource_name"], e["action"], e["status"]) for e in found]
    status, body = await get_json(http, cp.url + "/ui/api/stacks/wide/events?status=DONE", headers)
    assert 400 == status and "status" == body["error"]["where"]


async def test_the_event_stream_sends_the_stack_events_and_resumes_after_last_event_id(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """Server-sent events carry the stack's events in id order; reconnecting with Last-Event-ID sends only later ones."""
    headers = await session_cookie(http, cp)
    _, every = await get_json(http, cp.url + "/ui/api/stacks/wide/events?limit=200", headers)
    first = await read_stream(http, cp.url + "/ui/api/stacks/wide/stream", headers)
    assert [e["id"] for e in every] == [e["id"] for e in first]
    resumed = await read_stream(
        http, cp.url + "/ui/api/stacks/wide/stream", {**headers, "Last-Event-ID": str(every[-3]["id"])}
    )
    assert [e["id"] for e in every[-2:]] == [e["id"] for e in resumed][:2]
    status, body = await get_json(http, cp.url + "/ui/api/stacks/none-such/stream", headers)
    assert 404 == status and "stack" == body["error"]["where"]


async def read_stream(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The events of the first `events` message of a server-sent event stream."""
    async with http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as response:
        assert "text/event-stream" == response.content_type
        event = None
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == "events":
                return list(json.loads(line[len("data: ") :]))
    raise AssertionError("the stream ended without an events message")


async def test_a_stored_tokens_session_shows_its_project_and_ends_when_the_token_is_revoked(
    cp: ControlPlane, http: aiohttp.ClientSession
) -> None:
    """A reader of another project logs in, sees that project's (empty) stack list, not `wide`; revoking
    its token ends the session at once."""
    made = cp.api("POST", "/v1/tokens", {"project": "elsewhere", "role": "reader", "name": "viewer"}).body
    response = await login(http, cp, made["token"])
    assert 303 == response.status
    cookie = {"Cookie": f"anneal_ui={response.cookies['anneal_ui'].value}"}
    status, session = await get_json(http, cp.url + "/ui/api/session", cookie)
    assert (200, "reader", "elsewhere", False) == (
        status,
        session["role"],
        session["project"],
        session["can_change"],
    )
    assert (200, []) == await get_json(http, cp.url + "/ui/api/stacks", cookie)
    assert 404 == (await get_json(http, cp.url + "/ui/api/stacks/wide/graph", cookie))[0]
    assert 200 == cp.api("DELETE", f"/v1/tokens/{made['id']}").status
    assert 401 == (await get_json(http, cp.url + "/ui/api/session", cookie))[0]
