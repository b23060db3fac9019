"""A token becomes a Principal at one point: an external validator plugged in is honoured by Heat's API and the
web view, and what it changes through Heat's API is in the audit log under its name."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import aiohttp

from control.api.app_keys import RUNTIME
from control.principal import Principal
from tests.support.inprocess import Plane
from tests.support.processes import free_port

#: What the stand-in validator knows: a Keystone-like token of project alpha.
EXTERNAL = {"ks-alpha-member": Principal(project="alpha", role="member", who="keystone user ann")}


async def _validator(token: str) -> Principal | None:
    return EXTERNAL.get(token)


async def _scenario(plane: Plane, heat_url: str) -> dict[str, int | str | None]:
    await plane.start()
    plane.app[RUNTIME].validator = _validator
    seen: dict[str, int | str | None] = {}
    jar = aiohttp.CookieJar(unsafe=True)  # the session cookie of 127.0.0.1 (an address, not a name)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), cookie_jar=jar) as http:
        for project in ("alpha", "beta"):
            headers = {"X-Auth-Token": "ks-alpha-member"}
            async with http.get(f"{heat_url}/v1/{project}/stacks", headers=headers) as resp:
                seen[f"heat {project}"] = resp.status
        async with http.get(f"{heat_url}/v1/alpha/stacks", headers={"X-Auth-Token": "nobody"}) as resp:
            seen["heat unknown"] = resp.status
        for project in ("alpha", "beta"):
            config = {"name": "c", "group": "script", "config": "true"}
            url = f"{heat_url}/v1/{project}/software_configs"
            async with http.post(url, json=config, headers={"X-Auth-Token": "ks-alpha-member"}) as resp:
                seen[f"heat create in {project}"] = resp.status
        admin = {"Authorization": f"Bearer {plane.token}"}
        async with http.get(f"{plane.url}/v1/audit", headers=admin) as resp:
            rows = await resp.json()
        seen["audit"] = str(sorted((r["api"], r["who"], r["project"], r["status"]) for r in rows))
        form = {"token": "ks-alpha-member"}
        async with http.post(f"{plane.url}/ui/login", data=form, allow_redirects=False) as resp:
            seen["login"] = resp.status
        async with http.get(f"{plane.url}/ui/api/session") as resp:
            seen["session project"] = (await resp.json())["project"]
    return seen


def test_an_external_validators_principal_is_honoured_by_heat_and_the_web_view(tmp_path: Path) -> None:
    """A token only the plugged-in validator knows reads its own project on Heat's API, not another, and logs in."""
    loop = asyncio.new_event_loop()
    plane = Plane(loop, tmp_path)
    heat_port = free_port()
    plane.settings = dataclasses.replace(plane.settings, heat_listen=f"127.0.0.1:{heat_port}")
    try:
        seen = loop.run_until_complete(
            asyncio.wait_for(_scenario(plane, f"http://127.0.0.1:{heat_port}"), 120)
        )
    finally:
        loop.run_until_complete(plane.stop())
        loop.close()
    assert seen == {
        "heat alpha": 200,
        "heat beta": 403,
        "heat unknown": 401,
        "heat create in alpha": 200,
        "heat create in beta": 403,
        "audit": str(
            [("heat", "keystone user ann", "alpha", 200), ("heat", "keystone user ann", "alpha", 403)]
        ),
        "login": 303,
        "session project": "alpha",
    }
