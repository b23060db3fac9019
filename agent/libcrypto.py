"""The agent's everyday cryptography through the system's OpenSSL 3 libcrypto, by ctypes.

cryptography's Rust extension, which carries an OpenSSL of its own, costs an idle agent about
11 MiB; the system's libcrypto through ctypes about 4 MiB (docs/performance.md, figure (d)).
Only what the agent does with every document and sealed secret is here: SHA-256, Ed25519
verify, X25519, HKDF-SHA256 and ChaCha20-Poly1305 open. Every OpenSSL return code is checked,
every object freed, and the comparisons that must take constant time (tag, signature) are
OpenSSL's own. ``load`` refuses a library that lacks a function or fails a known answer;
``agent.crypto`` then uses cryptography. Callers go through ``agent.crypto``, which checks sizes.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_ulong, c_void_p
from typing import Any

from agent.errors import CryptoError

SONAME = "libcrypto.so.3"
_ED25519 = 1087  # NID_ED25519 = EVP_PKEY_ED25519
_X25519 = 1034  # NID_X25519 = EVP_PKEY_X25519
_AEAD_SET_TAG = 0x11  # EVP_CTRL_AEAD_SET_TAG
_OCTETS, _UTF8 = 5, 4  # OSSL_PARAM_OCTET_STRING, OSSL_PARAM_UTF8_STRING
_P = c_void_p
_SIZE_P = POINTER(c_size_t)
_INT_P = POINTER(c_int)
#: name: (result, arguments). Pointers are c_void_p so that 64-bit addresses are never cut to an int.
_FUNCTIONS: dict[str, tuple[Any, list[Any]]] = {
    "OpenSSL_version_num": (c_ulong, []),
    "ERR_clear_error": (None, []),
    "EVP_sha256": (_P, []),
    "EVP_Digest": (c_int, [_P, c_size_t, _P, POINTER(c_uint), _P, _P]),
    "EVP_PKEY_new_raw_public_key": (_P, [c_int, _P, _P, c_size_t]),
    "EVP_PKEY_new_raw_private_key": (_P, [c_int, _P, _P, c_size_t]),
    "EVP_PKEY_get_raw_public_key": (c_int, [_P, _P, _SIZE_P]),
    "EVP_PKEY_free": (None, [_P]),
    "EVP_MD_CTX_new": (_P, []),
    "EVP_MD_CTX_free": (None, [_P]),
    "EVP_DigestVerifyInit": (c_int, [_P, _P, _P, _P, _P]),
    "EVP_DigestVerify": (c_int, [_P, _P, c_size_t, _P, c_size_t]),
    "EVP_PKEY_CTX_new": (_P, [_P, _P]),
    "EVP_PKEY_CTX_free": (None, [_P]),
    "EVP_PKEY_derive_init": (c_int, [_P]),
    "EVP_PKEY_derive_set_peer": (c_int, [_P, _P]),
    "EVP_PKEY_derive": (c_int, [_P, _P, _SIZE_P]),
    "EVP_KDF_fetch": (_P, [_P, c_char_p, c_char_p]),
    "EVP_KDF_free": (None, [_P]),
    "EVP_KDF_CTX_new": (_P, [_P]),
    "EVP_KDF_CTX_free": (None, [_P]),
    "EVP_KDF_derive": (c_int, [_P, _P, c_size_t, _P]),
    "EVP_chacha20_poly1305": (_P, []),
    "EVP_CIPHER_CTX_new": (_P, []),
    "EVP_CIPHER_CTX_free": (None, [_P]),
    "EVP_DecryptInit_ex": (c_int, [_P, _P, _P, _P, _P]),
    "EVP_CIPHER_CTX_ctrl": (c_int, [_P, c_int, c_int, _P]),
    "EVP_DecryptUpdate": (c_int, [_P, _P, _INT_P, _P, c_int]),
    "EVP_DecryptFinal_ex": (c_int, [_P, _P, _INT_P]),
}


class Unavailable(Exception):
    """No usable OpenSSL 3 libcrypto here; the message says what is missing."""


class _Param(ctypes.Structure):
    """OSSL_PARAM: one named argument of an OpenSSL 3 algorithm."""

    _fields_ = (
        ("key", c_char_p),
        ("data_type", c_uint),
        ("data", c_void_p),
        ("data_size", c_size_t),
        ("return_size", c_size_t),
    )


def _exact(data: bytes, size: int, what: str) -> None:
    # OpenSSL reads a fixed number of bytes from these pointers: a shorter buffer would be over-read.
    if len(data) != size:
        raise CryptoError(f"{what} must be {size} bytes, got {len(data)}")


class LibCrypto:
    """The operations, bound to one loaded libcrypto."""

    name = "libcrypto"

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib

    def _ok(self, rc: int, what: str) -> None:
        if rc != 1:
            self._lib.ERR_clear_error()  # the thread's error queue would otherwise keep growing
            raise CryptoError(f"{what} failed (OpenSSL)")

    @contextmanager
    def _new(self, pointer: int | None, free: Callable[[int], None], what: str) -> Iterator[int]:
        """*pointer* (an object OpenSSL just made), freed on the way out; NULL is an error."""
        if not pointer:
            self._lib.ERR_clear_error()
            raise CryptoError(f"{what} failed (OpenSSL)")
        try:
            yield pointer
        finally:
            free(pointer)

    def sha256(self, data: bytes) -> bytes:
        out = ctypes.create_string_buffer(32)
        size = c_uint(0)
        lib = self._lib
        self._ok(lib.EVP_Digest(data, len(data), out, ctypes.byref(size), lib.EVP_sha256(), None), "SHA-256")
        return out.raw[: size.value]

    def _pkey(self, kind: int, private: bool, raw: bytes) -> AbstractContextManager[int]:
        make = self._lib.EVP_PKEY_new_raw_private_key if private else self._lib.EVP_PKEY_new_raw_public_key
        _exact(raw, 32, "an X25519 or Ed25519 key")
        return self._new(make(kind, None, raw, len(raw)), self._lib.EVP_PKEY_free, "reading a raw key")

    def ed25519_verify(self, public: bytes, signature: bytes, message: bytes) -> bool:
        """True only when OpenSSL confirms the signature: any failure on the way is a refusal."""
        _exact(public, 32, "an Ed25519 public key")
        lib = self._lib
        key = lib.EVP_PKEY_new_raw_public_key(_ED25519, None, public, len(public))
        ctx = lib.EVP_MD_CTX_new() if key else None
        try:
            ok = bool(ctx) and lib.EVP_DigestVerifyInit(ctx, None, None, None, key) == 1
            # EVP_DigestVerify: 1 valid, 0 a bad signature, below 0 OpenSSL could not check it.
            ok = ok and lib.EVP_DigestVerify(ctx, signature, len(signature), message, len(message)) == 1
        finally:
            lib.EVP_MD_CTX_free(ctx)  # both free functions accept NULL
            lib.EVP_PKEY_free(key)
        if not ok:
            lib.ERR_clear_error()
        return ok

    def x25519_public(self, private: bytes) -> bytes:
        out = ctypes.create_string_buffer(32)
        size = c_size_t(32)
        with self._pkey(_X25519, True, private) as key:
            rc = self._lib.EVP_PKEY_get_raw_public_key(key, out, ctypes.byref(size))
            self._ok(rc, "EVP_PKEY_get_raw_public_key")
        return out.raw[: size.value]

    def x25519(self, private: bytes, peer: bytes) -> bytes:
        lib = self._lib
        out = ctypes.create_string_buffer(32)
        size = c_size_t(32)
        with (
            self._pkey(_X25519, True, private) as key,
            self._pkey(_X25519, False, peer) as theirs,
            self._new(lib.EVP_PKEY_CTX_new(key, None), lib.EVP_PKEY_CTX_free, "EVP_PKEY_CTX_new") as ctx,
        ):
            self._ok(lib.EVP_PKEY_derive_init(ctx), "EVP_PKEY_derive_init")
            self._ok(lib.EVP_PKEY_derive_set_peer(ctx, theirs), "X25519 with this public key")
            # OpenSSL refuses an all-zero result (a low-order public key), as cryptography does.
            self._ok(lib.EVP_PKEY_derive(ctx, out, ctypes.byref(size)), "X25519 with this public key")
        return out.raw[: size.value]

    def hkdf_sha256(self, secret: bytes, salt: bytes, info: bytes, length: int) -> bytes:
        lib = self._lib
        unmodified = ctypes.c_size_t(-1).value  # OSSL_PARAM_UNMODIFIED
        fields = [
            (b"digest", _UTF8, b"SHA256"),
            (b"key", _OCTETS, secret),
            (b"salt", _OCTETS, salt),
            (b"info", _OCTETS, info),
        ]
        params = (_Param * (len(fields) + 1))()  # the last one stays zero: the end of the list
        held = [c_char_p(value) for _, _, value in fields]  # keeps each buffer alive for the call
        for i, (key, kind, value) in enumerate(fields):
            params[i] = _Param(key, kind, ctypes.cast(held[i], c_void_p), len(value), unmodified)
        out = ctypes.create_string_buffer(length)
        kdf = lib.EVP_KDF_fetch(None, b"HKDF", None)
        with self._new(kdf, lib.EVP_KDF_free, "EVP_KDF_fetch(HKDF)") as kdf:
            ctx = lib.EVP_KDF_CTX_new(kdf)
            with self._new(ctx, lib.EVP_KDF_CTX_free, "EVP_KDF_CTX_new") as ctx:
                self._ok(lib.EVP_KDF_derive(ctx, out, length, params), "HKDF-SHA256")
        return out.raw

    def chacha20poly1305_open(self, key: bytes, nonce: bytes, sealed: bytes, aad: bytes) -> bytes:
        _exact(key, 32, "a ChaCha20-Poly1305 key")
        _exact(nonce, 12, "a ChaCha20-Poly1305 nonce")  # OpenSSL's default IV length for this cipher
        if not 16 <= len(sealed) < 2**31 or len(aad) >= 2**31:  # lengths are C ints in EVP_DecryptUpdate
            raise CryptoError(
                f"a sealed text of {len(sealed)} bytes with {len(aad)} bytes of associated data"
            )
        body, tag = sealed[:-16], sealed[-16:]
        out = ctypes.create_string_buffer(max(len(body), 1))
        try:
            size = self._open(out, key, nonce, body, tag, aad)
        except CryptoError:
            ctypes.memset(out, 0, len(out))  # nothing of an unauthenticated plaintext is kept
            raise
        return out.raw[:size]

    def _open(self, out: Any, key: bytes, nonce: bytes, body: bytes, tag: bytes, aad: bytes) -> int:
        """Decrypt *body* into *out*; its length, or CryptoError unless the tag matches."""
        lib = self._lib
        ignored, done, last = c_int(0), c_int(0), c_int(0)
        with self._new(lib.EVP_CIPHER_CTX_new(), lib.EVP_CIPHER_CTX_free, "EVP_CIPHER_CTX_new") as ctx:
            cipher = lib.EVP_chacha20_poly1305()
            self._ok(lib.EVP_DecryptInit_ex(ctx, cipher, None, key, nonce), "ChaCha20-Poly1305 init")
            if aad:
                self._ok(lib.EVP_DecryptUpdate(ctx, None, ctypes.byref(ignored), aad, len(aad)), "AAD")
            if body:
                self._ok(lib.EVP_DecryptUpdate(ctx, out, ctypes.byref(done), body, len(body)), "decrypt")
            self._ok(lib.EVP_CIPHER_CTX_ctrl(ctx, _AEAD_SET_TAG, 16, tag), "setting the tag")
            end = ctypes.cast(ctypes.addressof(out) + done.value, c_void_p)
            if lib.EVP_DecryptFinal_ex(ctx, end, ctypes.byref(last)) != 1:
                lib.ERR_clear_error()
                raise CryptoError("ChaCha20-Poly1305: the tag does not match (wrong key, or altered)")
        return done.value + last.value


def load(name: str | None = None) -> LibCrypto:
    """The system's libcrypto, bound and checked against known answers; Unavailable when it cannot be."""
    try:
        lib = ctypes.CDLL(name or SONAME)
    except OSError as first:
        from ctypes.util import find_library  # noqa: PLC0415 - it loads shutil and runs ldconfig: only if needed

        found = find_library("crypto")
        if not found:
            raise Unavailable(f"{name or SONAME}: {first}") from first
        try:
            lib = ctypes.CDLL(found)
        except OSError as e:
            raise Unavailable(f"{found}: {e}") from e
    try:
        for function, (result, arguments) in _FUNCTIONS.items():
            bound = getattr(lib, function)
            bound.restype, bound.argtypes = result, arguments
    except AttributeError as e:
        raise Unavailable(f"libcrypto has no {e}") from e
    if lib.OpenSSL_version_num() < 0x30000000:
        raise Unavailable(f"libcrypto is OpenSSL {lib.OpenSSL_version_num():#x}, not 3.x")
    backend = LibCrypto(lib)
    failed = known_answers(backend)
    if failed:
        raise Unavailable(f"libcrypto gives wrong answers for {', '.join(failed)}")
    return backend


def known_answers(backend: LibCrypto) -> list[str]:
    """The operations whose answer to a published test vector is wrong (RFC 8032, 7748, 5869)."""
    h = bytes.fromhex
    failed = []
    checks: dict[str, Callable[[], bool]] = {
        "SHA-256": lambda: backend.sha256(b"abc")[:4] == h("ba7816bf"),
        "Ed25519": lambda: backend.ed25519_verify(_ED_PUBLIC, _ED_SIGNATURE, b""),
        "Ed25519 refusal": lambda: not backend.ed25519_verify(_ED_PUBLIC, _ED_SIGNATURE, b"x"),
        "X25519": lambda: backend.x25519(_X_PRIVATE, _X_PEER) == _X_SHARED,
        "HKDF-SHA256": lambda: backend.hkdf_sha256(b"\x0b" * 22, _HKDF_SALT, _HKDF_INFO, 42) == _HKDF_OKM,
        "ChaCha20-Poly1305": lambda: (
            backend.chacha20poly1305_open(bytes(range(32)), bytes(12), _SEALED, b"place") == b"anneal"
        ),
    }
    for what, check in checks.items():
        try:
            if not check():
                failed.append(what)
        except CryptoError:
            failed.append(what)
    return failed


_ED_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
_ED_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)
_X_PRIVATE = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
_X_PEER = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
_X_SHARED = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
_HKDF_SALT = bytes.fromhex("000102030405060708090a0b0c")
_HKDF_INFO = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
_HKDF_OKM = bytes.fromhex(
    "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
)
#: "anneal" sealed with key 00 01 .. 1f, a zero nonce and associated data "place" (made by cryptography).
_SEALED = bytes.fromhex("79d62c54cc8a58c84c005ea9f5e36774827c0ffdd7d5")
