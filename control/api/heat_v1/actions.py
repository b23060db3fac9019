"""Heat's stack actions: ``POST .../actions`` with one of suspend, resume, check, cancel_update,
cancel_without_rollback (heat/api/openstack/v1/actions.py)."""

from __future__ import annotations

from aiohttp import web

from control.api.app_keys import ENGINE, RUNTIME
from control.api.body import read_json
from control.api.heat_v1.middleware import within
from control.api.heat_v1.resources import stack_identity
from control.api.heat_v1.stacks import STACK
from control.api.middleware import auth
from control.errors import BadRequestError
from control.services import converge, drift, stacks

ACTIONS = ("suspend", "resume", "check", "cancel_update", "cancel_without_rollback")

routes = web.RouteTableDef()


@routes.post(STACK + "/actions")
@auth("project")
async def stack_action(request: web.Request) -> web.Response:
    """202 once the action is accepted (check: CHECK_IN_PROGRESS until the servers answer)."""
    body = await read_json(request)
    if not isinstance(body, dict) or not body:
        raise BadRequestError("No action specified", where="body")
    if len(body) > 1:
        raise BadRequestError("Multiple actions specified", where="body")
    action = next(iter(body))
    if action not in ACTIONS:
        raise BadRequestError(f"Invalid action {action} specified; one of {', '.join(ACTIONS)}", where=action)
    stack_id = await stack_identity(request)
    rt, kick = request.app[RUNTIME], request.app[ENGINE].kick
    if action in ("suspend", "resume"):
        await stacks.change_stack(rt, kick, stack_id, action.upper(), within=within(request))
    elif action == "check":  # on the servers (services/drift.py); at once when none has a deployment
        if not await drift.start_check(rt, stack_id, within=within(request)):
            await converge.check_stack(rt, stack_id, within=within(request))
    elif action == "cancel_update":
        await stacks.cancel_stack(rt, kick, stack_id, only=("UPDATE",), rollback=True, within=within(request))
    else:
        await stacks.cancel_stack(rt, kick, stack_id, only=("CREATE", "UPDATE"), within=within(request))
    return web.Response(status=202)
