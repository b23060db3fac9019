"""The agent's crypto backends: the system's libcrypto by ctypes answers exactly as cryptography does.

cryptography is the reference: it makes the keys, signs and seals, and both backends must accept
what it made and refuse any one-bit change of it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import crypto, libcrypto
from agent.errors import CryptoError

LIBCRYPTO = libcrypto.load()
FALLBACK = crypto.Cryptography()
BACKENDS: list[crypto.Backend] = [LIBCRYPTO, FALLBACK]
CHECKS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
key32 = st.binary(min_size=32, max_size=32)
data = st.binary(max_size=300)


def flip(raw: bytes, bit: int) -> bytes:
    """*raw* with one bit inverted (*bit* taken modulo its length in bits)."""
    bit %= 8 * len(raw)
    out = bytearray(raw)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@pytest.fixture
def chosen() -> Iterator[None]:
    """Puts back whichever backend the process had after a test that chose one."""
    before = list(crypto._chosen)
    yield
    crypto._chosen[:] = before


def test_the_system_libcrypto_is_used_here(chosen: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On this Debian machine (OpenSSL 3) the agent picks libcrypto, and it passes its known answers."""
    monkeypatch.delenv(crypto.ENV, raising=False)
    assert "libcrypto" == crypto.choose().name
    assert [] == libcrypto.known_answers(LIBCRYPTO)


@CHECKS
@given(seed=key32, message=data, bit=st.integers(min_value=0))
def test_ed25519_verify_accepts_what_cryptography_signs_and_no_bit_flip(
    seed: bytes, message: bytes, bit: int
) -> None:
    """A signature made by cryptography verifies; one flipped bit of signature, message or key does not."""
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public, signature = key.public_key().public_bytes_raw(), key.sign(message)
    for backend in BACKENDS:
        assert backend.ed25519_verify(public, signature, message), backend.name
        assert not backend.ed25519_verify(public, flip(signature, bit), message), backend.name
        assert not backend.ed25519_verify(flip(public, bit), signature, message), backend.name
        if message:
            assert not backend.ed25519_verify(public, signature, flip(message, bit)), backend.name


@CHECKS
@given(public=key32, signature=st.binary(min_size=64, max_size=64), message=data)
def test_ed25519_verify_answers_random_keys_and_signatures_alike(
    public: bytes, signature: bytes, message: bytes
) -> None:
    """Random bytes as key and signature get the same answer from both, never an error (half are not points).

    Not always False: hypothesis finds the all-zero key and signature, a small-order key that OpenSSL
    (in both) accepts for the empty message. The agent's keys are pinned, never chosen by a sender.
    """
    assert LIBCRYPTO.ed25519_verify(public, signature, message) == FALLBACK.ed25519_verify(
        public, signature, message
    )


@CHECKS
@given(mine=key32, theirs=key32)
def test_x25519_gives_cryptography_s_public_key_and_shared_secret(mine: bytes, theirs: bytes) -> None:
    """Public keys and shared secrets of random key pairs are the same bytes from both backends."""
    peer = X25519PrivateKey.from_private_bytes(theirs).public_key()
    expected = X25519PrivateKey.from_private_bytes(mine).exchange(peer)
    peer_raw = peer.public_bytes_raw()
    assert LIBCRYPTO.x25519_public(theirs) == FALLBACK.x25519_public(theirs) == peer_raw
    assert LIBCRYPTO.x25519(mine, peer_raw) == FALLBACK.x25519(mine, peer_raw) == expected


def test_x25519_with_a_low_order_public_key_is_an_error_in_both() -> None:
    """The all-zero public key (a low-order point) gives an all-zero secret: both refuse it."""
    for backend in BACKENDS:
        with pytest.raises(CryptoError, match="X25519"):
            backend.x25519(os.urandom(32), bytes(32))


@CHECKS
@given(
    secret=st.binary(max_size=80),
    salt=st.binary(max_size=80),
    info=st.binary(max_size=80),
    length=st.one_of(st.integers(1, 100), st.sampled_from([255, 256, crypto.MAX_HKDF])),
)
def test_hkdf_sha256_matches_cryptography(secret: bytes, salt: bytes, info: bytes, length: int) -> None:
    """Any secret, salt (empty too), info (empty too) and length up to HKDF's limit: the same output."""
    expected = HKDF(hashes.SHA256(), length, salt=salt, info=info).derive(secret)
    assert LIBCRYPTO.hkdf_sha256(secret, salt, info, length) == expected
    assert FALLBACK.hkdf_sha256(secret, salt, info, length) == expected


@CHECKS
@given(
    key=key32,
    nonce=st.binary(min_size=12, max_size=12),
    plain=data,
    aad=st.binary(max_size=64),
    bit=st.integers(0),
)
def test_chacha20poly1305_opens_what_cryptography_seals_and_nothing_altered(
    key: bytes, nonce: bytes, plain: bytes, aad: bytes, bit: int
) -> None:
    """The plaintext comes back; a flipped bit of ciphertext/tag, key, nonce or associated data is refused."""
    sealed = ChaCha20Poly1305(key).encrypt(nonce, plain, aad)
    altered_aad = flip(aad, bit) if aad else b"\0"
    for backend in BACKENDS:
        assert plain == backend.chacha20poly1305_open(key, nonce, sealed, aad)
        for k, n, s, a in (
            (key, nonce, flip(sealed, bit), aad),
            (flip(key, bit), nonce, sealed, aad),
            (key, flip(nonce, bit), sealed, aad),
            (key, nonce, sealed, altered_aad),
        ):
            with pytest.raises(CryptoError, match="tag does not match"):
                backend.chacha20poly1305_open(k, n, s, a)
        with pytest.raises(CryptoError):  # one byte short: a wrong tag, or too short to hold one
            backend.chacha20poly1305_open(key, nonce, sealed[:-1], aad)


@CHECKS
@given(message=data)
def test_sha256_matches_cryptography(message: bytes) -> None:
    """SHA-256 of any bytes is the same from both backends and from cryptography's own hash."""
    reference = hashes.Hash(hashes.SHA256())
    reference.update(message)
    assert LIBCRYPTO.sha256(message) == FALLBACK.sha256(message) == reference.finalize()


@pytest.mark.parametrize("name", ["libcrypto", "cryptography"])
def test_wrong_sizes_are_clear_errors_naming_what_is_wrong(chosen: None, name: str) -> None:
    """Short or long keys and nonces, short texts and impossible HKDF lengths: a CryptoError, never a crash."""
    crypto.choose(name)
    k, n = bytes(32), bytes(12)
    cases: list[tuple[Callable[[], object], str]] = [
        (
            lambda: crypto.ed25519_verify(bytes(31), bytes(64), b""),
            "Ed25519 public key must be 32 bytes, got 31",
        ),
        (lambda: crypto.x25519(bytes(33), k), "X25519 private key must be 32 bytes, got 33"),
        (lambda: crypto.x25519(k, b""), "X25519 public key must be 32 bytes, got 0"),
        (lambda: crypto.x25519_public(bytes(16)), "X25519 private key must be 32 bytes, got 16"),
        (lambda: crypto.hkdf_sha256(k, b"", b"", 0), "1 to 8160 bytes, not 0"),
        (lambda: crypto.hkdf_sha256(k, b"", b"", crypto.MAX_HKDF + 1), "not 8161"),
        (lambda: crypto.chacha20poly1305_open(bytes(31), n, bytes(16), b""), "key must be 32 bytes, got 31"),
        (lambda: crypto.chacha20poly1305_open(k, bytes(8), bytes(16), b""), "nonce must be 12 bytes, got 8"),
        (lambda: crypto.chacha20poly1305_open(k, n, bytes(15), b""), "16-byte tag, this one is 15 bytes"),
        (lambda: crypto.x25519("a string" * 4, k), "must be bytes, not str"),  # type: ignore[arg-type]
    ]
    for call, message in cases:
        with pytest.raises(CryptoError, match=message):
            call()
    # A signature of the wrong size is not an error: it is simply not a valid signature.
    assert not crypto.ed25519_verify(k, bytes(63), b"")


def test_the_ctypes_backend_guards_its_own_pointers() -> None:
    """Called directly, past agent.crypto's checks, libcrypto still refuses buffers OpenSSL would over-read."""
    with pytest.raises(CryptoError, match="nonce must be 12 bytes"):
        LIBCRYPTO.chacha20poly1305_open(bytes(32), bytes(11), bytes(16), b"")
    with pytest.raises(CryptoError, match="key must be 32 bytes"):
        LIBCRYPTO.x25519(bytes(32), bytes(31))


def test_failures_leave_openssl_s_error_queue_empty() -> None:
    """A refused signature, tag or low-order key leaves nothing queued that would pile up in a long-lived agent."""
    peek = ctypes.CDLL(libcrypto.SONAME).ERR_peek_error  # the same library, the same thread's queue
    peek.restype = ctypes.c_ulong
    LIBCRYPTO.ed25519_verify(b"\xff" * 32, bytes(64), b"m")
    assert 0 == peek()
    with pytest.raises(CryptoError):
        LIBCRYPTO.chacha20poly1305_open(bytes(32), bytes(12), bytes(20), b"")
    assert 0 == peek()
    with pytest.raises(CryptoError):
        LIBCRYPTO.x25519(bytes(32), bytes(32))
    assert 0 == peek()


def test_a_library_without_openssl_s_functions_falls_back_to_cryptography(
    chosen: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The C library in libcrypto's place is refused by name; the agent uses cryptography and says so at debug."""
    with pytest.raises(libcrypto.Unavailable, match="OpenSSL_version_num"):
        libcrypto.load("libc.so.6")
    monkeypatch.setattr(libcrypto, "SONAME", "libc.so.6")
    monkeypatch.delenv(crypto.ENV, raising=False)
    with caplog.at_level(logging.DEBUG, logger="agent.crypto"):
        picked = crypto.choose()
    assert "cryptography" == picked.name
    assert any("libcrypto cannot be used" in r.getMessage() for r in caplog.records)
    with pytest.raises(CryptoError, match="libcrypto cannot be used"):
        crypto.choose("libcrypto")  # asked for by name, it is an error rather than a quiet fallback


def test_an_unknown_setting_is_named_and_changes_nothing(
    chosen: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """ANNEAL_AGENT_CRYPTO=openssl is logged as a warning and taken as unset; an unknown name in code is an error."""
    monkeypatch.setenv(crypto.ENV, "openssl")
    with caplog.at_level(logging.WARNING, logger="agent.crypto"):
        assert "libcrypto" == crypto.choose().name
    assert ["ANNEAL_AGENT_CRYPTO='openssl' is neither libcrypto nor cryptography: taken as unset"] == [
        r.getMessage() for r in caplog.records
    ]
    with pytest.raises(CryptoError, match="no crypto backend 'openssl'"):
        crypto.choose("openssl")


def test_the_environment_forces_cryptography_in_a_fresh_agent_process() -> None:
    """ANNEAL_AGENT_CRYPTO=cryptography: a process verifies and opens with cryptography and loads no ctypes."""
    key = Ed25519PrivateKey.generate()
    box = bytes(range(32))
    sealed = ChaCha20Poly1305(box).encrypt(bytes(12), b"secret", b"place")
    code = (
        "import json, sys\nfrom agent import crypto\n"
        f"ok = crypto.ed25519_verify(bytes.fromhex({key.public_key().public_bytes_raw().hex()!r}), "
        f"bytes.fromhex({key.sign(b'doc').hex()!r}), b'doc')\n"
        f"plain = crypto.chacha20poly1305_open({box!r}, bytes(12), bytes.fromhex({sealed.hex()!r}), b'place')\n"
        "print(json.dumps([crypto.backend().name, ok, plain.decode(), 'ctypes' in sys.modules]))\n"
    )
    env = {**os.environ, crypto.ENV: "cryptography"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert ["cryptography", True, "secret", False] == json.loads(out.stdout)


def test_thousands_of_operations_do_not_grow_the_process() -> None:
    """5,000 rounds of every operation, refusals included, leave VmRSS within 1 MiB: every object is freed."""
    code = """
import os, re
from agent import libcrypto
from agent.errors import CryptoError
b = libcrypto.load()
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
def rounds(n):
    for i in range(n):
        k = os.urandom(32)
        b.ed25519_verify(k, bytes(64), b"message")
        b.x25519(k, b.x25519_public(os.urandom(32)))
        b.hkdf_sha256(k, b"salt", b"info", 32)
        b.sha256(k)
        try:
            b.chacha20poly1305_open(k, bytes(12), bytes(40), b"aad")
        except CryptoError:
            pass
        try:
            b.x25519(k, bytes(32))
        except CryptoError:
            pass
rounds(500)
before = rss()
rounds(5000)
print(rss() - before)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) < 1024, f"grew by {out.stdout.strip()} KiB"
