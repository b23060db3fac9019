"""How the operator commands print: json, yaml, bare values or tables, with readable times."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

TIME_KEYS = (
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "enrolled_at",
    "last_seen",
    "timestamp",
    "expires_at",
    "revoked_at",
    "at",
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
    """Print *data* as json, yaml, bare values or a table, its times in ISO 8601 (UTC)."""
    data = readable_times(data, precise=fmt in ("json", "yaml"))
    if fmt == "json":
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif fmt == "yaml":
        import yaml  # noqa: PLC0415 (slow to import: loaded for this format alone)

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


def readable_times(data: Any, precise: bool = False) -> Any:
    """*data* with the epoch seconds under TIME_KEYS as ISO 8601 UTC (*precise*: to the millisecond)."""
    if isinstance(data, list):
        return [readable_times(d, precise) for d in data]
    if isinstance(data, dict):
        return {
            k: (
                iso(v, precise)
                if k in TIME_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)
                else readable_times(v, precise)
            )
            for k, v in data.items()
        }
    return data


def iso(ts: float, precise: bool = False) -> str:
    """*ts* (epoch seconds) as ISO 8601 in UTC, ``2026-11-26T10:00:00Z`` (*precise*: ``.123Z``)."""
    moment = datetime.fromtimestamp(ts, UTC)
    if precise:
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


#: A column is never cut below this (or its own width, if less).
MIN_COLUMN = 8
#: Whatever the width, a column is cut at this width.
MAX_COLUMN = 80


def table(rows: list[dict[str, Any]], columns: list[str], width: int | None = None) -> str:
    """A boxed table; text wider than its column ends in '…'. It fits *width* (default: the terminal's)."""
    if not rows:
        return "(none)"
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    natural = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    widths = _fit([min(w, MAX_COLUMN) for w in natural], width or _terminal())
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(_cut(c, w) for c, w in zip(columns, widths, strict=True)) + " |", line]
    for row in cells:
        out.append("| " + " | ".join(_cut(v, w) for v, w in zip(row, widths, strict=True)) + " |")
    out.append(line)
    return "\n".join(out)


def _terminal() -> int:
    """The terminal's width (COLUMNS overrides it) when printing to one; else no limit but MAX_COLUMN.

    Output read by a program (a pipe, a file) is never cut to a width it does not have.
    """
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 1 << 20


def _fit(widths: list[int], total: int) -> list[int]:
    """Narrow the widest columns until the table (borders included) fits *total*, down to MIN_COLUMN."""
    widths = list(widths)
    floors = [min(w, MIN_COLUMN) for w in widths]
    while sum(widths) + 3 * len(widths) + 1 > total:
        widest = max(range(len(widths)), key=lambda i: widths[i] - floors[i])
        if widths[widest] <= floors[widest]:
            break  # as narrow as it gets: the terminal wraps the rest
        widths[widest] -= 1
    return widths


def _cut(text: str, width: int) -> str:
    return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value).replace("\n", "\\n")


def when(ts: float) -> str:
    """The time of day of a timestamp, as event lines show it."""
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")
