"""Reading ``salt-call --out=json`` state results into a short summary."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Summary:
    """What the run did: the text for deploy_stdout and its failures."""

    text: str
    #: True only when there were states and every one succeeded.
    all_succeeded: bool = False
    #: Render errors and failed states, one line each.
    errors: list[str] = field(default_factory=list)
    #: States that would change something (``test=True`` reports their result as None).
    pending: int = 0


def summarise(stdout: str) -> Summary:
    """Summarise salt-call's JSON; output that is not JSON is passed on as it is."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return Summary(stdout)
    result = doc.get("local") if isinstance(doc, dict) else None
    if isinstance(result, list):  # salt reports render and compile errors as a list
        errors = [f"salt: {item}" for item in result]
        return Summary("\n".join(errors) + "\n", errors=errors)
    if not isinstance(result, dict):
        return Summary(stdout)
    states = [s for s in result.values() if isinstance(s, dict)]
    lines, errors = [], []
    for key, state in sorted(result.items(), key=lambda kv: _order(kv[1])):
        if isinstance(state, dict):
            line = _line(key, state)
            lines.append(line)
            if state.get("result") is False:
                errors.append(line)
    changed = sum(1 for s in states if s.get("changes"))
    failed = len(errors)
    head = f"Succeeded: {len(states) - failed} (changed={changed})\nFailed: {failed}\n"
    ok = bool(states) and not failed
    pending = sum(1 for s in states if "result" in s and s["result"] is None)
    diffs = [_diff(state) for state in states if state.get("result") is None and state.get("changes")]
    text = head + "".join(f"{line}\n" for line in lines) + "".join(diffs)
    return Summary(text, ok, errors, pending)


def _diff(state: dict[str, Any]) -> str:
    """What a would-change state would change: salt's own diff when it gives one, else its changes."""
    changes = state["changes"]
    diff = changes.get("diff") if isinstance(changes, dict) else None
    body = diff if isinstance(diff, str) else json.dumps(changes, indent=1, sort_keys=True, default=str)
    return f"--- {state.get('__id__', '?')}\n{body.rstrip()}\n"


def _order(state: Any) -> int:
    run_num = state.get("__run_num__") if isinstance(state, dict) else None
    return run_num if isinstance(run_num, int) else 0


def _line(key: str, state: dict[str, Any]) -> str:
    parts = key.split("_|-")
    function = f"{parts[0]}.{parts[-1]}" if len(parts) >= 4 else key
    ident = state.get("__id__") or (parts[1] if len(parts) >= 4 else key)
    outcome = {True: "ok", False: "FAILED", None: "would change"}.get(state.get("result"), "?")
    if outcome == "ok" and state.get("changes"):
        outcome = "changed"
    comment = str(state.get("comment") or "").replace("\n", " ")[:500]
    return f"{outcome}: {ident} ({function}): {comment}"
