"""Heat's stack create/update body (heat/api/openstack/v1/stacks.py InstantiationData) as Anneal's.

Heat sends ``stack_name``, ``template`` (object or text), ``files``, ``environment``
(object or text, already merged by the client) or ``environment_files`` (names in
``files``, merged here in order, as Heat does), ``parameters``, ``timeout_mins``,
``disable_rollback`` and ``tags`` (a list or comma-separated text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from control.errors import BadRequestError

#: What Heat takes that Anneal does not, and why, for a clear 400 instead of silence.
REFUSED = {
    "template_url": "template_url is not supported: send the template itself "
    "(`openstack stack create -t FILE` reads the file and sends it)",
    "files_container": "files_container is not supported: send the files in `files` "
    "(`openstack stack create` does so for the files a template names)",
}
#: Heat's body fields that are options rather than the definition.
OPTIONS = ("timeout_mins", "disable_rollback", "tags", "clear_parameters", "converge")


def refuse_unsupported(body: Mapping[str, Any]) -> None:
    for key, reason in REFUSED.items():
        if body.get(key):
            raise BadRequestError(reason, where=key)


def _environments(body: Mapping[str, Any], files: Mapping[str, Any]) -> list[str]:
    """The environment texts in merge order: the named environment files, else the one environment."""
    names = body.get("environment_files")
    if names:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequestError(
                "environment_files: expected a list of file names", where="environment_files"
            )
        missing = [n for n in names if not isinstance(files.get(n), str)]
        if missing:
            raise BadRequestError(
                f"environment_files: {', '.join(missing)} not in files (send their text in `files`)",
                where="environment_files",
            )
        return [files[n] for n in names]
    env = body.get("environment")
    if not env:
        return []
    if isinstance(env, str):
        return [env]
    if isinstance(env, Mapping):
        return [json.dumps(env)]  # JSON is YAML: parsed and checked as any environment file
    raise BadRequestError(
        f"environment: expected an object or text, got {type(env).__name__}", where="environment"
    )


def _tags(value: Any) -> Any:
    """Heat takes tags as a list or as comma-separated text (what `--tags a,b` sends)."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return value


def anneal_body(body: Mapping[str, Any], *, existing: bool = False) -> dict[str, Any]:
    """Anneal's create/update body for Heat's *body*; *existing* is Heat's PATCH (keep what is not given)."""
    refuse_unsupported(body)
    files = body.get("files") or {}
    if not isinstance(files, Mapping):
        raise BadRequestError("files: expected an object of name -> text", where="files")
    out: dict[str, Any] = {
        "files": dict(files),
        "environments": _environments(body, files),
        "parameters": body.get("parameters") or {},
    }
    if body.get("template") is not None:
        out["template"] = body["template"]
    elif not existing:
        raise BadRequestError("No template specified", where="template")
    if existing:
        out["existing"] = True
    for key in OPTIONS:
        if key in body and body[key] is not None:
            out[key] = _tags(body[key]) if key == "tags" else body[key]
    if "disable_rollback" in out:
        out["disable_rollback"] = _flag(out["disable_rollback"], "disable_rollback")
    return out


def _flag(value: Any, name: str) -> bool:
    """Heat's extract_bool on a body field: a JSON boolean or its text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise BadRequestError(
        f'Unrecognized value "{value}" for "{name}", acceptable values are: true, false', where=name
    )


def stack_name(body: Mapping[str, Any]) -> str:
    name = body.get("stack_name")
    if name is None:
        raise BadRequestError("No stack name specified", where="stack_name")
    if not isinstance(name, str):
        raise BadRequestError(f"stack_name: expected text, got {name!r}", where="stack_name")
    return name
