"""`anneal stack graph NAME`: the stack's dependency graph as Graphviz DOT (`| dot -Tsvg > g.svg`).

A node per resource, labelled with its type and status and filled by status; an edge from
each resource to what it needs, labelled with why (depends_on, get_attr, get_resource,
server). Replaced resources still being cleaned up are dashed.
"""

from __future__ import annotations

import argparse
from typing import Any

from control.cli.client import Client, api_path

COLOURS = {"COMPLETE": "palegreen", "IN_PROGRESS": "lightskyblue", "FAILED": "salmon"}


def quote(text: str) -> str:
    """*text* as a DOT quoted string: backslashes and double quotes escaped, line breaks as \\n."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{escaped}"'


def dot(graph: dict[str, Any]) -> str:
    """The DOT text of a graph as ``GET /v1/stacks/{name}/graph`` answers it."""
    lines = [
        f"digraph {quote(graph['stack'])} {{",
        "  rankdir=BT;",
        '  node [shape=box, style="rounded,filled"];',
    ]
    for node in graph["nodes"]:
        status = str(node["status"])
        ident = node["name"] if node["current"] else f"{node['name']} (old)"
        label = f"{node['name']}\n{node['type']}\n{status}"
        style = "" if node["current"] else ', style="rounded,filled,dashed"'
        colour = COLOURS.get(status.rsplit("_", 1)[-1], "white")
        lines.append(f"  {quote(ident)} [label={quote(label)}, fillcolor={quote(colour)}{style}];")
    for edge in graph["edges"]:
        label = ", ".join(edge["kinds"])
        lines.append(f"  {quote(edge['from'])} -> {quote(edge['to'])} [label={quote(label)}];")
    lines.append("}")
    return "\n".join(lines)


def stack_graph(client: Client, args: argparse.Namespace) -> int:
    print(dot(client.call("GET", api_path("stacks", args.name, "graph"))))
    return 0
