"""How the operator commands print: json, yaml, bare values or tables, with readable times."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

TIME_KEYS = (
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "enrolled_at",
    "last_seen",
    "timestamp",
)


# C0 and C1 controls but newline and tab, DEL, and the bidirectional overrides that reorder a line.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """*text* with those characters escaped (``\\x1b``, ``\\u202e``): a name or a hook's output can
    neither move the cursor, recolour or retitle the operator's terminal, nor forge a line."""
    return _UNSAFE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


class TerminalSafe(io.TextIOBase):
    """A text stream that writes through ``terminal_safe``; the CLI prints through it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_safe(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True


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


def when(ts: float) -> str:
    """The time of day of a timestamp, as event lines show it."""
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")
