"""A process takes a signing key another process rotated to only when the key files agree (control/keys.py)."""

from __future__ import annotations

import os
from pathlib import Path

from control import keys


def test_a_rotation_on_the_shared_data_dir_is_taken_with_its_whole_chain(tmp_path: Path) -> None:
    """The chain on disk extends ours and ends at the key file's key: that key and chain are taken."""
    mine = keys.load_or_create(tmp_path)
    before = keys.stamp(tmp_path)
    theirs = keys.rotate(tmp_path, mine, 1_700_000_000.0)
    assert before != keys.stamp(tmp_path)
    taken = keys.rotated_elsewhere(tmp_path, mine)
    assert taken is not None
    assert (theirs.key_id, theirs.chain) == (taken.key_id, taken.chain)
    assert keys.rotated_elsewhere(tmp_path, taken) is None  # nothing newer than what we have


def test_a_chain_whose_key_is_not_yet_in_place_waits(tmp_path: Path) -> None:
    """Between the rotation's two renames (chain new, key old) nothing is taken, and the stamp moves again later."""
    mine = keys.load_or_create(tmp_path)
    old_pem = (tmp_path / keys.SIGNING_KEY_FILE).read_bytes()
    keys.rotate(tmp_path, mine, 1_700_000_000.0)
    new_pem = (tmp_path / keys.SIGNING_KEY_FILE).read_bytes()
    (tmp_path / keys.SIGNING_KEY_FILE).write_bytes(old_pem)
    assert keys.rotated_elsewhere(tmp_path, mine) is None
    half = keys.stamp(tmp_path)
    tmp = tmp_path / "key.tmp"
    tmp.write_bytes(new_pem)
    os.replace(tmp, tmp_path / keys.SIGNING_KEY_FILE)
    assert half != keys.stamp(tmp_path)
    assert keys.rotated_elsewhere(tmp_path, mine) is not None


def test_a_chain_that_forks_from_ours_is_not_taken(tmp_path: Path) -> None:
    """A data dir whose chain does not start with ours (another plane's keys copied in) is never taken."""
    mine = keys.load_or_create(tmp_path / "a")
    other = keys.load_or_create(tmp_path / "b")
    keys.rotate(tmp_path / "b", other, 1_700_000_000.0)
    assert keys.rotated_elsewhere(tmp_path / "b", mine) is None
