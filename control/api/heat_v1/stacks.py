"""Heat's stack routes: list, create (and adopt), look up (302), show, update, patch, delete, abandon, template, outputs."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from control.api.app_keys import DEFS, ENGINE, RUNTIME
from control.api.body import read_details, read_object
from control.api.heat_v1 import translate, views
from control.api.heat_v1.middleware import (
    bool_param,
    int_param,
    json_response,
    mixed_param,
    scope,
    seen,
    sort_dir,
    within,
)
from control.api.middleware import auth, changes_nothing
from control.errors import BadRequestError, NotFoundError
from control.services import abandon, handover, preview, queries, stacks
from control.services.stack_listing import FILTER_COLUMNS, StackQuery, count_stacks, list_stacks
from control.services.stack_resources import identified_stack
from control.store.orm import EventRow, StackRow

P = "/v1/{project_id}"
STACK = P + "/stacks/{stack_name}/{stack_id}"
#: What a path under a stack's name (no id yet) may go on to, as Heat's lookup redirects it.
SUBPATHS = "resources|events|template|actions|environment|files|outputs|preview|abandon|export|snapshots"
TAG_PARAMS = ("tags", "tags_any", "not_tags", "not_tags_any")
MASK = "******"

routes = web.RouteTableDef()


@routes.get(P + "/stacks")
@auth("project")
async def list_stacks_route(request: web.Request) -> web.Response:
    """Heat's stack list: filters, tags, sort_keys/sort_dir, limit/marker, with_count, show_nested;
    show_deleted, show_hidden and global_tenant are accepted (no deleted or hidden stacks here)."""
    for name in ("show_deleted", "show_hidden", "global_tenant"):
        bool_param(request, name)
    query = StackQuery(
        filters={k: mixed_param(request, k) for k in FILTER_COLUMNS},
        tags={k: _tag_list(request.query.get(k)) for k in TAG_PARAMS if request.query.get(k)},
        sort_keys=request.query.getall("sort_keys", []),
        sort_dir=sort_dir(request),
        limit=int_param(request, "limit"),
        marker=request.query.get("marker"),
        nested=bool_param(request, "show_nested"),
        project=seen(request),
    )
    async with request.app[RUNTIME].sessions() as session:
        found = [views.stack_summary(request, v) for v in await list_stacks(session, query)]
        body: dict[str, Any] = {"stacks": found}
        if query.limit and len(found) == query.limit:
            params = [(k, v) for k, v in request.query.items() if k != "marker"] + [
                ("marker", found[-1]["id"])
            ]
            body["links"] = [views.link(f"{request.url.with_query(None)}?{urlencode(params)}", "next")]
        if bool_param(request, "with_count"):
            body["count"] = await count_stacks(session, query)
    return json_response(body)


def _tag_list(raw: str | None) -> list[str]:
    return [t.strip() for t in (raw or "").split(",") if t.strip()]


@routes.get(P + "/stacks/detail")
@auth("project")
async def list_stacks_detail(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        found = await list_stacks(session, StackQuery(project=seen(request)))
    return json_response({"stacks": [views.stack_detail(request, v, "", None) for v in found]})


@routes.post(P + "/stacks")
@auth("project")
async def create_stack(request: web.Request) -> web.Response:
    """201 with the new stack's id and link, and its URL in Location."""
    body = await read_object(request, shared=True)
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    if body.get("adopt_stack_data"):  # `stack adopt`: the template comes with the data
        given = translate.anneal_body({**body, "adopt_stack_data": None}, existing=True)
        given.pop("existing")
        adopted = {"name": translate.stack_name(body), "adopt_stack_data": body["adopt_stack_data"], **given}
        view = await abandon.adopt_stack(rt, adopted, scope(request).project)
    else:
        converted = {"name": translate.stack_name(body), **translate.anneal_body(body)}
        view = await stacks.create_stack(
            rt, engine.kick, converted, scope(request).project, request.app[DEFS]
        )
    link = views.stack_link(request, view)
    return json_response({"stack": {"id": view["id"], "links": [link]}}, 201, {"Location": link["href"]})


@routes.post(P + "/stacks/preview")
@changes_nothing
@auth("project")
async def preview_create(request: web.Request) -> web.Response:
    """`stack create --dry-run`: Heat's preview stack (no status, id ``None``) with the resources it would make."""
    body = await read_object(request, shared=True)
    converted = {"name": translate.stack_name(body), **translate.anneal_body(body)}
    found = await preview.preview_create(request.app[RUNTIME], converted, scope(request).project)
    project, name = scope(request).project, found["name"]
    view = {
        **found, "id": "None", "status": None, "status_reason": None, "created_at": time.time(),
        "updated_at": None, "action": "CREATE", "parent": None,
    }  # fmt: skip
    stack = views.stack_detail(request, view, found["description"], None)
    for key in ("stack_status", "stack_status_reason"):
        stack.pop(key)
    stack["resources"] = [_previewed(project, name, r) for r in found["resources"]]
    return json_response({"stack": stack})


def _previewed(project: str, stack_name: str, res: dict[str, Any]) -> dict[str, Any]:
    """A resource as Heat's create preview lists it (format_stack_resource with its properties)."""
    item = _changed(project, (stack_name, "None"), {"name": res["name"], "type": res["type"], "row": None})
    item.update(
        required_by=res["required_by"], properties=res["properties"], metadata=res["metadata"], description=""
    )
    return item


@routes.route("*", P + "/stacks/{stack_name}")
@auth("project")
async def lookup(request: web.Request) -> web.Response:
    """Heat's lookup: a stack's name or id redirects (302) to its canonical URL, query kept."""
    return await _redirect(request, "")


@routes.route("*", P + "/stacks/{stack_name}/{path:" + SUBPATHS + "}")
@auth("project")
async def lookup_subpath(request: web.Request) -> web.Response:
    return await _redirect(request, request.match_info["path"])


async def _redirect(request: web.Request, path: str) -> web.Response:
    ref = request.match_info["stack_name"]
    async with request.app[RUNTIME].sessions() as session:
        try:
            stack = await stacks.get_stack(session, ref, *stacks.STATE_ONLY, within=within(request))
            name, stack_id = stack.name, stack.id
        except NotFoundError:
            if path != "events":
                raise NotFoundError(f"The Stack ({ref}) could not be found.", where="stack") from None
            name, stack_id = await _deleted(session, ref)
    location = views.stack_url(request, name, stack_id) + (f"/{path}" if path else "")
    if request.query_string:
        location += "?" + request.query_string
    return web.Response(status=302, headers={"Location": location})


async def _deleted(session: Any, ref: str) -> tuple[str, str]:
    """A deleted stack's name and id from its events, so its event list still answers (as Heat's)."""
    found = (
        await session.execute(
            select(EventRow.stack_name, EventRow.stack_id)
            .where((EventRow.stack_name == ref) | ((EventRow.stack_id == ref) & (EventRow.stack_name != "")))
            .order_by(EventRow.id.desc())
            .limit(1)
        )
    ).first()
    if found is None:
        raise NotFoundError(f"The Stack ({ref}) could not be found.", where="stack")
    return str(found[0]), str(found[1])


@routes.get(STACK)
@auth("project")
async def show_stack(request: web.Request) -> web.Response:
    """The stack with its parameters and (unless ``resolve_outputs=false``) its outputs."""
    resolve = bool_param(request, "resolve_outputs", True)
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"], *stacks.STATE_ONLY
        )
        outputs = (
            await queries.stack_outputs(session, request.app[DEFS], stack.id, within=within(request))
            if resolve
            else None
        )
        view = stacks.stack_view(stack)
        description = await _stack_description(session, stack)
    return json_response({"stack": views.stack_detail(request, view, description, outputs)})


async def _stack_description(session: AsyncSession, stack: StackRow) -> str:
    """Its template's description: from its outline, else (a stack written before outlines) the template."""
    if stack.outline is not None and "description" in stack.outline:
        return str(stack.outline["description"] or "")
    await stacks.load_columns(session, stack, ["template"])
    return _description(stack.template)


def _description(template: Any) -> str:
    if not isinstance(template, dict):
        return ""
    return str(template.get("description") or template.get("Description") or "")  # HOT's, or CFN's


@routes.put(STACK)
@auth("project")
async def update_stack(request: web.Request) -> web.Response:
    return await _update(request, existing=False)


@routes.patch(STACK)
@auth("project")
async def patch_stack(request: web.Request) -> web.Response:
    """Heat's PATCH: the stack's parameters, environment, files and template stay unless given."""
    return await _update(request, existing=True)


async def _update(request: web.Request, *, existing: bool) -> web.Response:
    body = translate.anneal_body(await read_object(request, shared=True), existing=existing)
    stack_id = await _identify(request)
    rt, engine = request.app[RUNTIME], request.app[ENGINE]
    await stacks.update_stack(
        rt, engine.kick, stack_id, body, keep_rollback=True, within=within(request), defs=request.app[DEFS]
    )
    return web.Response(status=202)


async def _identify(request: web.Request) -> str:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"], *stacks.STATE_ONLY
        )
        return stack.id


@routes.delete(STACK)
@auth("project")
async def delete_stack(request: web.Request) -> web.Response:
    stack_id = await _identify(request)
    await stacks.delete_stack(
        request.app[RUNTIME], request.app[ENGINE].kick, stack_id, within=within(request)
    )
    return web.Response(status=204)


@routes.get(STACK + "/template")
@auth("project")
async def stack_template(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"]
        )
        return json_response(stack.template)


@routes.get(STACK + "/environment")
@auth("project")
async def stack_environment(request: web.Request) -> web.Response:
    """The merged environment, the stack's given parameters in it (hidden ones masked), as Heat returns it."""
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"]
        )
        env = dict(stack.environment)
        hidden = set(stack.hidden)
        given = {**(env.get("parameters") or {}), **stack.params_given}
        env["parameters"] = {k: MASK if k in hidden else v for k, v in given.items()}
        env["parameter_defaults"] = {
            k: MASK if k in hidden else v for k, v in (env.get("parameter_defaults") or {}).items()
        }
    return json_response({**env, "encrypted_param_names": [], "event_sinks": []})


@routes.get(STACK + "/files")
@auth("project")
async def stack_files(request: web.Request) -> web.Response:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"]
        )
        return json_response(dict(stack.files))


@routes.get(STACK + "/outputs")
@auth("project")
async def list_outputs(request: web.Request) -> web.Response:
    outputs = await _outputs(request)
    return json_response(
        {"outputs": [{"output_key": o["output_key"], "description": o["description"]} for o in outputs]}
    )


@routes.get(STACK + "/outputs/{output_key}")
@auth("project")
async def show_output(request: web.Request) -> web.Response:
    key = request.match_info["output_key"]
    found = next((o for o in await _outputs(request) if o["output_key"] == key), None)
    if found is None:
        raise NotFoundError(f"Specified output key {key} not found.", where="output_key")
    return json_response({"output": found})


async def _outputs(request: web.Request) -> list[dict[str, Any]]:
    async with request.app[RUNTIME].sessions() as session:
        stack = await identified_stack(
            session, request.match_info["stack_name"], request.match_info["stack_id"]
        )
        return await queries.stack_outputs(session, request.app[DEFS], stack.id, within=within(request))


@routes.put(STACK + "/preview")
@changes_nothing
@auth("project")
async def preview_update(request: web.Request) -> web.Response:
    return await _preview(request, existing=False)


@routes.patch(STACK + "/preview")
@changes_nothing
@auth("project")
async def preview_patch(request: web.Request) -> web.Response:
    return await _preview(request, existing=True)


async def _preview(request: web.Request, *, existing: bool) -> web.Response:
    """``{"resource_changes": {added, deleted, replaced, updated, unchanged}}``; nothing changes."""
    bool_param(request, "show_nested")
    body = translate.anneal_body(await read_object(request, shared=True), existing=existing)
    names = request.match_info["stack_name"], request.match_info["stack_id"]
    found = await preview.preview_update(request.app[RUNTIME], *names, body)
    project = scope(request).project
    changes = {kind: [_changed(project, names, item) for item in items] for kind, items in found.items()}
    return json_response({"resource_changes": changes})


def _changed(project: str, names: tuple[str, str], item: dict[str, Any]) -> dict[str, Any]:
    """A resource as Heat's preview lists it (format_stack_resource without detail)."""
    row, stack = item["row"], {"tenant": project, "stack_name": names[0], "stack_id": names[1], "path": ""}
    return {
        "resource_name": item["name"],
        "resource_type": item["type"],
        "resource_action": row.action if row is not None else "INIT",
        "resource_status": row.status if row is not None else "COMPLETE",
        "resource_status_reason": row.status_reason if row is not None else "",
        "physical_resource_id": (row.physical_id if row is not None else None) or "",
        "resource_identity": {**stack, "path": f"/resources/{item['name']}"},
        "stack_identity": stack,
        "stack_name": names[0],
        "required_by": [],
    }


@routes.delete(STACK + "/abandon")
@auth("project")
async def abandon_stack(request: web.Request) -> web.Response:
    """Heat's abandon data; the stack is removed and nothing runs on its servers (control/services/abandon.py)."""
    stack_id = await _identify(request)
    target = handover.read_target(await read_details(request))  # `openstack stack abandon` sends none
    return json_response(
        await abandon.abandon_stack(request.app[RUNTIME], stack_id, target, within=within(request))
    )


@routes.get(STACK + "/export")
@auth("project")
async def export_stack(request: web.Request) -> web.Response:
    """Heat's export: the stack's abandon data; the stack stays as it is (control/services/abandon.py)."""
    stack_id = await _identify(request)
    return json_response(await abandon.export_stack(request.app[RUNTIME], stack_id, within=within(request)))


@routes.route("*", STACK + "/snapshots")
@routes.route("*", STACK + "/snapshots/{path:.*}")
@auth("project")
async def not_supported(request: web.Request) -> web.Response:
    """Named here so the answer says why instead of a bare 404 (docs/heat-api.md, "Snapshots")."""
    raise BadRequestError(
        "stack snapshots are not supported: a snapshot would hold the stack's records and inputs but nothing "
        "of its servers, so restoring one could not bring them back to that moment",
        where="snapshots",
    )
