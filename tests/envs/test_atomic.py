"""Atomic writes (common/atomic.py): a file or folder appears whole or not at all."""

import pytest

from common.atomic import atomic_dir, write_atomic


def test_write_atomic_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "config.yaml"
    write_atomic(path, "a: 1\n")
    write_atomic(path, b"a: 2\n")
    assert path.read_text() == "a: 2\n"
    assert [p.name for p in path.parent.iterdir()] == ["config.yaml"]


def test_a_failed_folder_write_leaves_the_old_folder_and_no_temporaries(tmp_path):
    target = tmp_path / "checkpoint-2"
    with atomic_dir(target) as tmp:
        (tmp / "weights").write_text("old")
    with pytest.raises(RuntimeError, match="killed"), atomic_dir(target, replace=True) as tmp:
        (tmp / "weights").write_text("half")
        raise RuntimeError("killed mid-write")
    assert (target / "weights").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-2"]
    with atomic_dir(target, replace=True) as tmp:
        (tmp / "weights").write_text("new")
    assert (target / "weights").read_text() == "new"


def test_a_concurrent_complete_build_wins_and_an_incomplete_one_is_an_error(tmp_path):
    target = tmp_path / "suite"
    with atomic_dir(target, complete_marker="manifest.json") as tmp:
        (tmp / "manifest.json").write_text("first")
    with atomic_dir(target, complete_marker="manifest.json") as tmp:  # another builder of the same content
        (tmp / "manifest.json").write_text("second")
    assert (target / "manifest.json").read_text() == "first"
    other = tmp_path / "other"
    other.mkdir()
    (other / "stray").write_text("x")
    with pytest.raises(OSError), atomic_dir(other, complete_marker="manifest.json") as tmp:
        (tmp / "manifest.json").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "suite"]
