"""The node allowlist's settings and decisions (the agent end to end: tests/integration/test_node_allowlist.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from agent import allowlist, config, wire
from agent.errors import ConfigError

BASE = config.AgentConfig(
    url="u", server_id="s", name="n", credential="c", document_url="d", heartbeat_url="h"
)


def item(group: str, text: object) -> wire.DeploymentItem:
    return wire.DeploymentItem(id="i", name="n", group=group, creation_time="", config=text)


def test_allowlist_survives_a_save_and_load(tmp_path: Path) -> None:
    """allowed_groups and allowed_configs written to agent.json come back as given; absent stays None."""
    config.save(tmp_path, BASE.with_overrides(allowed_groups=("script",), allowed_configs=()))
    loaded = config.load(tmp_path)
    assert loaded is not None and (("script",), ()) == (loaded.allowed_groups, loaded.allowed_configs)
    config.save(tmp_path / "plain", BASE)
    plain = config.load(tmp_path / "plain")
    assert plain is not None and (None, None) == (plain.allowed_groups, plain.allowed_configs)


def test_a_malformed_allowlist_in_agent_json_is_a_config_error(tmp_path: Path) -> None:
    """A string where a list belongs is refused at load, naming the key, never read as 'allow any'."""
    config.save(tmp_path, BASE)
    raw = json.loads(config.config_path(tmp_path).read_text())
    config.config_path(tmp_path).write_text(json.dumps({**raw, "allowed_groups": "script"}))
    with pytest.raises(ConfigError, match="allowed_groups: expected a list of strings"):
        config.load(tmp_path)


def test_digest_of_a_script_is_what_sha256sum_prints() -> None:
    """A text config's digest is SHA-256 of its UTF-8 bytes; a structured one's of its canonical JSON."""
    assert "sha256:" + hashlib.sha256(b"#!/bin/sh\necho hi\n").hexdigest() == allowlist.config_digest(
        "#!/bin/sh\necho hi\n"
    )
    assert (
        allowlist.config_digest({"b": 1, "a": [2]})
        == "sha256:" + hashlib.sha256(b'{"a":[2],"b":1}').hexdigest()
    )


def test_refusal_decisions() -> None:
    """None allows any, an empty list allows none, and a refusal is status 126 with the reason."""
    assert allowlist.refusal(BASE, item("puppet", "x")) is None
    none_allowed = BASE.with_overrides(allowed_groups=())
    refused = allowlist.refusal(none_allowed, item("script", "x"))
    assert refused is not None and 126 == refused.status_code
    assert refused.extra["refused"] == refused.stderr and "'script'" in refused.stderr
    pinned = BASE.with_overrides(allowed_configs=(allowlist.config_digest("x"),))
    assert allowlist.refusal(pinned, item("script", "x")) is None
    assert allowlist.refusal(pinned, item("script", "y")) is not None
