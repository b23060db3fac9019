"""Project isolation, swept over every route of both APIs enumerated from their routers (not a hand-made list).

One in-process control plane with Heat's API. Project alpha gets a stack, a server, a config
and a deployment; then a member and a reader of project beta call every route naming them
(refused: 403 or 404, never 2xx, never 5xx; lists show none of alpha's rows), and alpha's own
reader calls every mutating route (403). The count of routes checked is printed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from control.api.heat_v1.app import heat_app
from tests.support.inprocess import Plane
from tests.support.processes import free_port

TEMPLATE = (
    "heat_template_version: 2018-08-31\n"
    "resources:\n  cfg:\n    type: OS::Heat::SoftwareConfig\n    properties: {group: script, config: 'echo'}\n"
)
PARAM = re.compile(r"\{(\w+)(?::[^}]*)?\}")
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
REFUSED = {403, 404}


@dataclasses.dataclass
class World:
    plane: Plane
    heat: str
    http: aiohttp.ClientSession
    tokens: dict[str, str]
    alpha: dict[str, str]


async def call(world: World, who: str, method: str, url: str, **extra: Any) -> tuple[int, Any]:
    headers = {"X-Auth-Token": world.tokens[who]} if url.startswith(world.heat) else {}
    headers["Authorization"] = f"Bearer {world.tokens[who]}"
    headers.update(extra.pop("headers", {}))
    async with world.http.request(method, url, headers=headers, allow_redirects=False, **extra) as resp:
        text = await resp.text()
        return resp.status, text


async def _token(world: World, project: str, role: str) -> str:
    body = {"project": project, "role": role, "name": f"{project}-{role}"}
    status, made = await world.plane.call("POST", "/v1/tokens", body)
    assert 201 == status, made
    return str(made["token"])


async def _seed(world: World) -> None:
    """Alpha's member makes a server, a stack, a config and a deployment."""
    for project, role in (("alpha", "member"), ("alpha", "reader"), ("beta", "member"), ("beta", "reader")):
        world.tokens[f"{project}-{role}"] = await _token(world, project, role)
    base, heat = world.plane.url, f"{world.heat}/v1/alpha"
    status, server = await call(
        world, "alpha-member", "POST", f"{base}/v1/servers", json={"name": "alpha-srv"}
    )
    assert 201 == status, server
    stack_body = {"name": "alpha-stack", "template": TEMPLATE}
    status, stack = await call(world, "alpha-member", "POST", f"{base}/v1/stacks", json=stack_body)
    assert 201 == status, stack
    config_body = {"name": "c", "group": "script", "config": "echo"}
    status, config = await call(world, "alpha-member", "POST", f"{heat}/software_configs", json=config_body)
    assert 200 == status, config
    config_id = _field(config, "id")
    dep_body = {"config_id": config_id, "server_id": "alpha-srv", "action": "CREATE", "status": "COMPLETE"}
    status, dep = await call(world, "alpha-member", "POST", f"{heat}/software_deployments", json=dep_body)
    assert 200 == status, dep
    world.alpha.update(
        stack="alpha-stack",
        stack_id=_field(stack, "id"),
        server="alpha-srv",
        server_id=_field(server, "id"),
        config=config_id,
        deployment=_field(dep, "id"),
    )


def _field(text: str, name: str) -> str:
    found = re.search(rf'"{name}": "([^"]+)"', text)
    assert found is not None, text
    return found[1]


def _values(world: World, canonical: str, project: str) -> dict[str, str]:
    """What each path parameter is filled with: alpha's rows, so a refusal is about the project."""
    a = world.alpha
    server_route = "/servers/" in canonical
    return {
        "name": a["server"] if server_route else a["stack"],
        "id": a["deployment"],
        "resource": "cfg",
        "project_id": project,
        "stack_name": a["stack"],
        "stack_id": a["stack_id"],
        "resource_name": "cfg",
        "event_id": "1",
        "output_key": "x",
        "config_id": a["config"],
        "deployment_id": a["deployment"],
        "server_id": a["server_id"],
        "type_name": "OS::Heat::SoftwareConfig",
        "template_version": "heat_template_version.2018-08-31",
        "path": "resources",
        "what": "export",
    }


def _fill(world: World, canonical: str, project: str) -> str:
    """*canonical* with its parameters filled (one not named in _values gets "1")."""
    values = _values(world, canonical, project)
    return PARAM.sub(lambda m: values.get(m[1], "1"), canonical)


def _routes(app: web.Application) -> list[tuple[str, str, str]]:
    """(method, canonical path, policy) of every route but HEAD twins and public ones."""
    found = []
    for route in app.router.routes():
        policy = getattr(route.handler, "anneal_auth", None)
        if route.method == "HEAD" or policy == "public" or route.resource is None:
            continue
        methods = ["GET", "POST"] if route.method == "*" else [route.method]
        found += [(m, route.resource.canonical, str(policy)) for m in methods]
    return found


async def _ui_cookie(world: World, who: str) -> str:
    form = {"token": world.tokens[who]}
    async with world.http.post(f"{world.plane.url}/ui/login", data=form, allow_redirects=False) as resp:
        assert 303 == resp.status
        return resp.cookies["anneal_ui"].value


async def _sweep_main(world: World, app: web.Application) -> tuple[int, list[str]]:
    """Every route of the operator's API and the web view, as beta's member and reader and alpha's reader."""
    wrong: list[str] = []
    cookies = {who: await _ui_cookie(world, who) for who in ("beta-member", "beta-reader", "alpha-reader")}
    routes = _routes(app)
    for method, canonical, policy in routes:
        url = world.plane.url + _fill(world, canonical, "alpha")
        names_alpha = PARAM.search(canonical) is not None
        for who in ("beta-member", "beta-reader", "alpha-reader"):
            if who == "alpha-reader" and method not in MUTATING:
                continue
            extra: dict[str, Any] = {"json": {}} if method in MUTATING else {}
            if policy.startswith("ui"):
                extra["headers"] = {"Cookie": f"anneal_ui={cookies[who]}"}
            status, text = await call(world, who, method, url, **extra)
            wrong += _judge(world, who, method, canonical, policy, names_alpha, status, text)
    return len(routes), wrong


def _judge(
    world: World, who: str, method: str, path: str, policy: str, names_alpha: bool, status: int, text: str
) -> list[str]:
    """What is wrong with one answer (nothing: an empty list)."""
    said = f"{who} {method} {path} -> {status} {text[:120]}"
    if status >= 500:
        return [said]
    if policy in ("agent", "signal", "metrics"):  # an operator's token is no agent credential
        return [] if status in (401, 403) else [said]
    if who == "alpha-reader" or names_alpha or policy == "admin":
        return [] if status in REFUSED else [said]
    if method in MUTATING:  # a change in the caller's own project, with a body that is not one
        return [] if 400 <= status < 500 else [said]
    leaked = [v for v in world.alpha.values() if v in text]
    return [] if status == 200 and not leaked else [said + f" (shows {leaked})"]


async def _sweep_heat(world: World) -> tuple[int, list[str]]:
    """Every route of Heat's API: alpha's path refused to beta's tokens; beta's own path naming alpha's rows too."""
    wrong: list[str] = []
    routes = _routes(heat_app(world.plane.settings))
    for method, canonical, _ in routes:
        for who in ("beta-member", "beta-reader", "alpha-reader"):
            if who == "alpha-reader" and method not in MUTATING:
                continue
            projects = ["alpha"] if who == "alpha-reader" else ["alpha", "beta"]
            for project in projects:
                filled = _fill(world, canonical, project)
                names_alpha = any(
                    k in canonical for k in ("{stack_", "{config_id", "{deployment_id", "{server_id")
                )
                if project == "beta" and not names_alpha:
                    continue  # beta's own listing or catalogue: its own project, not a refusal to check
                status, text = await call(world, who, method, world.heat + filled, json={})
                if status not in REFUSED:
                    wrong.append(f"{who} {method} {filled} -> {status} {text[:120]}")
    return len(routes), wrong


async def _cross_project_bodies(world: World) -> None:
    """Beta's member cannot name alpha's config or server in a body: a deployment of either is 404."""
    heat, a = f"{world.heat}/v1/beta", world.alpha
    config_body = {"name": "b", "group": "script", "config": "echo"}
    status, config = await call(world, "beta-member", "POST", f"{heat}/software_configs", json=config_body)
    assert 200 == status, config
    for config_id, server in ((a["config"], "beta-srv"), (_field(config, "id"), a["server_id"])):
        body = {"config_id": config_id, "server_id": server, "action": "CREATE", "status": "COMPLETE"}
        status, text = await call(world, "beta-member", "POST", f"{heat}/software_deployments", json=body)
        assert 404 == status, text


async def _scenario(world: World) -> tuple[int, int, list[str]]:
    await world.plane.start()
    world.tokens["admin"] = world.plane.token
    await _seed(world)
    for who in ("admin", "alpha-reader"):  # the admin sees every project, alpha's own reader sees alpha
        for path in ("/v1/stacks", "/v1/servers", "/v1/deployments"):
            status, text = await call(world, who, "GET", world.plane.url + path)
            assert 200 == status and world.alpha["stack_id" if "stacks" in path else path[4:-1]] in text, text
    await _cross_project_bodies(world)
    main_count, wrong = await _sweep_main(world, world.plane.app)
    heat_count, heat_wrong = await _sweep_heat(world)
    return main_count, heat_count, wrong + heat_wrong


def test_every_route_of_both_apis_refuses_other_projects_and_readers(tmp_path: Path) -> None:
    """Beta's member and reader reach nothing of alpha on any route, alpha's reader changes nothing; no 5xx."""
    loop = asyncio.new_event_loop()
    plane, heat_port = Plane(loop, tmp_path), free_port()
    plane.settings = dataclasses.replace(plane.settings, heat_listen=f"127.0.0.1:{heat_port}")

    async def run() -> tuple[int, int, list[str]]:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=30), cookie_jar=aiohttp.DummyCookieJar()
        ) as http:
            world = World(plane, f"http://127.0.0.1:{heat_port}", http, {}, {})
            return await _scenario(world)

    try:
        main_count, heat_count, wrong = loop.run_until_complete(asyncio.wait_for(run(), 300))
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    print(
        f"project isolation: {main_count} operator/web-view routes and {heat_count} Heat API routes checked"
    )
    assert [] == wrong
    assert main_count > 40 and heat_count > 30
