"""The operator commands: build requests, print answers, follow progress."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from control.cli import access, check, events, follow, graph, log, pages, plan
from control.cli.client import Client, ClientError, api_path
from control.cli.output import show

Handler = Callable[[Client, argparse.Namespace], int]

COLUMNS: dict[tuple[str, ...], list[str]] = {
    ("stack", "list"): ["name", "status", "status_reason", "version"],
    ("stack", "list", "nested"): ["name", "status", "status_reason", "version", "parent", "parent_resource"],
    ("stack", "outputs"): ["output_key", "output_value"],
    ("stack", "resources"): pages.RESOURCE_COLUMNS,
    ("stack", "failures"): ["resource", "status", "reason", "deploy_status_code"],
    ("deployment", "attempts"): ["attempt", "status_code", "timed_out", "started_at", "ended_at", "stderr"],
    ("server", "list"): ["name", "id", "status", "agent", "serial"],
}


def run(args: argparse.Namespace) -> int:
    """Run the command the parsed *args* name; its exit status."""
    client = Client.from_env(args.config, args.in_project)
    handler = COMMANDS.get((args.group, args.command))
    if handler is None:
        raise ClientError(f"unknown command {args.group} {args.command}")
    return handler(client, args)


# ------------------------------------------------------------------ stacks


def _request(args: argparse.Namespace) -> dict[str, Any]:
    """The stack request the command's files make (control.hot, which reads them, loads for it alone)."""
    from control.cli.stack_request import stack_request  # noqa: PLC0415

    return stack_request(args)


def _stack_create(client: Client, args: argparse.Namespace) -> int:
    body = _request(args)
    if args.rollback:
        body["rollback"] = True
    stack = client.call("POST", api_path("stacks"), body)
    return follow.after_change(client, args, stack, "created")


def _stack_update(client: Client, args: argparse.Namespace) -> int:
    body = _request(args)
    body["existing"] = args.existing
    if args.rollback:
        body["rollback"] = True
    if args.if_match:
        body["if_match"] = args.if_match
    if args.dry_run:
        return plan.dry_run(client, args, body)
    stack = client.call("PUT", api_path("stacks", args.name), body)
    return follow.after_change(client, args, stack, "update started")


def _stack_delete(client: Client, args: argparse.Namespace) -> int:
    query = {"force": "true"} if args.force else None
    stack = client.call("DELETE", api_path("stacks", args.name), query=query)
    return follow.after_change(client, args, stack, "delete started")


def _handover_body(args: argparse.Namespace) -> dict[str, Any]:
    """``{to, to_key}`` from ``--to URL --to-key FILE`` (what `anneal key show -f json` printed there)."""
    if not args.to and not args.to_key:
        return {}
    if not (args.to and args.to_key):
        raise ClientError("--to and --to-key go together: the receiving control plane's URL and key file")
    try:
        return {"to": args.to, "to_key": json.loads(args.to_key.read_text())}
    except (OSError, ValueError) as e:
        raise ClientError(f"--to-key {args.to_key}: {e}") from e


def _stack_handover(client: Client, args: argparse.Namespace) -> int:
    body = {} if args.clear else _handover_body(args)
    if not body and not args.clear:
        raise ClientError("give --to URL --to-key FILE, or --clear")
    show(client.call("PUT", api_path("stacks", args.name, "handover"), body), args.format)
    return 0


def _stack_abandon(client: Client, args: argparse.Namespace) -> int:
    body = _handover_body(args) or None
    text = json.dumps(client.call("POST", api_path("stacks", args.name, "abandon"), body), indent=2)
    if args.output_file:
        args.output_file.write_text(text)
    else:
        print(text)
    return 0


def _stack_adopt(client: Client, args: argparse.Namespace) -> int:
    body = {"name": args.name, "adopt_stack_data": json.loads(args.adopt_file.read_text())}
    show(client.call("POST", "/v1/adopt", body), args.format)
    return 0


def _stack_suspend(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", api_path("stacks", args.name, "suspend"))
    return follow.after_change(client, args, stack, "suspend started")


def _stack_resume(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", api_path("stacks", args.name, "resume"))
    return follow.after_change(client, args, stack, "resume started")


def _stack_list(client: Client, args: argparse.Namespace) -> int:
    if args.nested:
        data = client.call("GET", api_path("stacks"), query={"nested": "true"})
        show(data, args.format, COLUMNS[("stack", "list", "nested")])
        return 0
    show(client.call("GET", api_path("stacks")), args.format, COLUMNS[("stack", "list")])
    return 0


def _stack_show(client: Client, args: argparse.Namespace) -> int:
    if args.resources_limit < 0:
        raise ClientError("--resources-limit: 0 (every resource) or more")
    query = {"resources_limit": str(args.resources_limit)} if args.resources_limit else None
    stack = client.call("GET", api_path("stacks", args.name), query=query)
    if args.format != "table":
        show(stack, args.format)
        return 0
    resources, outputs = stack.pop("resources"), stack.pop("outputs")
    more = stack.pop("resources_more", False)
    show(stack, "table")
    print("resources:")
    show(resources, "table", COLUMNS[("stack", "resources")])
    if more:
        pages.next_page(["stack", "resources", args.name], resources, len(resources))
    print("outputs:")
    show(outputs, "table", COLUMNS[("stack", "outputs")])
    return 0


def _stack_outputs(client: Client, args: argparse.Namespace) -> int:
    show(
        client.call("GET", api_path("stacks", args.name, "outputs")),
        args.format,
        COLUMNS[("stack", "outputs")],
    )
    return 0


def _stack_failures(client: Client, args: argparse.Namespace) -> int:
    data = client.call("GET", api_path("stacks", args.name, "failures"))
    if args.format == "table":
        for f in data:
            follow.print_failure(f)
        if not data:
            print("(no failures)")
        return 0
    show(data, args.format, COLUMNS[("stack", "failures")])
    return 0


def _stack_cancel(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", api_path("stacks", args.name, "cancel"))
    show(stack, args.format)
    return 0


def _stack_converge(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", api_path("stacks", args.name, "converge"))
    return follow.after_change(
        client, args, stack, f"converge started ({len(stack.get('reapplied', []))} to re-apply)"
    )


def _stack_resource(client: Client, args: argparse.Namespace) -> int:
    """`stack resource signal STACK RESOURCE [--data JSON]`."""
    try:
        details = json.loads(args.data) if args.data else {}
    except ValueError as e:
        raise ClientError(f"--data: not JSON: {e}") from e
    path = api_path("stacks", args.name, "resources", args.resource, "signal")
    result = client.call("POST", path, details)
    if args.format == "table":
        print(f"{result['stack']}/{result['resource']}: {result['result']}")
        return 0
    show(result, args.format)
    return 0


# ------------------------------------------------------------------ deployments, servers


def _deployment_show(client: Client, args: argparse.Namespace) -> int:
    dep = client.call("GET", api_path("deployments", args.id))
    if not args.attempts:
        show(dep, args.format)
        return 0
    # One attempt only (no retry policy): the result is that attempt.
    rows = dep.get("attempts") or [
        {"attempt": 1, "status_code": dep.get("deploy_status_code"), "stderr": dep.get("deploy_stderr")}
    ]
    if args.format == "table":
        rows = [{**r, "stderr": _last_line(r.get("stderr"))} for r in rows]
    show(rows, args.format, COLUMNS[("deployment", "attempts")])
    return 0


def _last_line(text: Any) -> str:
    lines = [line for line in str(text or "").splitlines() if line.strip()]
    return lines[-1][-100:] if lines else ""


def _deployment_log(client: Client, args: argparse.Namespace) -> int:
    return log.show_log(client, args.id, follow=args.follow, timeout=args.timeout)


def _server_create(client: Client, args: argparse.Namespace) -> int:
    body = {"name": args.name}
    if args.transport:
        body["transport"] = args.transport
    if getattr(args, "heat_compatible", False):
        body["heat_compatible"] = True
    server = client.call("POST", api_path("servers"), body)
    if "metadata_url" not in server:
        return _print_token(client, args, server)
    if args.format != "table":
        show(server, args.format)
        return 0
    print(f"server {server['name']} ({server['id']}) runs Heat's agent chain.")
    print(f"metadata URL (a capability; keep it secret): {server['metadata_url']}")
    print(f"on the server: os-collect-config --request-metadata-url '{server['metadata_url']}' request local")
    return 0


def _server_transport(client: Client, args: argparse.Namespace) -> int:
    show(client.call("PATCH", api_path("servers", args.name), {"transport": args.transport}), args.format)
    return 0


def _signal_import(client: Client, args: argparse.Namespace) -> int:
    from control.cli import signal_import  # noqa: PLC0415 (the agent's offline transport loads for it alone)

    results, errors = signal_import.import_dir(client, args.dir)
    show(results, args.format, ["file", "deployment_id", "generation", "status", "duplicate"])
    for error in errors:
        print(f"anneal signal import: {error}", file=sys.stderr)
    return 1 if errors else 0


def _server_media(client: Client, args: argparse.Namespace) -> int:
    from control.cli import signal_import  # noqa: PLC0415 (as in _signal_import)

    bundle = client.call("POST", api_path("servers", args.name, "media"))
    path = signal_import.write_bundle(args.dir, bundle)
    if args.format == "table":
        print(f"server {bundle['name']} ({bundle['server_id']}): offline enrolment bundle written to {path}")
        print(
            "it holds a one-time token: keep the media private until `anneal signal import` took the request"
        )
        print("on the server: anneal-agent run --media-dir <where the media is mounted> --state-dir DIR")
        return 0
    show({"server_id": bundle["server_id"], "name": bundle["name"], "file": str(path)}, args.format)
    return 0


def _server_token(client: Client, args: argparse.Namespace) -> int:
    return _print_token(client, args, client.call("POST", api_path("servers", args.name, "token")))


def _print_token(client: Client, args: argparse.Namespace, server: dict[str, Any]) -> int:
    if args.format == "table":
        print(f"server {server['name']} ({server['id']}) awaits enrolment.")
        print(f"one-time enrolment token: {server['enrol_token']}")
        print(f"on the server: anneal-agent enrol --url {client.url} --token <token> --state-dir DIR")
        return 0
    show(server, args.format, ["enrol_token"])
    return 0


def _server_list(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", api_path("servers")), args.format, COLUMNS[("server", "list")])
    return 0


def _server_show(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", api_path("servers", args.name)), args.format)
    return 0


def _server_delete(client: Client, args: argparse.Namespace) -> int:
    query = {"force": "true"} if args.force else None
    result = client.call("DELETE", api_path("servers", args.name), query=query)
    if args.format != "table":
        show(result, args.format)
        return 0
    print(f"server {result['name']} ({result['id']}) deleted")
    if result["released_from"]:
        print(f"released from stack(s) {', '.join(result['released_from'])}")
    if result["deployments_failed"]:
        print(f"{result['deployments_failed']} deployment(s) in progress on it failed")
    return 0


def _key_show(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", api_path("keys")), args.format)
    return 0


def _key_rotate(client: Client, args: argparse.Namespace) -> int:
    result = client.call("POST", api_path("keys", "rotate"))
    if args.format == "table":
        print(f"signing key rotated: {result['previous_key_id']} -> {result['key_id']}")
        print(
            f"{result['documents_resigned']} documents re-signed; agents adopt the new key through the chain"
        )
        return 0
    show(result, args.format)
    return 0


COMMANDS: dict[tuple[str, str], Handler] = {
    ("stack", "create"): _stack_create,
    ("stack", "update"): _stack_update,
    ("stack", "delete"): _stack_delete,
    ("stack", "abandon"): _stack_abandon,
    ("stack", "handover"): _stack_handover,
    ("stack", "adopt"): _stack_adopt,
    ("stack", "suspend"): _stack_suspend,
    ("stack", "resume"): _stack_resume,
    ("stack", "list"): _stack_list,
    ("stack", "show"): _stack_show,
    ("stack", "outputs"): _stack_outputs,
    ("stack", "resources"): pages.stack_resources,
    ("stack", "failures"): _stack_failures,
    ("stack", "cancel"): _stack_cancel,
    ("stack", "check"): check.run,
    ("stack", "converge"): _stack_converge,
    ("stack", "events"): events.stack_events,
    ("stack", "graph"): graph.stack_graph,
    ("stack", "resource"): _stack_resource,
    ("deployment", "list"): pages.deployment_list,
    ("deployment", "show"): _deployment_show,
    ("deployment", "log"): _deployment_log,
    ("server", "create"): _server_create,
    ("server", "transport"): _server_transport,
    ("server", "token"): _server_token,
    ("server", "media"): _server_media,
    ("server", "list"): _server_list,
    ("server", "show"): _server_show,
    ("server", "delete"): _server_delete,
    ("key", "show"): _key_show,
    ("key", "rotate"): _key_rotate,
    ("signal", "import"): _signal_import,
    **access.COMMANDS,
}
