"""`anneal template validate`: the control plane's checks of a stack request, run offline.

No control plane, no credentials: the template, its get_file files, environments and -P
parameters go through the function a stack create runs (``stack_request.validated``: the
checks, and the dry run of every resource, nested stacks included, under the evaluation
budget and the allowed_pattern and yaql time bounds), so a CI pipeline sees the error
(code, message, path) the API would answer with, and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from control import hot
from control.cli.output import show, table
from control.cli.stack_request import stack_request
from control.hot.cfnformat import FORMATS

MASK = "******"


def validate(args: argparse.Namespace) -> int:
    """Check the files *args* name; print what was found and return 0, or the error and 1."""
    # Here and in check(), not at the top: the operator's CLI loads no server-side module
    # (SQLAlchemy, the engine) until it validates.
    from control.errors import BadRequestError  # noqa: PLC0415

    body = stack_request(args, offline=True)
    try:
        checked = check(args, body)
    except (hot.TemplateError, BadRequestError) as e:
        error: dict[str, Any]
        if isinstance(e, hot.TemplateError):
            error = {"code": "invalid_template", "message": str(e), "where": e.path}
        else:
            error = {"code": e.code, "message": e.message, "where": e.where}
        if args.format == "table":
            print(f"anneal: error: {args.template}: {error['message']}", file=sys.stderr)
        else:
            show({"error": error}, args.format)
        return 1
    found = summary(checked)
    if args.format != "table":
        show(found, args.format)
        return 0
    version = found["heat_template_version"]
    key = next((k for k, (v, _) in FORMATS.items() if v == version), "heat_template_version")
    print(
        f"{args.template}: valid ({key} {version}, "
        f"{len(found['resources'])} resources, {len(found['parameters'])} parameters, "
        f"{len(found['outputs'])} outputs)"
    )
    if found["resources"]:
        print(table(found["resources"], ["resource", "type"]))
    for warning in found["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def check(args: argparse.Namespace, body: dict[str, Any]) -> hot.Checked:
    """What `stack create` checks of *body*, under the limits *args* give as `anneal serve` would."""
    from control.services.stack_request import validated  # noqa: PLC0415 (as in validate())
    from control.settings import Settings  # noqa: PLC0415

    settings = Settings(
        data_dir=Path("."),  # nothing is read or written there
        max_template_bytes=args.max_template_bytes,
        max_evaluation_bytes=args.max_evaluation_bytes,
        max_nested_depth=args.max_nested_depth,
    )
    source, env = hot.load_sources(body["template"], body["environments"], args.max_template_bytes)
    defn, warnings = validated(
        settings,
        source,
        body["files"],
        env,
        body["parameters"],
        stack_name="validate",
        stack_id="",
        nesting=hot.Nesting(0, args.max_nested_depth),
    )
    found = (*defn.template.warnings, *defn.params.warnings, *warnings)
    return hot.Checked(defn.template, env, defn.params, defn.conditions, found)


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
