"""A stack request's body from files: the template, the files it names, environments.

Files are gathered as python-heatclient gathers them: every ``get_file`` text and every
template named as a resource type (or as a group's member type), in the template, in
the templates it nests and in the environments' ``resource_registry``, read from the
directory of the file that names it. Each is sent keyed by its path relative to the
top template's directory (``nested/server.yaml``), the key the control plane resolves a
name to (``control/hot/files.py``); environments are sent with their template names
rewritten to those keys.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agent import wire_files
from control.cli.client import ClientError
from control.hot import files as hotfiles
from control.hot.errors import TemplateError
from control.hot.loader import load_yaml

#: Files get_file of one directory may carry.
MAX_DIRECTORY_FILES = 1000


def stack_request(args: argparse.Namespace, *, offline: bool = False) -> dict[str, Any]:
    """Read the template, the files it names and the environments; parse -P pairs.

    *offline* (`anneal template validate`) leaves what the control plane would refuse (text
    that does not parse, a named file that is not there) to ``hot.validate``, so it is
    reported exactly as the API reports it.
    """
    template_text = _read(args.template, "template")
    gathered = _Files(
        args.template, refuse_outside=bool(getattr(args, "no_upload_outside", False)), offline=offline
    )
    try:
        source = _load(template_text, str(args.template))
    except ClientError:
        if not offline:
            raise
    else:
        gathered.template(source, "", str(args.template))
    environments = [gathered.environment(p) for p in args.environment]
    params = {}
    for pair in args.parameter:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"-P {pair!r}: expected KEY=VALUE")
        params[key] = value
    return {
        "name": getattr(args, "name", ""),
        "template": template_text,
        "files": gathered.files,
        "parameters": params,
        "environments": environments,
    }


class _Files:
    """The files a request carries, keyed as the control plane looks them up."""

    def __init__(self, template: Path, *, refuse_outside: bool, offline: bool = False) -> None:
        self.top_file, self.top, self.refuse_outside = template, template.parent, refuse_outside
        self.offline = offline
        self.files: dict[str, Any] = {}

    def template(self, source: Any, key: str, what: str) -> None:
        """Read what the template at *key* ("" for the top one) names, recursively."""
        for kind, ref in hotfiles.references(source):
            if ref.startswith(("http://", "https://")):
                raise ClientError(f"{what}: {ref!r}: only local files are supported")
            self._add(
                kind,
                hotfiles.key_for(key, ref),
                f"{'get_file' if kind == 'file' else 'type'} {ref!r} in {what}",
            )

    def _add(self, kind: str, key: str, what: str) -> None:
        if key in self.files:
            return
        path = self._path(key)
        if self.offline and not path.exists():
            return  # the control plane's check names it, as the API would
        self._check_inside(path, what)
        if kind != "template":
            self.files[key] = _file(path, what)
            return
        text = _read(path, what)
        self.files[key] = text
        self.template(_load(text, key), key, key)

    def _path(self, key: str) -> Path:
        if key.startswith("file://"):
            return Path(urlparse(key).path)
        if key.startswith("~"):
            return Path(key).expanduser()
        return self.top / key

    def _check_inside(self, path: Path, what: str) -> None:
        """Warn when *path* is outside the top template's directory; refuse it under
        --no-upload-outside. Absolute names, ``../`` and symlinks out all count: a template
        written elsewhere must not choose which of this machine's files leave it."""
        home, target = self.top.resolve(), path.resolve()
        if target.is_relative_to(home):
            return
        where = f"{self.top_file}: {what} names {target}, outside the template's directory {home}"
        if self.refuse_outside:
            raise ClientError(f"{where}; refused (--no-upload-outside)")
        print(
            f"anneal: warning: {where}; it is uploaded (--no-upload-outside refuses such files)",
            file=sys.stderr,
        )

    def environment(self, path: Path) -> str:
        """The environment's text, its template names made keys (relative to its own directory)."""
        text = _read(path, "environment")
        data = _load(text, str(path))
        registry = data.get("resource_registry") if isinstance(data, dict) else None
        if not isinstance(registry, dict):
            return text
        base = path.parent
        if isinstance(registry.get("base_url"), str):
            base = base / Path(urlparse(registry["base_url"]).path)
        changed = self._registry(registry, base, str(path))
        return json.dumps(data) if changed else text

    def _registry(self, entries: dict[str, Any], base: Path, what: str) -> bool:
        changed = False
        for name, value in entries.items():
            if isinstance(value, dict):
                changed = self._registry(value, base, what) or changed
            elif isinstance(value, str) and name != "base_url" and hotfiles.is_template_ref(value):
                entries[name] = self._local_key(value, base)
                self._add("template", entries[name], f"resource_registry {name!r} in {what}")
                changed = True
        return changed

    def _local_key(self, ref: str, base: Path) -> str:
        """The key of a template an environment names relative to its own directory."""
        if hotfiles.is_absolute(ref):
            return ref
        return Path(os.path.relpath((base / ref).resolve(), self.top.resolve())).as_posix()


def _load(text: str, what: str) -> Any:
    try:
        # The control plane's own reader (JSON fast path, alias and nesting caps); the size
        # cap is the control plane's to apply, so none here.
        return load_yaml(text, what, max_bytes=len(text.encode()))
    except TemplateError as e:
        raise ClientError(str(e)) from e


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
