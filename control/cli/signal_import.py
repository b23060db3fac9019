"""`anneal signal import DIR`: signals carried back on media, sent to the control plane one by one.

Each ``<deployment id>.<generation>.json`` file is posted to ``POST /v1/signals/import``;
an agent's offline enrolment request ``enrol.<server id>.json`` to ``POST
/v1/enrolments/import`` (first, so that the server's key is known before its signals).
Files are never deleted or changed: importing the same directory again is harmless
(duplicates are answered idempotently; a generation superseded since is listed as
STALE, not an error). Every bad file gets its own error line naming
the file and what is wrong; the others are still imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent import wire_caps
from agent.fsutil import write_atomic
from agent.transports import offline
from control.cli.client import Client, ClientError, api_path


def signal_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise ClientError(f"{directory}: not a directory")
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def name_of(path: Path) -> str | None:
    """``<deployment>.<generation>.json`` -> ``<deployment>/<generation>``."""
    if not path.name.endswith(".json"):
        return None
    dep, _, gen = path.name.removesuffix(".json").rpartition(".")
    if not dep or not gen.isdigit():
        return None
    return f"{dep}/{gen}"


def write_bundle(directory: Path, bundle: dict[str, Any]) -> Path:
    """``DIR/enrol.json`` (0600: it holds a one-time token), for `anneal server media`."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / offline.BUNDLE_FILE
        write_atomic(path, json.dumps(bundle, indent=2, sort_keys=True).encode(), 0o600)
        os.chmod(path, 0o600)
    except OSError as e:
        raise ClientError(f"{directory}: {e.strerror or e}") from e
    return path


def import_enrolment(client: Client, path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if len(raw) > 64 * 1024:
        raise ClientError(f"{len(raw)} bytes is over the cap of 65536")
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise ClientError(f"not JSON: {e}") from e
    result = client.call("POST", api_path("enrolments", "import"), body)
    return {"file": path.name, **result}


def import_dir(client: Client, directory: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Import every enrolment request, then every signal file; (results, errors), one entry per file."""
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    files = signal_files(directory)
    enrolments = [p for p in files if p.name.startswith("enrol.") and p.name.endswith(".json")]
    for path in enrolments:
        try:
            results.append(import_enrolment(client, path))
        except (ClientError, OSError) as e:
            errors.append(f"{path}: {e}")
    for path in files:
        if path in enrolments:
            continue
        name = name_of(path)
        if name is None:
            errors.append(f"{path}: not a signal file (expected <deployment id>.<generation>.json)")
            continue
        try:
            raw = path.read_bytes()
            if len(raw) > wire_caps.MAX_SIGNAL_BYTES:
                raise ClientError(f"{len(raw)} bytes is over the cap of {wire_caps.MAX_SIGNAL_BYTES}")
            text = raw.decode("utf-8")
            result = client.call("POST", api_path("signals", "import"), {"name": name, "signal": text})
        except UnicodeDecodeError as e:
            errors.append(f"{path}: not UTF-8 text: {e}")
            continue
        except ClientError as e:
            if e.status == 409:  # superseded by a newer generation: nothing to do, not an error
                dep, _, gen = name.partition("/")
                results.append(
                    {"file": path.name, "deployment_id": dep, "generation": int(gen), "status": "STALE"}
                )
            else:
                errors.append(f"{path}: {e}")
            continue
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        results.append({"file": path.name, **result})
    return results, errors
