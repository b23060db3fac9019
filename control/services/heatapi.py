"""The parts of Keystone, the Heat API and heat-api-cfn that Heat's own agents call.

os-collect-config's ``heat`` and ``cfn`` collectors read a server's document;
heat-config-notify sends a HEAT_SIGNAL result; a HEAT_SIGNAL wait condition handle
is signalled. Each logs in with a credential ``documents/heatauth.py`` minted, and
reaches only what that credential is for (heat.md §3.1, §3.2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any
from xml.etree import ElementTree

from sqlalchemy import select

from control.documents import heat, heatauth
from control.documents.render import iso
from control.errors import BadRequestError, ForbiddenError, NotFoundError
from control.runtime import Runtime
from control.services import agents
from control.signals.waits import record_wait_signal
from control.store.orm import DeploymentRow, ResourceRow, ServerRow

#: Keystone's identity v3 API version Heat's clients discover.
VERSION = "v3.14"


def version(base: str) -> dict[str, Any]:
    """Keystone's version document for v3 (what keystoneclient's discovery reads)."""
    return {
        "id": VERSION,
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"{heatauth.auth_url(base)}/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }


def _field(body: Any, *path: str) -> Any:
    node = body
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            raise BadRequestError(f"{'.'.join(path)} is required", where=".".join(path))
        node = node[key]
    return node


async def login(rt: Runtime, body: Any) -> tuple[str, dict[str, Any]]:
    """Keystone's password login (``POST /v3/auth/tokens``): the token and its body."""
    methods = _field(body, "auth", "identity", "methods")
    if not isinstance(methods, list) or "password" not in methods:
        raise BadRequestError("only the password method is accepted", where="auth.identity.methods")
    user = _field(body, "auth", "identity", "password", "user")
    name = user.get("id") or user.get("name") if isinstance(user, Mapping) else None
    if not isinstance(name, str):
        raise BadRequestError("user.id is required", where="auth.identity.password.user.id")
    kind, ident = heatauth.check_password(rt.keys, name, str(user.get("password") or ""))
    await _subject_exists(rt, kind, ident)
    scope = body["auth"].get("scope")
    scope = scope.get("project") if isinstance(scope, Mapping) else None
    project = (
        str(scope.get("id") or scope.get("name") or "anneal") if isinstance(scope, Mapping) else "anneal"
    )
    token, expires = heatauth.issue_token(rt.keys, name)
    base = rt.settings.base_url
    endpoint = {"interface": "public", "region": heatauth.REGION, "region_id": heatauth.REGION}
    return token, {
        "token": {
            "methods": ["password"],
            "user": {"id": name, "name": name, "domain": heatauth.DOMAIN},
            "project": {"id": project, "name": project, "domain": heatauth.DOMAIN},
            "roles": [{"id": "heat_stack_user", "name": "heat_stack_user"}],
            "issued_at": iso(time.time()).replace("Z", ".000000Z"),
            "expires_at": iso(expires).replace("Z", ".000000Z"),
            "audit_ids": [token[-22:]],
            "catalog": [
                {
                    "type": "orchestration",
                    "name": "heat",
                    "id": "heat",
                    "endpoints": [
                        {**endpoint, "id": "heat-public", "url": heatauth.orchestration_url(base, project)}
                    ],
                }
            ],
        }
    }


async def _subject_exists(rt: Runtime, kind: str, ident: str) -> None:
    """A user whose server, deployment or handle is gone cannot log in any more."""
    async with rt.sessions() as session:
        if kind == "server":
            found: Any = await session.get(ServerRow, ident)
        elif kind == "deployment":
            found = await session.get(DeploymentRow, ident)
        else:
            found = await session.scalar(select(ResourceRow.id).where(ResourceRow.physical_id == ident))
    if found is None:
        raise NotFoundError(f"the {kind} this user was made for no longer exists", where="auth")


async def resource_metadata(rt: Runtime, token: str | None) -> dict[str, Any]:
    """The Heat API's resource metadata, as the ``heat`` collector reads it: a server's document."""
    kind, ident = heatauth.token_user(rt.keys, token)
    if kind != "server":
        raise ForbiddenError("only a server's user reads metadata", where="X-Auth-Token")
    doc, _, _ = await heat.metadata(rt, ident)
    return {"metadata": doc}


async def resource_signal(
    rt: Runtime, kick: Callable[[str], None], token: str | None, stack_id: str, body: Any
) -> dict[str, Any]:
    """The Heat API's resource signal: a HEAT_SIGNAL result, or a HEAT_SIGNAL wait handle's signal."""
    kind, ident = heatauth.token_user(rt.keys, token)
    if kind == "handle":
        return await record_wait_signal(rt, kick, ident, body)
    if kind != "deployment":
        raise ForbiddenError("a server's user cannot signal", where="X-Auth-Token")
    async with rt.sessions() as session:
        dep = await session.get(DeploymentRow, ident)
    if dep is None or dep.stack_id != stack_id:
        raise NotFoundError(f"no such deployment in stack {stack_id}", where="resource")
    # The user stands for this deployment: its signal answers the generation it runs now.
    sig = rt.keys.signal_signature(dep.id, dep.generation)
    return await agents.record_signal(rt, kick, dep.id, dep.generation, body, sig=sig, server_id=None)


async def describe_stack_resource(
    rt: Runtime, verb: str, hosts: tuple[str, ...], path: str, params: Mapping[str, str]
) -> str:
    """heat-api-cfn's DescribeStackResource for the ``cfn`` collector: the document as Metadata."""
    if params.get("Action") != "DescribeStackResource":
        raise BadRequestError(f"action {params.get('Action')!r} is not served here", where="Action")
    server_id = heatauth.check_ec2(rt.keys, verb, hosts, path, params)
    doc, _, _ = await heat.metadata(rt, server_id)
    root = ElementTree.Element("DescribeStackResourceResponse")
    detail = ElementTree.SubElement(
        ElementTree.SubElement(root, "DescribeStackResourceResult"), "StackResourceDetail"
    )
    for tag, text in (
        ("StackName", params.get("StackName", "")),
        ("LogicalResourceId", params.get("LogicalResourceId", "")),
        ("PhysicalResourceId", server_id),
        ("ResourceStatus", "CREATE_COMPLETE"),
        ("Metadata", json.dumps(doc)),
    ):
        ElementTree.SubElement(detail, tag).text = text
    return ElementTree.tostring(root, encoding="unicode")
