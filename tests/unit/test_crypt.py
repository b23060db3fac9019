"""Secrets at rest and in documents: the database columns and the sealed values."""

from __future__ import annotations

import json
import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agent import sealed, wire
from control.documents import seal
from control.hot import taint
from control.resources import deploy
from control.settings import async_url
from control.store import crypt
from control.store.db import open_database
from control.store.orm import ConfigRow
from tests.support.database import Database


async def test_a_value_written_before_encryption_is_still_read(database: Database) -> None:
    """Migration safety: plain JSON in an encrypted column reads as it is; new writes are encrypted."""
    engine, sessions = database.engine, database.sessions
    async with engine.begin() as conn:  # as an older version wrote it: plain JSON
        await conn.exec_driver_sql(
            'INSERT INTO configs (id, name, "group", body, created_at) VALUES (?, ?, ?, ?, 0)',
            ("old", "n", "script", json.dumps({"config": "plain"})),
        )
    async with sessions() as session:
        session.add(ConfigRow(id="new", name="n", group="script", body={"config": "s3cr3t"}, created_at=0))
        await session.commit()
    async with sessions() as session:
        old, new = await session.get(ConfigRow, "old"), await session.get(ConfigRow, "new")
        assert old is not None and new is not None
        assert (old.body, new.body) == ({"config": "plain"}, {"config": "s3cr3t"})
    async with engine.connect() as conn:
        raw = (await conn.exec_driver_sql("SELECT body FROM configs WHERE id = 'new'")).scalar_one()
    await engine.dispose()
    assert json.loads(raw)["anneal_enc"] == "v1" and "s3cr3t" not in raw
    other, other_sessions = await open_database(async_url(database.url), os.urandom(32))
    try:
        async with other_sessions() as session:
            with pytest.raises(crypt.DataKeyError, match="data key"):
                await session.get(ConfigRow, "new")
    finally:
        await other.dispose()


def _pair() -> tuple[X25519PrivateKey, bytes]:
    key = X25519PrivateKey.generate()
    return key, key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


ITEM = wire.DeploymentItem(
    id="item-1",
    name="db",
    group="script",
    creation_time="2026-11-22T04:00:00Z",
    config="#!/bin/sh\nPW='hunter2-long'\n",
    inputs=(
        wire.InputItem("PLAIN", "visible"),
        wire.InputItem("TOKEN", {"k": [1, 2]}, secret=True),
        wire.InputItem("DSN", "pg://u:hunter2-long@db", secret=True),  # derived from a secret
        wire.InputItem("deploy_signal_id", "http://cp/v1/signal/d/1?sig=abc"),
    ),
)


def test_secret_fields_are_sealed_and_open_only_for_their_server_and_place() -> None:
    """Secret inputs, a secret config and credential fields are sealed; they open with the right key only."""
    private, public = _pair()
    out, fields = seal.seal_item(ITEM, "srv", public, True)
    assert set(fields) == {"config", "inputs.TOKEN", "inputs.DSN", "inputs.deploy_signal_id"}
    text = wire.canonical_json(out.to_json()).decode()
    assert "hunter2-long" not in text and "sig=abc" not in text and "visible" in text
    opened = sealed.open_item(out, fields, "srv", private)
    assert opened.config == ITEM.config and opened.input_values() == ITEM.input_values()
    assert [i.secret for i in opened.inputs] == [False, True, True, True]  # marked for masking
    with pytest.raises(sealed.SealError, match="does not open"):
        sealed.open_item(out, fields, "srv", X25519PrivateKey.generate())
    with pytest.raises(sealed.SealError, match="does not open"):
        sealed.open_item(out, fields, "other-server", private)
    moved = dict(out.to_json())
    inputs = list(moved["inputs"])
    inputs[1], inputs[2] = (
        {**inputs[1], "value": inputs[2]["value"]},
        {**inputs[2], "value": inputs[1]["value"]},
    )
    with pytest.raises(sealed.SealError, match="does not open"):
        sealed.open_item(wire.decode_item({**moved, "inputs": inputs}), fields, "srv", private)


def test_without_a_server_key_secrets_are_withheld_not_sent_in_clear() -> None:
    """A server that never enrolled gets a placeholder, and its agent says why it cannot open it."""
    out, fields = seal.seal_item(ITEM, "srv", None, True)
    assert "inputs.deploy_signal_id" not in fields  # Heat's own agents need that one as it is
    assert out.input_value("TOKEN") == sealed.UNAVAILABLE
    with pytest.raises(sealed.SealError, match="enrol"):
        sealed.open_item(out, fields, "srv", X25519PrivateKey.generate())


def test_an_item_sealed_before_enrolment_is_told_apart_so_the_agent_waits_for_the_next_document() -> None:
    """The agent leaves unrun an item rendered before its server enrolled; one sealed to its key it runs."""
    withheld, fields = seal.seal_item(ITEM, "srv", None, True)
    assert sealed.unavailable(withheld, fields)
    private = X25519PrivateKey.generate()
    closed, fields = seal.seal_item(ITEM, "srv", private.public_key().public_bytes_raw(), True)
    assert not sealed.unavailable(closed, fields)
    assert not sealed.unavailable(ITEM, ())


def test_nothing_secret_leaves_the_item_unchanged() -> None:
    """An item with no secret input, no secret config and no credential comes back as it was."""
    plain = wire.DeploymentItem(
        id="i", name="n", group="script", creation_time="", inputs=(wire.InputItem("A", "b"),)
    )
    assert seal.seal_item(plain, "srv", _pair()[1], False) == (plain, ())


def test_a_structured_config_holding_a_secret_inputs_value_is_sealed() -> None:
    """get_input put a `secret: true` input's value into the config: the stored config is a Secret, sealed."""
    private, public = _pair()
    inputs = (wire.InputItem("PASSWORD", "s3cret-value", secret=True), wire.InputItem("PORT", 5432))
    given = {i.name: taint.Secret(i.value) if i.secret else i.value for i in inputs}
    config = deploy.substitute_inputs(
        {"db": {"password": {"get_input": "PASSWORD"}, "port": {"get_input": "PORT"}}},
        "get_input",
        given,
        True,
        "c",
    )
    item = wire.DeploymentItem(
        id="i", name="n", group="apply-config", creation_time="", config=taint.reveal(config), inputs=inputs
    )
    stored = seal.stored_item(item, taint.tainted(config))
    loaded, config_secret = seal.load_item(stored, "item")
    out, fields = seal.seal_item(loaded, "srv", public, config_secret)
    assert set(fields) == {"config", "inputs.PASSWORD"}
    assert "s3cret-value" not in wire.canonical_json(out.to_json()).decode()
    assert sealed.open_item(out, fields, "srv", private).config == {
        "db": {"password": "s3cret-value", "port": 5432}
    }


def test_abandon_data_seals_open_only_with_the_same_data_key_and_never_as_a_column() -> None:
    """seal/unseal: a Secret stays one; another key, altered or malformed text, or a column's value is refused."""
    key, other = os.urandom(32), os.urandom(32)
    sealed_value = crypt.seal(key, taint.Secret({"pw": "canary-x"}))
    assert crypt.is_sealed(sealed_value) and "canary" not in json.dumps(sealed_value)
    opened = crypt.unseal(key, sealed_value)
    assert isinstance(opened, taint.Secret) and opened.value == {"pw": "canary-x"}
    with pytest.raises(crypt.DataKeyError, match="not this data dir's key"):
        crypt.unseal(other, sealed_value)
    for ct in ("!!not base64", sealed_value["ct"][:-8] + "AAAAAAAA", 5):
        with pytest.raises(crypt.DataKeyError):
            crypt.unseal(key, {**sealed_value, "ct": ct})
    column = crypt.encrypt(key, "canary-x")  # a database value cannot pass for abandon data, nor back
    with pytest.raises(crypt.DataKeyError):
        crypt.unseal(key, {"anneal_sealed": "v1", "kid": column["kid"], "ct": column["ct"]})
    with pytest.raises(crypt.DataKeyError):
        crypt.decrypt(key, {"anneal_enc": "v1", "kid": sealed_value["kid"], "ct": sealed_value["ct"]})
