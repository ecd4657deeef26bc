"""Outputs are written whole, with the mode any new file would get."""

import os

import pytest

from speedstats.fsutil import write_atomic


def test_write_atomic_gives_a_plain_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "sub" / "comment.md", "body")
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "comment.md"
    assert path.read_text() == "body"
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_write_atomic_leaves_the_old_file_and_no_temp_file_on_failure(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, 42)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
