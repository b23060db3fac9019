"""curl as an alarm or a person signals a URL: a real curl process, its JSON answer."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def post(url: str, body: str = "") -> dict[str, Any]:
    """POST *body* (JSON text) to *url* with curl; the JSON answer (asserts curl succeeded)."""
    argv = ["curl", "-sS", "--max-time", "60", "-X", "POST", "-H", "Content-Type: application/json"]
    done = subprocess.run(
        [*argv, "--data", body, url], capture_output=True, text=True, timeout=90, check=False
    )
    assert 0 == done.returncode, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
