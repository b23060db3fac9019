"""The CLI gathers what a template names: nested templates and their files, relative to each file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from control.cli.client import ClientError
from control.cli.stack_request import stack_request

HEAD = "heat_template_version: 2018-08-31\n"


def _args(tmp: Path, template: str, *envs: str) -> argparse.Namespace:
    return argparse.Namespace(
        name="s", template=tmp / template, environment=[tmp / e for e in envs], parameter=["a=1"]
    )


def test_nested_templates_and_their_files_are_keyed_from_the_top_directory(tmp_path: Path) -> None:
    """Each file is read beside the template naming it and keyed relative to the top template's directory."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "top.yaml").write_text(HEAD + "resources:\n  m: {type: lib/mid.yaml}\n")
    (tmp_path / "lib" / "mid.yaml").write_text(
        HEAD
        + "resources:\n  l: {type: leaf.yaml}\n  v: {type: OS::Heat::Value, properties: {value: {get_file: ../scripts/x.sh}}}\n"
    )
    (tmp_path / "lib" / "leaf.yaml").write_text(HEAD + "resources: {}\n")
    (tmp_path / "scripts" / "x.sh").write_text("echo x\n")
    body = stack_request(_args(tmp_path, "top.yaml"))
    assert set(body["files"]) == {"lib/mid.yaml", "lib/leaf.yaml", "scripts/x.sh"}
    assert body["files"]["scripts/x.sh"] == "echo x\n"


def test_environment_templates_are_read_beside_the_environment_and_renamed(tmp_path: Path) -> None:
    """A registry entry's template is read relative to its environment file and sent under its key."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "roles").mkdir()
    (tmp_path / "top.yaml").write_text(HEAD + "resources:\n  m: {type: OS::TripleO::Role}\n")
    (tmp_path / "roles" / "role.yaml").write_text(HEAD + "resources: {}\n")
    (tmp_path / "envs" / "env.yaml").write_text(
        "resource_registry:\n  OS::TripleO::Role: ../roles/role.yaml\n"
        "  resources:\n    m: {OS::Other: ../roles/role.yaml}\n"
    )
    body = stack_request(_args(tmp_path, "top.yaml", "envs/env.yaml"))
    assert set(body["files"]) == {"roles/role.yaml"}
    registry = json.loads(body["environments"][0])["resource_registry"]
    assert registry["OS::TripleO::Role"] == "roles/role.yaml"
    assert registry["resources"]["m"]["OS::Other"] == "roles/role.yaml"


def test_a_missing_nested_template_names_where_it_was_named(tmp_path: Path) -> None:
    """A template type that is not on disk is an error naming it and the template that names it."""
    (tmp_path / "top.yaml").write_text(HEAD + "resources:\n  m: {type: gone.yaml}\n")
    with pytest.raises(ClientError) as info:
        stack_request(_args(tmp_path, "top.yaml"))
    assert "type 'gone.yaml' in" in str(info.value) and "top.yaml" in str(info.value)
