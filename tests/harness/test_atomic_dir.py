"""build_dir: a folder appears whole (with its marker) or not at all."""

import pytest

from harness.atomic_dir import build_dir


def test_builds_once_writes_the_marker_and_replaces_an_incomplete_leftover(tmp_path):
    target = tmp_path / "a" / "out"
    target.mkdir(parents=True)
    (target / "half.txt").write_text("left by a crash")
    assert build_dir(target, lambda tmp: (tmp / "x.txt").write_text("1"), "DONE")
    assert sorted(p.name for p in target.iterdir()) == ["DONE", "x.txt"]
    assert not build_dir(target, lambda tmp: pytest.fail("rebuilt a complete folder"), "DONE")
    assert [p.name for p in target.parent.iterdir()] == ["out"]  # no temp folder left


def test_a_failed_build_leaves_nothing(tmp_path):
    target = tmp_path / "out"

    def broken(tmp):
        (tmp / "x.txt").write_text("1")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        build_dir(target, broken, "info.json")
    assert list(tmp_path.iterdir()) == []
