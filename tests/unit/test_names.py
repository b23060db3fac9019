"""The name grammar, and what keeps names in their place: quoted URL segments, escaped terminals and logs."""

from __future__ import annotations

import io
import logging
import uuid
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from control.cli.client import api_path
from control.cli.output import terminal_safe
from control.cli.serve import OneLine
from control.hot.names import name_problem, resource_name_problem
from control.provision import AGENT_CONFIG, LocalProvisioner


def test_heats_stack_names_are_valid_and_nothing_else() -> None:
    """Letters, digits, '_-.', a letter first, at most 255; a trailing newline is not allowed."""
    for good in ("a", "web-1", "A.b_c", "x" * 255):
        assert name_problem(good, "stack") is None, good
    for bad in ("", "1a", "-a", "..", "a/b", "a b", "web\n", "x" * 256, "d\u00e9", None, 5):
        assert name_problem(bad, "stack") is not None, bad


def test_resource_names_may_start_as_heat_templates_start_them() -> None:
    """Resource names may start with a digit or '_' (group members are 0, 1 ...), never hold a '/'."""
    for good in ("0", "_private", "web.1", "a" * 255):
        assert resource_name_problem(good) is None, good
    for bad in ("", "a/b", "a\nb", "a" * 256, "\x1b[2J"):
        assert resource_name_problem(bad) is not None, bad


def test_a_refusal_quotes_the_bad_name_escaped() -> None:
    """The message shows a bad name in ASCII: its newline or escape code cannot act on the reader."""
    problem = name_problem("web\n\x1b[2J", "server")
    assert problem is not None and "\n" not in problem and "\x1b" not in problem
    assert "'web\\n\\x1b[2J'" in problem


@given(st.text(min_size=1))
def test_every_name_stays_one_path_segment(name: str) -> None:
    """Whatever a name holds ('/', '?', '#', '%', '..'), it is one quoted segment of the path."""
    path = api_path("servers", name, "token")
    assert path.startswith("/v1/servers/") and path.endswith("/token")
    segment = path.removeprefix("/v1/servers/").removesuffix("/token")
    assert not any(c in segment for c in "/?# ") and segment not in (".", "..")


def test_terminal_output_keeps_lines_and_tabs_and_escapes_the_rest() -> None:
    """ESC, BEL, CR, C1 controls and bidi overrides are shown as escapes; newline and tab stay."""
    shown = terminal_safe("a\x1b[2J\x07b\r\x9b\u202ec\td\n")
    assert shown == "a\\x1b[2J\\x07b\\r\\x9b\\u202ec\td\n"


def test_a_log_record_stays_one_line() -> None:
    """A name with a newline in a log message cannot forge a second line in `anneal serve`'s log."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(OneLine("%(levelname)s %(message)s"))
    logger = logging.getLogger("test_names.one_line")
    logger.addHandler(handler)
    try:
        logger.warning("server %s is gone", "web\nINFO forged\x1b[2J")
    finally:
        logger.removeHandler(handler)
    assert "WARNING server web\\nINFO forged\\x1b[2J is gone\n" == out.getvalue()


async def test_a_state_dir_named_by_an_earlier_version_moves_to_the_server_id(tmp_path: Path) -> None:
    """After an upgrade a local agent's state dir named `agents/<name>` becomes `agents/<id>`: enrolment kept."""
    local = LocalProvisioner(tmp_path, "http://127.0.0.1:9")
    (tmp_path / "agents" / "web").mkdir(parents=True)
    (tmp_path / "agents" / "web" / AGENT_CONFIG).write_text("{}")
    server_id = str(uuid.uuid4())
    await local._adopt_named(local.state_dir(server_id), "web")
    assert local.enrolled(server_id) and not (tmp_path / "agents" / "web").exists()


async def test_a_name_that_is_not_one_directory_entry_is_never_followed(tmp_path: Path) -> None:
    """A stored name like `..` or `a/b` moves nothing, whatever is there."""
    local = LocalProvisioner(tmp_path / "data", "http://127.0.0.1:9")
    (tmp_path / "data" / "agents" / "a" / "b").mkdir(parents=True)
    for name in ("..", ".", "a/b", ""):
        await local._adopt_named(local.state_dir(str(uuid.uuid4())), name)
    assert ["a"] == [p.name for p in (tmp_path / "data" / "agents").iterdir()]
    assert (tmp_path / "data" / "agents" / "a" / "b").is_dir()
