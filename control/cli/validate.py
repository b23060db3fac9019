"""`anneal template validate`: the control plane's checks of a stack request, run offline.

No control plane, no credentials: the template, its get_file files, environments and -P
parameters go through ``control.hot.validate``, the checks a stack create runs, so a CI
pipeline sees the error (code, message, path) the API would answer with, and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from control import hot
from control.cli.output import show, table
from control.cli.stack_request import stack_request

MASK = "******"


def validate(args: argparse.Namespace) -> int:
    """Check the files *args* name; print what was found and return 0, or the error and 1."""
    body = stack_request(args, offline=True)
    try:
        checked = hot.validate(
            body["template"],
            files=body["files"],
            environments=body["environments"],
            parameters=body["parameters"],
            max_bytes=args.max_template_bytes,
            max_nested_depth=args.max_nested_depth,
        )
    except hot.TemplateError as e:
        error = {"error": {"code": "invalid_template", "message": str(e), "where": e.path}}
        if args.format == "table":
            print(f"anneal: error: {args.template}: {e}", file=sys.stderr)
        else:
            show(error, args.format)
        return 1
    found = summary(checked)
    if args.format != "table":
        show(found, args.format)
        return 0
    print(
        f"{args.template}: valid (heat_template_version {found['heat_template_version']}, "
        f"{len(found['resources'])} resources, {len(found['parameters'])} parameters, "
        f"{len(found['outputs'])} outputs)"
    )
    if found["resources"]:
        print(table(found["resources"], ["resource", "type"]))
    for warning in found["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def summary(checked: hot.Checked) -> Any:
    """What the template defines: resources and their types, parameters (hidden ones masked), warnings."""
    values = checked.params.values
    hidden = checked.params.hidden
    return {
        "valid": True,
        "heat_template_version": checked.template.version,
        "resources": [{"resource": n, "type": r.type} for n, r in checked.template.resources.items()],
        "parameters": {k: MASK if k in hidden else hot.plain(v) for k, v in values.items()},
        "outputs": sorted(checked.template.outputs),
        "warnings": list(checked.warnings),
    }
