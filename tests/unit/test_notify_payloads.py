"""What one process tells the others on PostgreSQL: server ids in payloads under NOTIFY's 8000-byte limit."""

from __future__ import annotations

import uuid

from control.store import notify


def test_many_ids_are_split_into_payloads_each_under_the_limit_and_none_is_lost() -> None:
    """1,000 server ids go in several payloads, each under 8000 bytes, together naming every id once."""
    ids = [str(uuid.uuid4()) for _ in range(1000)]
    sent = notify.payloads("origin1", ids)
    assert len(sent) > 1
    assert all(len(p.encode()) < 8000 for p in sent)
    parsed = [notify.parse(p) for p in sent]
    assert {origin for origin, _ in parsed} == {"origin1"}
    assert [sid for _, batch in parsed for sid in batch or []] == ids


def test_a_change_to_more_servers_than_max_ids_is_one_look_at_the_table_nudge() -> None:
    """Past MAX_IDS servers one short payload says "look at the table" instead of naming them."""
    ids = [str(uuid.uuid4()) for _ in range(notify.MAX_IDS + 1)]
    assert [("o", None)] == [notify.parse(p) for p in notify.payloads("o", ids)]


def test_one_id_is_one_payload_naming_its_origin() -> None:
    """A single change is one payload `origin:id`."""
    assert ["abc:s1"] == notify.payloads("abc", ["s1"])
    assert ("abc", ["s1"]) == notify.parse("abc:s1")


def test_the_asyncpg_connection_string_drops_the_sqlalchemy_driver_name() -> None:
    """`postgresql+asyncpg://` becomes asyncpg's `postgresql://`, keeping user, password, host and database."""
    got = notify.dsn("postgresql+asyncpg://u:p%40ss@127.0.0.1:5433/anneal")
    assert "postgresql://u:p%40ss@127.0.0.1:5433/anneal" == got
