"""The web view in a real headless Chromium (DevTools protocol): login, the live graph, the pages, no changes.

Screenshots go to $UI_SCREENSHOTS (``make ui-screenshots`` sets docs/ui, which docs/ui.md shows),
else to the test's temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from control.services.overview import GRAPH_LIMIT
from tests.support.browser import Page, chromium, open_page
from tests.support.controlplane import ControlPlane
from tests.support.templates import one_script_deployment
from tests.support.waiting import wait_until

BINARY = chromium()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason="chromium is not installed: run ci/tools.d/72-chromium.sh"
)

SECRET = "s3cret-value-7f1"
GREEN, BLUE = "rgb(46,125,50)", "rgb(21,101,192)"
#: True when the graph is neither reading nor laying out (ui-graph.js counts its changes under way).
GRAPH_AT_REST = "Number(document.getElementById('graph').dataset.busy || 0) === 0"
#: Every control a reader's view has: none of them changes the control plane.
HARMLESS_BUTTONS = {"Log out", "Previous", "Next", "Filter"}
#: What a member's or an admin's stack page adds (control/api/ui/actions.py).
CHANGING_BUTTONS = {"Converge", "Cancel"}


def template(go: Path) -> str:
    """A server, a config, a deployment that waits for the file *go*, and a group of three values."""
    return f"""
heat_template_version: 2018-08-31
parameters:
  password: {{type: string, hidden: true, default: {SECRET}}}
resources:
  srv: {{type: OS::Heat::DeployedServer}}
  cfg:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: GO}}, {{name: PASSWORD}}]
      config: |
        #!/bin/sh
        i=0; while [ ! -e "$GO" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
        echo "went with $PASSWORD"
  dep:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: cfg}}
      server: {{get_resource: srv}}
      input_values: {{GO: "{go}", PASSWORD: {{get_param: password}}}}
  grp:
    type: OS::Heat::ResourceGroup
    properties:
      count: 3
      resource_def: {{type: OS::Heat::Value, properties: {{value: x}}}}
"""


def shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("UI_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


async def log_in(page: Page, token: str) -> None:
    await page.evaluate(f"document.getElementById('token').value = {json.dumps(token)}")
    await page.evaluate("document.getElementById('login').submit(); true")
    await asyncio.sleep(0.2)
    await page.wait_for("document.readyState === 'complete'", "the answer to the login form")


async def check_page_rules(page: Page, allowed: set[str] = HARMLESS_BUTTONS | CHANGING_BUTTONS) -> None:
    """No CSP violation, no script error, and only *allowed* controls on the page shown."""
    await page.wait_for(
        "!document.querySelector('#main .muted') || document.readyState === 'complete'", "page"
    )
    assert [] == await page.evaluate("window.__csp"), "a Content-Security-Policy violation"
    assert [] == page.console
    buttons = set(await page.evaluate("[...document.querySelectorAll('button')].map((b) => b.textContent)"))
    assert buttons <= allowed, buttons
    posts = await page.evaluate("[...document.querySelectorAll('form[method=post]')].map((f) => f.action)")
    assert all(p.endswith("/ui/logout") for p in posts), posts


async def test_unauthenticated_view_goes_to_login_and_a_bad_token_is_refused_there(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """/ui/ without a session lands on the login form; a wrong token gets the form again, saying so."""
    assert BINARY is not None
    async with open_page(BINARY, tmp_path / "profile") as page:
        await page.goto(control_plane.url + "/ui/")
        assert "/ui/login" == await page.evaluate("location.pathname")
        await log_in(page, "not-the-token")
        assert "/ui/login" == await page.evaluate("location.pathname")
        alert = await page.wait_for("document.querySelector('[role=alert]')?.textContent", "the refusal")
        assert "not accepted" in alert
        await page.goto(control_plane.url + "/ui/stacks/anything")
        assert "/ui/login" == await page.evaluate("location.pathname")
        await page.screenshot(shots(tmp_path) / "login.png")
        assert [] == await page.evaluate("window.__csp")


async def click_node(page: Page, label: str, until: str) -> Any:
    """Click (a real mouse press and release) on the top-level node *label*; wait for *until*."""
    where = f"""(() => {{
        const node = annealGraph.nodes().filter((n) => n.data('label') === {json.dumps(label)} && !n.data('parent'))[0];
        const box = node.renderedBoundingBox({{ includeLabels: false }});
        const frame = annealGraph.container().getBoundingClientRect();
        // An opened box is clicked in its padding, above its members; a closed one in its middle.
        const down = node.isParent() ? 6 : box.h / 2;
        return [frame.left + box.x1 + box.w / 2, frame.top + box.y1 + down];
    }})()"""
    await page.wait_for(GRAPH_AT_REST, "the graph at rest")
    x, y = await page.evaluate(where)
    for kind in (
        "mouseMoved",
        "mousePressed",
        "mouseReleased",
    ):  # moved first, as a hand does: Cytoscape tracks it
        await page.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
    return await page.wait_for(f"{GRAPH_AT_REST} && ({until})", f"the graph after a click on {label}")


def node_states() -> str:
    """The graph's nodes as [label, state, drawn colour, members] (members: a group's size, else 0)."""
    return (
        "window.annealGraph && annealGraph.nodes().map((n) => "
        "[n.data('label'), n.data('state'), n.style('background-color'), n.data('size') || 0])"
    )


async def test_live_stack_graph_pages_and_logout_in_chromium(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """After login the graph shows each resource in its status colour, turns a deployment green without a
    reload, and the deployment, servers, events and failures pages show what the API says, secrets masked."""
    assert BINARY is not None
    cp, go, out = control_plane, tmp_path / "go", shots(tmp_path)
    assert 201 == cp.create("web", template(go)).status
    broken = one_script_deployment("#!/bin/sh\necho half way\necho the disk is gone >&2\nexit 3\n")
    assert 201 == cp.create("broken", broken).status

    def waiting_on_go():
        rows = {r["name"]: r["status"] for r in cp.api("GET", "/v1/stacks/web/resources").body}
        return (
            rows if rows.get("dep") == "CREATE_IN_PROGRESS" and rows.get("grp") == "CREATE_COMPLETE" else None
        )

    statuses = wait_until(waiting_on_go, "dep running and grp complete", 60)
    (dep,) = cp.api("GET", "/v1/deployments?stack=web").body
    async with open_page(BINARY, tmp_path / "profile") as page:
        await page.goto(cp.url + "/ui/")
        await log_in(page, cp.token)
        assert "/ui/" == await page.evaluate("location.pathname")
        assert "" == await page.evaluate("document.cookie"), "the session cookie is HttpOnly"
        await page.wait_for(
            "document.querySelector('#main table')?.textContent.includes('web')", "the stacks"
        )
        await page.screenshot(out / "stacks.png")
        await check_page_rules(page)

        await page.goto(cp.url + "/ui/stacks/web")
        nodes = await page.wait_for(f"({node_states()})?.length === 4 && ({node_states()})", "the graph")
        colours = {"CREATE_COMPLETE": GREEN, "CREATE_IN_PROGRESS": BLUE}
        expected = {
            name: [name, status.split("_", 1)[1], colours[status]] for name, status in statuses.items()
        }
        assert expected == {label: [label, state, colour] for label, state, colour, _ in nodes}
        assert {"grp": 3} == {label: size for label, _, _, size in nodes if size}
        assert 2 == await page.evaluate("annealGraph.edges().length")  # cfg -> dep, srv -> dep
        await page.wait_for("document.getElementById('live')?.textContent === 'live'", "the event stream")
        await page.screenshot(out / "stack-running.png")
        await check_page_rules(page)

        members = "annealGraph.$('node[parent]').map((n) => [n.data('label'), n.data('state')])"
        opened = await click_node(page, "grp", f"{members}.length === 3 && {members}")
        assert [["0", "COMPLETE"], ["1", "COMPLETE"], ["2", "COMPLETE"]] == sorted(opened)
        await page.screenshot(out / "stack-group-open.png")
        await click_node(page, "grp", "annealGraph.nodes().length === 4")

        await page.evaluate("window.__same_document = true")
        go.write_text("go")
        green = f"({node_states()}).find((n) => n[0] === 'dep')"
        assert ["dep", "COMPLETE", GREEN, 0] == await page.wait_for(
            f"{green}[1] === 'COMPLETE' && {green}", "dep green"
        )
        assert await page.evaluate("window.__same_document === true"), "the page was reloaded"
        await page.wait_for(
            "document.querySelector('#stack-status')?.textContent === 'CREATE_COMPLETE'", "status"
        )
        await page.screenshot(out / "stack.png")

        await page.goto(cp.url + f"/ui/deployments/{dep['id']}")
        await page.wait_for("document.getElementById('stdout')?.textContent.includes('went with')", "stdout")
        api_view = cp.api("GET", f"/v1/deployments/{dep['id']}").body
        shown = await page.evaluate("document.body.innerText")
        assert SECRET not in shown
        assert api_view["input_values"]["PASSWORD"] in shown and api_view["deploy_stdout"].strip() in shown
        assert "generation 1" in shown and "CREATE_COMPLETE" in shown
        await page.screenshot(out / "deployment.png")
        await check_page_rules(page)

        servers = cp.api("GET", "/v1/servers").body
        await page.goto(cp.url + f"/ui/servers?server={dep['server_name']}")
        text = await page.wait_for("document.querySelector('#main h2') && document.body.innerText", "servers")
        for server in servers:
            assert server["name"] in text and server["agent"] in text
        reported = [s["agent_status"]["os"] for s in servers if (s.get("agent_status") or {}).get("os")]
        assert reported and all(
            found in text for found in reported
        )  # e.g. "Debian GNU/Linux 12 (bookworm) (Linux 6.1...)"
        assert dep["name"] in text  # what the server runs
        await page.screenshot(out / "servers.png")
        await check_page_rules(page)

        await page.goto(cp.url + "/ui/events?stack=web&resource=dep&status=COMPLETE")
        rows = await page.wait_for(
            "document.querySelector('#main table') && [...document.querySelectorAll('#main tbody tr')]"
            ".map((r) => [r.cells[2].textContent, r.cells[3].textContent])",
            "the filtered events",
        )
        assert [["dep", "CREATE_COMPLETE"]] == rows
        await page.screenshot(out / "events.png")
        await check_page_rules(page)

        assert "CREATE_FAILED" == cp.wait_stack("broken")["status"]
        await page.goto(cp.url + "/ui/failures")
        text = await page.wait_for(
            "document.querySelector('#main h3') && document.body.innerText", "failures"
        )
        (failure,) = cp.api("GET", "/v1/stacks/broken/failures").body
        assert "broken" in text and "web" not in text.replace("web-", "")
        for shown in ("half way", "the disk is gone", failure["reason"], "exit 3"):
            assert shown in text, shown
        await page.screenshot(out / "failures.png")
        await check_page_rules(page)

        csp = await page.evaluate("fetch('/ui/').then((r) => r.headers.get('content-security-policy'))")
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        await page.evaluate("document.getElementById('logout').click(); true")
        await page.wait_for("location.pathname === '/ui/login'", "the login form after logout")
        await page.goto(cp.url + "/ui/")
        assert "/ui/login" == await page.evaluate("location.pathname")


async def test_a_reader_sees_no_changing_control_and_its_post_is_refused_a_member_converges(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A reader's stack page has no Converge or Cancel and its POST is refused (403); a member's page has
    them, pressing Converge is accepted, and the same POST without the session's form token is refused."""
    assert BINARY is not None
    cp = control_plane
    assert 201 == cp.create("web", one_script_deployment("#!/bin/sh\necho ok\n")).status
    assert "CREATE_COMPLETE" == cp.wait_stack("web")["status"]
    tokens = {
        role: cp.api("POST", "/v1/tokens", {"project": "default", "role": role}).body["token"]
        for role in ("reader", "member")
    }
    post = "fetch('/ui/api/stacks/web/converge', {method: 'POST', headers: HEADERS}).then((r) => r.status)"
    async with open_page(BINARY, tmp_path / "reader") as page:
        await page.goto(cp.url + "/ui/")
        await log_in(page, tokens["reader"])
        await page.goto(cp.url + "/ui/stacks/web")
        await page.wait_for("document.querySelector('#stack-status')?.textContent", "the stack page")
        await check_page_rules(page, HARMLESS_BUTTONS)
        assert "reader · default · read-only" == await page.evaluate(
            "document.getElementById('session').textContent"
        )
        assert 403 == await page.evaluate(post.replace("HEADERS", "{'X-Anneal-Form': 'guess'}"))
    async with open_page(BINARY, tmp_path / "member") as page:
        await page.goto(cp.url + "/ui/")
        await log_in(page, tokens["member"])
        await page.goto(cp.url + "/ui/stacks/web")
        await page.wait_for("!!document.getElementById('converge')", "the Converge control")
        await check_page_rules(page)
        assert 403 == await page.evaluate(post.replace("HEADERS", "{}"))
        await page.evaluate("document.getElementById('converge').click(); true")
        said = await page.wait_for(
            "(document.getElementById('action-result')?.textContent || '').match(/: \\d+|refused/)"
            " && document.getElementById('action-result').textContent",
            "the answer to Converge",
        )
        assert "converge: 202" == said
    audit = cp.api("GET", "/v1/audit").body
    ui_rows = [(r["api"], r["route"], r["status"]) for r in audit if r["api"] == "ui"]
    assert ("ui", "/ui/api/stacks/{name}/converge", 403) in ui_rows
    assert ("ui", "/ui/api/stacks/{name}/converge", 202) in ui_rows


async def test_a_big_stacks_type_node_lists_that_type_and_next_pages_on_in_chromium(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A stack above the graph's limit is drawn by type; a click on a type lists only that type below,
    "show every type" brings the others back, and Next reads the page after the last row shown."""
    assert BINARY is not None
    cp = control_plane
    lines = [
        "heat_template_version: 2018-08-31",
        "resources:",
        "  first: {type: OS::Heat::Value, properties: {value: a}}",
    ]
    lines += [f"  n{i:03d}: {{type: OS::Heat::None, depends_on: first}}" for i in range(GRAPH_LIMIT)]
    cp.create_stack("wide", "\n".join(lines) + "\n", timeout=300)
    rows = "[...document.querySelectorAll('#resources tbody tr')].map((r) => r.cells[0].textContent)"
    async with open_page(BINARY, tmp_path / "profile") as page:
        await page.goto(cp.url + "/ui/login")
        await log_in(page, cp.token)
        await page.goto(cp.url + "/ui/stacks/wide")
        labels = await page.wait_for(
            f"window.annealGraph && {GRAPH_AT_REST} && annealGraph.nodes().map((n) => n.data('label'))",
            "the graph",
        )
        assert sorted(labels) == [f"OS::Heat::None \u00d7{GRAPH_LIMIT}", "OS::Heat::Value \u00d71"]
        await click_node(page, "OS::Heat::Value \u00d71", "document.getElementById('every-type') !== null")
        assert ["first"] == await page.wait_for(f"{rows}.length === 1 && {rows}", "that type's rows")
        await page.evaluate("document.getElementById('every-type').click(); true")
        first = await page.wait_for(f"{rows}.length === 50 && {rows}", "every type's first page")
        assert ["first", *(f"n{i:03d}" for i in range(49))] == first
        await page.evaluate(
            "[...document.querySelectorAll('button')].find((b) => b.textContent === 'Next').click(); true"
        )
        second = await page.wait_for(f"{rows}[0] !== 'first' && {rows}", "the next page")
        assert [f"n{i:03d}" for i in range(49, 99)] == second
        await check_page_rules(page)
