"""Credentials the control plane hands out are safe to paste on a command line."""

from pathlib import Path

from control.keys import load_or_create, new_token


def test_tokens_never_start_with_a_dash_so_argparse_reads_them_as_values() -> None:
    # 2,000 draws: with plain token_urlsafe about 1 in 64 starts with '-', so the
    # old generator fails this with certainty for practical purposes.
    """No token starts with '-' (argparse would read an option); 2,000 are distinct and 43+ long."""
    tokens = {new_token() for _ in range(2000)}
    assert len(tokens) == 2000
    assert not [t for t in tokens if t.startswith("-")]
    assert all(len(t) >= 43 for t in tokens)


def test_a_capability_given_in_non_ascii_text_is_refused_not_an_error(tmp_path: Path) -> None:
    """A hostile sig of non-ASCII text (hmac.compare_digest raises on it) is a mismatch, not a 500."""
    keys = load_or_create(tmp_path)
    good = keys.capability("wait-handle", "h1")
    assert keys.check_capability("wait-handle", "h1", good)
    assert not keys.check_capability("wait-handle", "h1", "é" + good[1:])
    assert not keys.check_capability("wait-handle", "h2", good)
