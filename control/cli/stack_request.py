"""A stack request's body from files: the template, the files it names with get_file, environments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agent import wire_files
from control.cli.client import ClientError
from control.hot.errors import TemplateError
from control.hot.loader import load_yaml

#: Files get_file of one directory may carry.
MAX_DIRECTORY_FILES = 1000


def stack_request(args: argparse.Namespace) -> dict[str, Any]:
    """Read the template, its get_file files and the environments; parse -P pairs."""
    template_text = _read(args.template, "template")
    try:
        # The control plane's own reader (JSON fast path, alias and nesting caps); the size
        # cap is the control plane's to apply, so none here.
        parsed = load_yaml(template_text, str(args.template), max_bytes=len(template_text.encode()))
    except TemplateError as e:
        raise ClientError(str(e)) from e
    files: dict[str, Any] = {}
    for ref in sorted(_get_files(parsed)):
        path = Path(ref) if Path(ref).is_absolute() else args.template.parent / ref
        if ref.startswith(("http://", "https://")):
            raise ClientError(f"{args.template}: get_file {ref!r}: only local files are supported")
        _check_inside(args, ref, path)
        files[ref] = _file(path, f"get_file {ref!r} in {args.template}")
    params = {}
    for pair in args.parameter:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"-P {pair!r}: expected KEY=VALUE")
        params[key] = value
    return {
        "name": args.name,
        "template": template_text,
        "files": files,
        "parameters": params,
        "environments": [_read(p, "environment") for p in args.environment],
    }


def _check_inside(args: argparse.Namespace, ref: str, path: Path) -> None:
    """Warn when *path* is outside the template's directory; refuse it under --no-upload-outside.

    Absolute names, ``../`` and symlinks out all count: a template written elsewhere must not
    choose which of this machine's files leave it."""
    home = args.template.parent.resolve()
    target = path.resolve()
    if target.is_relative_to(home):
        return
    what = f"{args.template}: get_file {ref!r} names {target}, outside the template's directory {home}"
    if getattr(args, "no_upload_outside", False):
        raise ClientError(f"{what}; refused (--no-upload-outside)")
    print(
        f"anneal: warning: {what}; it is uploaded (--no-upload-outside refuses such files)", file=sys.stderr
    )


def _file(path: Path, what: str) -> Any:
    """A get_file target as ``files`` carries it: text, a binary envelope, or a directory's files."""
    if not path.is_dir():
        return wire_files.carried(_read_bytes(path, what))
    found = sorted(p for p in path.rglob("*") if p.is_file())
    if len(found) > MAX_DIRECTORY_FILES:
        raise ClientError(
            f"{what}: {path} holds {len(found)} files, over the {MAX_DIRECTORY_FILES} get_file takes"
        )
    entries = {p.relative_to(path).as_posix(): wire_files.carried(_read_bytes(p, what)) for p in found}
    return {wire_files.DIRECTORY_KEY: entries}


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ClientError(f"{what}: cannot read {path}: {e.strerror}") from e


def _read(path: Path, what: str) -> str:
    try:
        return _read_bytes(path, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ClientError(f"{what}: {path} is not UTF-8 text (byte {e.start})") from e


def _get_files(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if list(node) == ["get_file"] and isinstance(node["get_file"], str):
            found.add(node["get_file"])
        for value in node.values():
            found |= _get_files(value)
    elif isinstance(node, list):
        for value in node:
            found |= _get_files(value)
    return found
