"""Signed documents: tampering, rollback of keys, expiry, canonical form (R14, R15)."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent import envelope, wire
from tests.support.envelopes import NOW, document, pub, rotated


def test_a_signed_document_verifies_and_reads_as_a_document() -> None:
    """The envelope is a plain document with the signature under `anneal`."""
    key = Ed25519PrivateKey.generate()
    raw = envelope.sign(document(), key)
    verified = envelope.verify(raw, pub(key), NOW)
    assert verified.signer == pub(key)
    doc = wire.decode_document(raw)
    assert doc.serial == 7 and doc.deployments[0].name == "10_install"
    assert json.loads(raw)["anneal"]["signature"]["alg"] == "ed25519"


@pytest.mark.catalogue("R14")
@pytest.mark.parametrize("mask", [0x01, 0x20, 0xFF])
def test_every_single_byte_flip_is_rejected(mask: int) -> None:
    """R14: each byte of a ~3 KB signed document, flipped, fails verification."""
    key = Ed25519PrivateKey.generate()
    raw = envelope.sign(document(), key)
    assert len(raw) > 2500
    accepted = []
    for i in range(len(raw)):
        bad = bytearray(raw)
        bad[i] ^= mask
        try:
            envelope.verify(bytes(bad), pub(key), NOW)
        except envelope.EnvelopeError:
            continue
        accepted.append(i)
    assert accepted == []


@pytest.mark.catalogue("R14")
def test_a_signature_moved_to_another_servers_document_is_rejected() -> None:
    """R14: the signature of server A's document does not make server B's valid."""
    key = Ed25519PrivateKey.generate()
    a = json.loads(envelope.sign(document(server_id="srv-a"), key))
    b = json.loads(envelope.sign(document(server_id="srv-b"), key))
    b["anneal"]["signature"] = a["anneal"]["signature"]
    with pytest.raises(envelope.EnvelopeError, match="bad signature"):
        envelope.verify(wire.canonical_json(b), pub(key), NOW)


@pytest.mark.catalogue("R14")
def test_mix_and_match_of_two_serials_is_rejected() -> None:
    """R14: deployments of serial 5 under the signed header of serial 6 do not verify."""
    key = Ed25519PrivateKey.generate()
    old = json.loads(envelope.sign(document(serial=5), key))
    new = json.loads(envelope.sign(document(serial=6), key))
    new["deployments"] = old["deployments"]
    with pytest.raises(envelope.EnvelopeError, match="bad signature"):
        envelope.verify(wire.canonical_json(new), pub(key), NOW)


@pytest.mark.catalogue("R14")
@pytest.mark.parametrize("alg", ["none", "hmac-sha256", "", None])
def test_an_algorithm_downgrade_is_rejected(alg: object) -> None:
    """R14: a signature claiming another algorithm is refused before any check."""
    key = Ed25519PrivateKey.generate()
    doc = json.loads(envelope.sign(document(), key))
    doc["anneal"]["signature"]["alg"] = alg
    with pytest.raises(envelope.EnvelopeError, match="alg"):
        envelope.verify(wire.canonical_json(doc), pub(key), NOW)


def test_unsigned_and_foreign_documents_are_rejected() -> None:
    """No signature, or another key's signature, never verifies."""
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    with pytest.raises(envelope.UnsignedError):
        envelope.verify(wire.canonical_json(document()), pub(key), NOW)
    heat_doc: dict[str, object] = {"deployments": [], "os-collect-config": {}}
    with pytest.raises(envelope.UnsignedError):
        envelope.verify(wire.canonical_json(heat_doc), pub(key), NOW)
    with pytest.raises(envelope.EnvelopeError, match="no valid chain link"):
        envelope.verify(envelope.sign(document(), other), pub(key), NOW)


def test_a_re_encoded_document_is_rejected() -> None:
    """Only the canonical bytes verify: pretty-printing the same JSON is refused."""
    key = Ed25519PrivateKey.generate()
    raw = envelope.sign(document(), key)
    pretty = json.dumps(json.loads(raw), indent=1).encode()
    with pytest.raises(envelope.EnvelopeError, match="canonical"):
        envelope.verify(pretty, pub(key), NOW)


@pytest.mark.catalogue("R13")
def test_an_expired_document_is_rejected() -> None:
    """R13: past `expires_at` a correctly signed document is refused."""
    key = Ed25519PrivateKey.generate()
    raw = envelope.sign(document(expires=NOW + 10), key)
    assert envelope.verify(raw, pub(key), NOW + 9).expires_at == NOW + 10
    with pytest.raises(envelope.ExpiredError, match="expired"):
        envelope.verify(raw, pub(key), NOW + 10)
    doc = json.loads(raw)
    del doc["anneal"]["expires_at"]
    with pytest.raises(envelope.EnvelopeError):
        envelope.verify(envelope.sign(doc, key), pub(key), NOW)


# ------------------------------------------------------------------ R15: rotation matrix


@pytest.mark.catalogue("R15")
@pytest.mark.parametrize(
    ("pinned", "signer", "chain", "accepted"),
    [
        (0, 0, [], True),  # no rotation
        (0, 1, [0], True),  # one rotation, chain carried
        (0, 2, [0, 1], True),  # two rotations at once
        (0, 2, [1, 0], True),  # links in any order
        (1, 1, [0], True),  # already on the new key: the chain is not needed
        (1, 2, [0, 1], True),  # from the middle of the chain
        (0, 1, [], False),  # new key without its link
        (0, 2, [1], False),  # a gap in the chain
        (1, 0, [0], False),  # the old (revoked) key after moving on
        (2, 0, [0, 1], False),  # the oldest key, two rotations later
    ],
)
def test_key_rotation_matrix(pinned: int, signer: int, chain: list[int], accepted: bool) -> None:
    """R15: an agent pinned to key N accepts key N+M only through valid links; never goes back."""
    keys, links = rotated(3)
    raw = envelope.sign(document(), keys[signer], [links[i] for i in chain])
    if accepted:
        assert envelope.verify(raw, pub(keys[pinned]), NOW).signer == pub(keys[signer])
    else:
        with pytest.raises(envelope.EnvelopeError):
            envelope.verify(raw, pub(keys[pinned]), NOW)


@pytest.mark.catalogue("R15")
def test_a_forged_chain_link_is_rejected() -> None:
    """R15: a link claiming to follow the pinned key but signed by another key is refused."""
    keys, _ = rotated(2)
    attacker = Ed25519PrivateKey.generate()
    forged = envelope.make_link(attacker, pub(attacker), envelope.iso(NOW))
    forged = envelope.Link(envelope.key_id(pub(keys[0])), forged.public, forged.issued_at, forged.signature)
    raw = envelope.sign(document(), attacker, [forged])
    with pytest.raises(envelope.EnvelopeError, match="bad signature"):
        envelope.verify(raw, pub(keys[0]), NOW)


def test_non_canonical_base64_in_the_signature_is_rejected() -> None:
    """Two spellings of the same signature bytes are not both accepted."""
    key = Ed25519PrivateKey.generate()
    doc = json.loads(envelope.sign(document(), key))
    value = doc["anneal"]["signature"]["value"]
    last = value[-3]  # the last data character of 64 bytes (88 chars, '==' padded)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    twin = alphabet[alphabet.index(last) ^ 1]  # differs only in an unused low bit
    doc["anneal"]["signature"]["value"] = value[:-3] + twin + value[-2:]
    with pytest.raises(envelope.EnvelopeError, match="canonical base64"):
        envelope.verify(wire.canonical_json(doc), pub(key), NOW)


@pytest.mark.parametrize("extra", [{}, {"aaa": [1, "\u00e9"], "zzz": {"b": 1, "a": None}}, {"anneal_x": 2.5}])
def test_the_envelope_is_the_canonical_json_of_what_it_signs(extra: dict[str, object]) -> None:
    """The bytes sign() builds from separately encoded members are exactly the document's canonical JSON,
    with keys sorting before and after ``anneal`` and a chain, and they verify."""
    keys, links = rotated(2)
    doc = {**document(), **extra}
    raw = envelope.sign(doc, keys[1], links)
    parsed = json.loads(raw)
    assert raw == wire.canonical_json(parsed)
    assert {k: v for k, v in parsed.items() if k != "anneal"} == {
        k: v for k, v in doc.items() if k != "anneal"
    }
    assert envelope.verify(raw, pub(keys[0]), NOW).signer == pub(keys[1])
