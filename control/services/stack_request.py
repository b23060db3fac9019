"""What a stack create or update body says (template, files, environments, parameters, options), and
the definition it makes, checked and dry-run under the evaluation budget (`validated`).

Both APIs build this body: Anneal's own (`/v1/stacks`) sends it as it is, Heat's
(`control/api/heat_v1`) translates its fields into it first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent import wire_files
from control import hot
from control.engine import stackdef
from control.errors import BadRequestError
from control.hot import taint
from control.hot.definition import is_plain
from control.resources.validate import DryContext, DryStack, check_definition, dry_run
from control.settings import Settings

#: Heat's limits on a tag (heat/engine/api.py: extract_args).
MAX_TAG_CHARS = 80


@dataclass(frozen=True)
class StackRequest:
    """A parsed body; ``template`` is None only when an update keeps the stack's own."""

    template: Any
    files: dict[str, Any]
    environment: hot.Environment
    parameters: dict[str, Any]


def parse_request(
    body: Mapping[str, Any], max_bytes: int, *, template_optional: bool = False
) -> StackRequest:
    """Template source, files, merged environment and parameters from a create/update body.

    The template's text and each environment's are capped at *max_bytes*.
    """
    template = body.get("template")
    if isinstance(template, str):
        template = hot.load_yaml(template, "template", max_bytes)
    if template is None and template_optional:
        pass
    elif not isinstance(template, Mapping):
        raise BadRequestError("template: expected a HOT template (text or object)", where="template")
    files = body.get("files") or {}
    if not isinstance(files, Mapping):
        raise BadRequestError("files: expected an object of path -> text", where="files")
    for ref, value in files.items():
        _check_file(value, f"files.{ref}", directory=True)
    envs = body.get("environments") or []
    if not isinstance(envs, list) or not all(isinstance(e, str) for e in envs):
        raise BadRequestError("environments: expected a list of environment texts", where="environments")
    merged = hot.merge_environments(
        [hot.parse_environment(text, f"environments[{i}]", max_bytes) for i, text in enumerate(envs)]
    )
    params = body.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise BadRequestError("parameters: expected an object", where="parameters")
    source = None if template is None else stored_form(template)
    return StackRequest(source, dict(files), merged, dict(params))


def stored_form(template: Any) -> Any:
    """The template as it is stored and parsed: its JSON form. A template decoded from JSON is that
    already and is kept as it came, not copied (a stack's body is decoded with its equal parts
    shared, ``api/body.py``): at a million deployments a copy was 1.5 GB of the create's peak. Any
    other (YAML's dates, tuples, a key that is no text) is made plain, its equal parts shared."""
    return template if is_plain(template) else stackdef.plain(template, shared=True)


def _check_file(value: Any, where: str, *, directory: bool) -> None:
    """A ``files`` entry: text, a binary envelope, or (at the top) a directory of those."""
    if isinstance(value, str) or wire_files.opened(value) is not None:
        return
    inner = value.get(wire_files.DIRECTORY_KEY) if isinstance(value, Mapping) and len(value) == 1 else None
    if directory and isinstance(inner, Mapping):
        for name, entry in inner.items():
            _check_file(entry, f"{where}.{name}", directory=False)
        return
    raise BadRequestError(
        f"{where}: expected text, {{{wire_files.BINARY_KEY!r}: base64}}"
        + (f" or {{{wire_files.DIRECTORY_KEY!r}: {{path: file}}}}" if directory else ""),
        where=where,
    )


def rollback_wanted(body: Mapping[str, Any]) -> bool:
    """`rollback: true`, or Heat's `disable_rollback: false`."""
    if "disable_rollback" in body:
        value = body["disable_rollback"]
        if not isinstance(value, bool):
            raise BadRequestError("disable_rollback: expected true or false", where="disable_rollback")
        return not value
    value = body.get("rollback", False)
    if not isinstance(value, bool):
        raise BadRequestError("rollback: expected true or false", where="rollback")
    return value


def tags_given(body: Mapping[str, Any]) -> list[str] | None:
    """The body's `tags` (None when absent): strings of at most 80 characters without commas."""
    tags = body.get("tags")
    if tags is None:
        return None
    if not isinstance(tags, list):
        raise BadRequestError(f"tags: expected a list of strings, got {tags!r}", where="tags")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not tag:
            raise BadRequestError(f"tags[{i}]: expected a non-empty string, got {tag!r}", where=f"tags[{i}]")
        if len(tag) > MAX_TAG_CHARS or "," in tag:
            raise BadRequestError(
                f"tags[{i}]: {tag!r} is longer than {MAX_TAG_CHARS} characters or has a comma",
                where=f"tags[{i}]",
            )
    return list(tags)


def timeout_given(body: Mapping[str, Any]) -> int | None:
    """The body's `timeout_mins` (None when absent): a positive whole number of minutes."""
    value = body.get("timeout_mins")
    if value is None:
        return None
    try:
        minutes = int(value)
    except (TypeError, ValueError) as e:
        raise BadRequestError(f"timeout_mins: expected minutes, got {value!r}", where="timeout_mins") from e
    if minutes <= 0 or isinstance(value, bool) or (isinstance(value, float) and value != minutes):
        raise BadRequestError(
            f"timeout_mins: expected a positive whole number, got {value!r}", where="timeout_mins"
        )
    return minutes


def cleared_parameters(body: Mapping[str, Any]) -> list[str]:
    """Heat's `clear_parameters`: names an update with `existing` drops from the stack's parameters."""
    names = body.get("clear_parameters") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BadRequestError(
            "clear_parameters: expected a list of parameter names", where="clear_parameters"
        )
    return list(names)


def check_options(body: Mapping[str, Any]) -> None:
    """Refuse a body whose rollback, tags, timeout_mins or clear_parameters are malformed."""
    rollback_wanted(body)
    tags_given(body)
    timeout_given(body)
    cleared_parameters(body)


def validated(
    settings: Settings,
    template: Any,
    files: dict[str, Any],
    env: hot.Environment,
    params: dict[str, Any],
    *,
    stack_name: str,
    stack_id: str,
    nesting: hot.Nesting,
) -> tuple[stackdef.Definition, list[str]]:
    """Parse, check and dry-run a definition under one evaluation budget; raises naming the path.

    Returns it with check_definition's warnings. Called in a worker thread: a big template's
    parse, or an allowed_pattern matched without the GIL until its timeout, leaves the event
    loop serving other requests.
    """
    with hot.evaluating(hot.Budget(settings.evaluation_cap)):
        defn = stackdef.build(
            template, files, env, params, stack_name=stack_name, stack_id=stack_id, nesting=nesting
        )
        warnings = check_definition(defn.template)
        ctx = DryContext(dry_values(defn, stack_name, stack_id, ""), defn.conditions, files)
        outputs = [n for n in defn.template.outputs if defn.output_active(n)]
        dry_run(DryStack(defn.template, ctx, env, files, stack_name, nesting), defn.order(), outputs)
    return defn, warnings


def dry_values(defn: stackdef.Definition, stack_name: str, stack_id: str, project: str) -> dict[str, Any]:
    """What get_param reads in a dry run: the parameters, hidden ones as the engine gives them
    (StackContext: a Secret, so no error or preview quotes one), and the pseudo-parameters."""
    values = {k: taint.Secret(v) if k in defn.params.hidden else v for k, v in defn.params.values.items()}
    return {**values, "OS::stack_name": stack_name, "OS::stack_id": stack_id, "OS::project_id": project}


async def validated_request(
    settings: Settings, req: StackRequest, *, stack_name: str, stack_id: str, nesting: hot.Nesting
) -> tuple[stackdef.Definition, list[str]]:
    """validated() of a parsed request, in a worker thread."""
    return await asyncio.to_thread(
        validated,
        settings,
        req.template,
        req.files,
        req.environment,
        req.parameters,
        stack_name=stack_name,
        stack_id=stack_id,
        nesting=nesting,
    )
