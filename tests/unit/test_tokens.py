"""Credentials the control plane hands out are safe to paste on a command line."""

from control.keys import new_token


def test_tokens_never_start_with_a_dash_so_argparse_reads_them_as_values() -> None:
    # 2,000 draws: with plain token_urlsafe about 1 in 64 starts with '-', so the
    # old generator fails this with certainty for practical purposes.
    """No token starts with '-' (argparse would read an option); 2,000 are distinct and 43+ long."""
    tokens = {new_token() for _ in range(2000)}
    assert len(tokens) == 2000
    assert not [t for t in tokens if t.startswith("-")]
    assert all(len(t) >= 43 for t in tokens)
