"""The size caps on what crosses the wire, and the trimming of a hook's output to fit them.

Part of the protocol of ``wire`` (standard library only, like it); docs/protocol.md lists
every cap and where it is enforced.
"""

from __future__ import annotations

#: Caps on a per-server document and on a signal body (bytes).
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_SIGNAL_BYTES = 1024 * 1024
#: deploy_stdout and deploy_stderr are each trimmed to this many bytes (head and tail kept).
MAX_STREAM_BYTES = 256 * 1024

#: A check's diff (docs/protocol.md, "Checks") is trimmed to this many bytes, its reason to 2 KiB.
MAX_CHECK_DIFF = 16 * 1024
MAX_CHECK_REASON = 2 * 1024
#: The agent sets this variable to 1 when it runs a hook to check, never to apply.
CHECK_ENV = "ANNEAL_CHECK"
#: A check's verdicts: the hook's result names one as ``anneal.check``.
CHECK_STATES = ("in_sync", "drifted", "unknown")


def trim_stream(text: str, cap: int = MAX_STREAM_BYTES) -> str:
    """Keep the head and the tail of *text* within *cap* UTF-8 bytes, marking the cut."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= cap:
        return text
    half = cap // 2
    head = raw[:half].decode("utf-8", "ignore")
    tail = raw[-half:].decode("utf-8", "ignore")
    return f"{head}\n[... {len(raw) - 2 * half} bytes cut ...]\n{tail}"
