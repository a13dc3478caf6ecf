"""Symlinks a harness leaves where hidden files go: found before the (unsandboxed) copy, refused during it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.rewards.guards import symlinks_in_the_way
from harnessrl.runners.workspace import WorkspaceError, copy_into


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    hidden, ws, outside = tmp_path / "hidden", tmp_path / "ws", tmp_path / "outside"
    (hidden / "tests" / "deep").mkdir(parents=True)
    (hidden / "tests" / "deep" / "test_h.py").write_text("hidden")
    (ws / "tests").mkdir(parents=True)
    outside.mkdir()
    return hidden, ws, outside


def test_a_clear_way_copies(tmp_path: Path) -> None:
    hidden, ws, outside = _layout(tmp_path)
    assert symlinks_in_the_way(hidden, ws) == []
    copy_into(hidden, ws)
    assert (ws / "tests" / "deep" / "test_h.py").read_text() == "hidden"


@pytest.mark.parametrize("link", ["tests", "tests/deep", "tests/deep/test_h.py"])
def test_a_link_anywhere_on_the_way_is_found_and_never_written_through(tmp_path: Path, link: str) -> None:
    hidden, ws, outside = _layout(tmp_path)
    target = ws / link
    if target.exists():
        target.rmdir() if target.is_dir() else target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside / "x" if link.endswith(".py") else outside)
    assert symlinks_in_the_way(hidden, ws) == [link]
    with pytest.raises(WorkspaceError, match="symlink"):
        copy_into(hidden, ws)
    assert list(outside.rglob("*")) == []


def test_a_linked_hidden_subdir_is_found(tmp_path: Path) -> None:
    hidden, ws, outside = _layout(tmp_path)
    (ws / "checks").symlink_to(outside)
    assert symlinks_in_the_way(hidden, ws, "checks") == ["checks"]


def test_the_tamper_check_never_reads_through_a_planted_link(tmp_path: Path) -> None:
    from harnessrl.rewards.guards import find_tampering
    from harnessrl.runners.workspace import checksum_globs

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_a.py").write_text("a")
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "big.bin").write_text("b")
    before = checksum_globs(ws, ["tests/*/*", "tests/*"])
    (ws / "tests" / "link").symlink_to(outside)
    after = checksum_globs(ws, ["tests/*/*", "tests/*"])
    assert after["tests/link"] == f"symlink:{outside}"
    assert not any(k.startswith("tests/link/") for k in after)  # nothing under it was read
    assert find_tampering(ws, ["tests/*/*", "tests/*"], before) == ["added: tests/link"]
