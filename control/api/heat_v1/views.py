"""Heat's shapes (heat/engine/api.py and the v1 views) for what the services return: links, times, states."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web

from control.api.heat_v1.middleware import scope
from control.store.orm import StackRow

#: The type Heat gives a stack's own events and its nested-stack resources.
STACK_TYPE = "OS::Heat::Stack"


def isotime(ts: float | None) -> str | None:
    """Heat's timestamps: UTC, seconds, a Z (heat/common/timeutils.py isotime)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def project_url(request: web.Request) -> str:
    """This API's root for the path's project, on the host the client used (Heat's relative_url)."""
    return f"{request.url.origin()}/v1/{quote(scope(request).project, '')}"


def stack_url(request: web.Request, name: str, stack_id: str) -> str:
    return f"{project_url(request)}/stacks/{quote(name, '')}/{quote(stack_id, '')}"


def resource_url(request: web.Request, name: str, stack_id: str, resource: str) -> str:
    return f"{stack_url(request, name, stack_id)}/resources/{quote(resource, '')}"


def link(href: str, rel: str = "self") -> dict[str, str]:
    return {"href": href, "rel": rel}


def stack_link(request: web.Request, view: dict[str, Any]) -> dict[str, str]:
    return link(stack_url(request, view["name"], view["id"]))


def stack_summary(request: web.Request, view: dict[str, Any], description: str = "") -> dict[str, Any]:
    """A stack as Heat lists it (views/stacks_view.py basic_keys); *view* is services.stacks.stack_view's."""
    return {
        "id": view["id"],
        "links": [stack_link(request, view)],
        "stack_name": view["name"],
        "description": description,
        "stack_status": view["status"],
        "stack_status_reason": view["status_reason"],
        "creation_time": isotime(view["created_at"]),
        "updated_time": None if view["action"] == "CREATE" else isotime(view["updated_at"]),
        "deletion_time": None,
        "stack_owner": None,
        "parent": view["parent"],
        "stack_user_project_id": None,
        "tags": view["tags"] or None,
    }


def stack_detail(
    request: web.Request, view: dict[str, Any], description: str, outputs: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """A stack as Heat shows it: the summary, parameters as strings (with the pseudo parameters), outputs."""
    params = {k: v if isinstance(v, str) else _as_text(v) for k, v in view["parameters"].items()}
    params.update(
        {"OS::stack_id": view["id"], "OS::stack_name": view["name"], "OS::project_id": scope(request).project}
    )
    found = stack_summary(request, view, description)
    found.update(
        {
            "parameters": params,
            "template_description": description,
            "notification_topics": [],
            "capabilities": [],
            "disable_rollback": not view["rollback"],
            "timeout_mins": view["timeout_mins"],
        }
    )
    if outputs is not None:
        found["outputs"] = outputs
    return found


def _as_text(value: Any) -> str:
    """Heat shows every parameter as text (``parameters.map(str)``); lists and maps as JSON, which reads better."""
    if isinstance(value, bool):
        return str(value)
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def resource_view(request: web.Request, stack: StackRow, row: dict[str, Any]) -> dict[str, Any]:
    """A resource of *stack* as Heat lists it (heat/api/openstack/v1/resources.py format_resource): a
    ``nested`` link to the stack it made, ``parent_resource`` in a nested stack."""
    href = resource_url(request, stack.name, stack.id, row["name"])
    links = [link(href), link(stack_url(request, stack.name, stack.id), "stack")]
    if row.get("nested"):
        links.append(link(stack_url(request, row["nested"]["name"], row["nested"]["id"]), "nested"))
    found = {
        "resource_name": row["name"],
        "logical_resource_id": row["name"],
        "physical_resource_id": row["physical_id"] or "",
        "resource_status": f"{row['action']}_{row['status']}",
        "resource_status_reason": row["status_reason"],
        "resource_type": row["type"],
        "creation_time": isotime(row["created_at"]),
        "updated_time": isotime(row["updated_at"]),
        "required_by": row["required_by"],
        "links": links,
    }
    if stack.parent_resource:
        found["parent_resource"] = stack.parent_resource
    return found


def event_view(request: web.Request, event: dict[str, Any], detail: bool) -> dict[str, Any]:
    """An event as Heat lists it (heat/api/openstack/v1/events.py format_event), its links naming its own
    (maybe nested) stack; *detail* adds its type."""
    resource, stack = event["resource_name"], event["stack"]
    res_href = resource_url(request, stack["name"], stack["id"], resource)
    found: dict[str, Any] = {
        "id": str(event["id"]),
        "links": [
            link(f"{res_href}/events/{event['id']}"),
            link(res_href, "resource"),
            link(stack_url(request, stack["name"], stack["id"]), "stack"),
        ],
        "event_time": isotime(event["timestamp"]),
        "resource_name": resource,
        "logical_resource_id": resource,
        "resource_status": f"{event['action']}_{event['status']}",
        "resource_status_reason": event["reason"],
        "physical_resource_id": event["physical_resource_id"],
    }
    if event.get("root") is not None:
        root = event["root"]
        found["links"].append(link(stack_url(request, root["name"], root["id"]), "root_stack"))
    if detail:
        found["resource_type"] = event["resource_type"]
        found["resource_properties"] = {}
    return found
