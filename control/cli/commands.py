"""The operator commands: build requests, print answers, follow progress."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from control.cli import log, signal_import
from control.cli.client import Client, ClientError
from control.hot import TemplateError, load_yaml

COLUMNS = {
    ("stack", "list"): ["name", "status", "status_reason", "version"],
    ("stack", "outputs"): ["output_key", "output_value"],
    ("stack", "events"): ["time", "resource_name", "action", "status", "reason"],
    ("stack", "resources"): ["name", "type", "status", "physical_id", "current"],
    ("stack", "failures"): ["resource", "status", "reason", "deploy_status_code"],
    ("deployment", "list"): ["id", "name", "server_name", "action", "status", "status_reason"],
    ("server", "list"): ["name", "id", "status", "agent", "serial"],
}


def run(args: argparse.Namespace) -> int:
    client = Client.from_env(args.config)
    handler = globals().get(f"_{args.group}_{args.command}")
    if handler is None:
        raise ClientError(f"unknown command {args.group} {args.command}")
    result: int = handler(client, args)
    return result


# ------------------------------------------------------------------ output


TIME_KEYS = (
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "enrolled_at",
    "last_seen",
    "timestamp",
)


def show(data: Any, fmt: str, columns: list[str] | None = None) -> None:
    """Print *data* as json, yaml, bare values or a table (times readable in the last two)."""
    if fmt in ("table", "value"):
        data = _readable_times(data)
    if fmt == "json":
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif fmt == "yaml":
        print(yaml.safe_dump(data, sort_keys=True, default_flow_style=False), end="")
    elif fmt == "value":
        rows = data if isinstance(data, list) else [data]
        for row in rows:
            values = (
                [row.get(c) for c in columns]
                if columns and isinstance(row, dict)
                else (list(row.values()) if isinstance(row, dict) else [row])
            )
            print(" ".join(_cell(v) for v in values))
    elif isinstance(data, list):
        print(table(data, columns or (list(data[0]) if data else [])))
    else:
        print(table([{"field": k, "value": v} for k, v in data.items()], ["field", "value"]))


def _readable_times(data: Any) -> Any:
    if isinstance(data, list):
        return [_readable_times(d) for d in data]
    if isinstance(data, dict):
        return {
            k: (_iso(v) if k in TIME_KEYS and isinstance(v, (int, float)) else _readable_times(v))
            for k, v in data.items()
        }
    return data


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(line) for row in cells for line in [row[i]])) for i, c in enumerate(columns)]
    widths = [min(w, 80) for w in widths]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |", line]
    for row in cells:
        out.append("| " + " | ".join(v[:w].ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
    out.append(line)
    return "\n".join(out)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value).replace("\n", "\\n")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


# ------------------------------------------------------------------ stacks


def stack_request(args: argparse.Namespace) -> dict[str, Any]:
    """Read the template, its get_file files and the environments; parse -P pairs."""
    template_text = _read(args.template, "template")
    try:
        # The control plane's own reader (JSON fast path, alias and nesting caps); the size
        # cap is the control plane's to apply, so none here.
        parsed = load_yaml(template_text, str(args.template), max_bytes=len(template_text.encode()))
    except TemplateError as e:
        raise ClientError(str(e)) from e
    files: dict[str, str] = {}
    for ref in sorted(_get_files(parsed)):
        path = Path(ref) if Path(ref).is_absolute() else args.template.parent / ref
        if ref.startswith(("http://", "https://")):
            raise ClientError(f"{args.template}: get_file {ref!r}: only local files are supported")
        files[ref] = _read(path, f"get_file {ref!r} in {args.template}")
    params = {}
    for pair in args.parameter:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"-P {pair!r}: expected KEY=VALUE")
        params[key] = value
    return {
        "name": args.name,
        "template": template_text,
        "files": files,
        "parameters": params,
        "environments": [_read(p, "environment") for p in args.environment],
    }


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise ClientError(f"{what}: cannot read {path}: {e.strerror}") from e


def _get_files(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if list(node) == ["get_file"] and isinstance(node["get_file"], str):
            found.add(node["get_file"])
        for value in node.values():
            found |= _get_files(value)
    elif isinstance(node, list):
        for value in node:
            found |= _get_files(value)
    return found


def _stack_create(client: Client, args: argparse.Namespace) -> int:
    body = stack_request(args)
    if args.rollback:
        body["rollback"] = True
    stack = client.call("POST", "/v1/stacks", body)
    return _after_change(client, args, stack, "created")


def _stack_update(client: Client, args: argparse.Namespace) -> int:
    body = stack_request(args)
    body["existing"] = args.existing
    if args.rollback:
        body["rollback"] = True
    if args.if_match:
        body["if_match"] = args.if_match
    stack = client.call("PUT", f"/v1/stacks/{args.name}", body)
    return _after_change(client, args, stack, "update started")


def _stack_delete(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("DELETE", f"/v1/stacks/{args.name}")
    return _after_change(client, args, stack, "delete started")


def _stack_suspend(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", f"/v1/stacks/{args.name}/suspend")
    return _after_change(client, args, stack, "suspend started")


def _stack_resume(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", f"/v1/stacks/{args.name}/resume")
    return _after_change(client, args, stack, "resume started")


def _after_change(client: Client, args: argparse.Namespace, stack: dict[str, Any], what: str) -> int:
    if not args.wait:
        show(stack, args.format)
        return 0
    print(f"stack {stack['name']} {what} (version {stack['version']})")
    for warning in stack.get("warnings", []):
        print(f"warning: {warning}")
    return wait_for(client, stack["name"], args.timeout, since=_last_event_before(client, stack))


def _last_event_before(client: Client, stack: dict[str, Any]) -> int:
    """The id just before the first event of the traversal *stack* started (its "started" event)."""
    query = {"traversal": str(stack["traversal"]), "limit": "1"}
    try:
        first = client.call("GET", f"/v1/stacks/{stack['id']}/events", query=query)
    except ClientError as err:
        if err.status == 404:  # deleted before we looked: wait_for says so
            return 0
        raise
    return (first[0]["id"] - 1) if first else 0


def _print_events(events: list[dict[str, Any]], last: int) -> int:
    for ev in events:
        last = ev["id"]
        reason = f": {ev['reason']}" if ev["reason"] and ev["reason"] != "state changed" else ""
        print(f"{_when(ev['timestamp'])}  {ev['resource_name']:<24} {ev['action']}_{ev['status']}{reason}")
    return last


def wait_for(client: Client, name: str, timeout: float, since: int = 0) -> int:
    """Print events as they happen until the stack settles; 0 on COMPLETE."""
    deadline = time.monotonic() + timeout
    last = since
    while time.monotonic() < deadline:
        try:
            # The stack first: events read after it include every one up to the state it shows.
            stack = client.call("GET", f"/v1/stacks/{name}", query={"summary": "true"})
            query = {"after": str(last)}
            if stack["status"].endswith("IN_PROGRESS"):
                query["wait"] = "5"  # long-poll: answered as soon as a newer event exists
            events = client.call("GET", f"/v1/stacks/{name}/events", query=query)
        except ClientError as err:
            if err.status == 404:
                # Its events stay readable by its name: the last ones come before the verdict.
                with contextlib.suppress(ClientError):
                    _print_events(
                        client.call("GET", f"/v1/stacks/{name}/events", query={"after": str(last)}), last
                    )
                print(f"stack {name} deleted")
                return 0
            raise
        if not stack["status"].endswith("IN_PROGRESS"):
            # Events that happened between the two reads above come before the last line.
            with contextlib.suppress(ClientError):
                events = client.call("GET", f"/v1/stacks/{name}/events", query={"after": str(last)})
        last = _print_events(events, last)
        if not stack["status"].endswith("IN_PROGRESS"):
            print(f"stack {name}: {stack['status']} ({stack['status_reason']})")
            if stack["status"].endswith("FAILED"):
                for f in client.call("GET", f"/v1/stacks/{name}/failures"):
                    _print_failure(f)
                return 1
            return 0
        time.sleep(0.05)
    print(f"anneal: stack {name} still in progress after {timeout:g} s", file=sys.stderr)
    return 1


def _print_failure(f: dict[str, Any]) -> None:
    print(f"  {f['resource']}: {f['reason']}")
    for key in ("deploy_stdout", "deploy_stderr"):
        if f.get(key):
            print(f"    {key} (tail):")
            for line in str(f[key]).splitlines():
                print(f"      {line}")


def _stack_list(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", "/v1/stacks"), args.format, COLUMNS[("stack", "list")])
    return 0


def _stack_show(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("GET", f"/v1/stacks/{args.name}")
    if args.format != "table":
        show(stack, args.format)
        return 0
    resources, outputs = stack.pop("resources"), stack.pop("outputs")
    show(stack, "table")
    print("resources:")
    show(resources, "table", COLUMNS[("stack", "resources")])
    print("outputs:")
    show(outputs, "table", COLUMNS[("stack", "outputs")])
    return 0


def _stack_outputs(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", f"/v1/stacks/{args.name}/outputs"), args.format, COLUMNS[("stack", "outputs")])
    return 0


def _stack_resources(client: Client, args: argparse.Namespace) -> int:
    data = client.call("GET", f"/v1/stacks/{args.name}/resources")
    show(data, args.format, COLUMNS[("stack", "resources")])
    return 0


def _stack_failures(client: Client, args: argparse.Namespace) -> int:
    data = client.call("GET", f"/v1/stacks/{args.name}/failures")
    if args.format == "table":
        for f in data:
            _print_failure(f)
        if not data:
            print("(no failures)")
        return 0
    show(data, args.format, COLUMNS[("stack", "failures")])
    return 0


def _stack_cancel(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", f"/v1/stacks/{args.name}/cancel")
    show(stack, args.format)
    return 0


def _stack_check(client: Client, args: argparse.Namespace) -> int:
    """Exit 0 when in sync, 1 when anything drifted."""
    report = client.call("GET", f"/v1/stacks/{args.name}/check")
    if args.format != "table":
        show(report, args.format)
        return 0 if report["in_sync"] else 1
    print(
        f"stack {report['stack']} ({report['status']}): {report['deployments_checked']} deployment(s) "
        f"on {report['servers']} server(s) checked"
    )
    for d in report["drift"]:
        where = d.get("resource") or d.get("server")
        print(f"  {d['kind']:<8} {where}: {d['reason']}")
    print("in sync" if report["in_sync"] else f"{len(report['drift'])} drifted")
    return 0 if report["in_sync"] else 1


def _stack_converge(client: Client, args: argparse.Namespace) -> int:
    stack = client.call("POST", f"/v1/stacks/{args.name}/converge")
    return _after_change(
        client, args, stack, f"converge started ({len(stack.get('reapplied', []))} to re-apply)"
    )


def _stack_events(client: Client, args: argparse.Namespace) -> int:
    if args.follow:
        return wait_for(client, args.name, 24 * 3600.0)
    events = client.call("GET", f"/v1/stacks/{args.name}/events")
    for e in events:
        e["time"] = _when(e["timestamp"])
    show(events, args.format, COLUMNS[("stack", "events")])
    return 0


# ------------------------------------------------------------------ deployments, servers


def _deployment_list(client: Client, args: argparse.Namespace) -> int:
    query = {"stack": args.stack, "server": args.server, "status": args.status}
    data = client.call("GET", "/v1/deployments", query={k: v for k, v in query.items() if v})
    show(data, args.format, COLUMNS[("deployment", "list")])
    return 0


def _deployment_show(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", f"/v1/deployments/{args.id}"), args.format)
    return 0


def _deployment_log(client: Client, args: argparse.Namespace) -> int:
    return log.show_log(client, args.id, follow=args.follow, timeout=args.timeout)


def _server_create(client: Client, args: argparse.Namespace) -> int:
    body = {"name": args.name}
    if args.transport:
        body["transport"] = args.transport
    if getattr(args, "heat_compatible", False):
        body["heat_compatible"] = True
    server = client.call("POST", "/v1/servers", body)
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
    show(client.call("PATCH", f"/v1/servers/{args.name}", {"transport": args.transport}), args.format)
    return 0


def _signal_import(client: Client, args: argparse.Namespace) -> int:
    results, errors = signal_import.import_dir(client, args.dir)
    show(results, args.format, ["file", "deployment_id", "generation", "status", "duplicate"])
    for error in errors:
        print(f"anneal signal import: {error}", file=sys.stderr)
    return 1 if errors else 0


def _server_media(client: Client, args: argparse.Namespace) -> int:
    bundle = client.call("POST", f"/v1/servers/{args.name}/media")
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
    return _print_token(client, args, client.call("POST", f"/v1/servers/{args.name}/token"))


def _print_token(client: Client, args: argparse.Namespace, server: dict[str, Any]) -> int:
    if args.format == "table":
        print(f"server {server['name']} ({server['id']}) awaits enrolment.")
        print(f"one-time enrolment token: {server['enrol_token']}")
        print(f"on the server: anneal-agent enrol --url {client.url} --token <token> --state-dir DIR")
        return 0
    show(server, args.format, ["enrol_token"])
    return 0


def _server_list(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", "/v1/servers"), args.format, COLUMNS[("server", "list")])
    return 0


def _server_show(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", f"/v1/servers/{args.name}"), args.format)
    return 0


def _key_show(client: Client, args: argparse.Namespace) -> int:
    show(client.call("GET", "/v1/keys"), args.format)
    return 0


def _key_rotate(client: Client, args: argparse.Namespace) -> int:
    result = client.call("POST", "/v1/keys/rotate")
    if args.format == "table":
        print(f"signing key rotated: {result['previous_key_id']} -> {result['key_id']}")
        print(
            f"{result['documents_resigned']} documents re-signed; agents adopt the new key through the chain"
        )
        return 0
    show(result, args.format)
    return 0
