"""atomic.py: the one writer of kept files (plans, traces, memory, locks, the hook shim, check logs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from papayu_git import atomic


def test_write_json_replaces_the_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")
    atomic.write_json(target, {"goal": "é"})
    assert target.read_text(encoding="utf-8") == '{\n  "goal": "é"\n}\n'
    assert os.listdir(tmp_path) == ["plan.json"]


def test_any_exception_removes_the_temp_file_and_keeps_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "trace.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic.write_text(target, "lone surrogate \ud800")  # no UTF-8 form
    with pytest.raises(KeyboardInterrupt), atomic.replacing(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["trace.json"]


def test_a_symlink_is_replaced_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("keep me")
    hook = tmp_path / "pre-commit"
    hook.symlink_to(outside)
    atomic.write_text(hook, "#!/bin/sh\n", executable=True)
    assert outside.read_text() == "keep me" and not hook.is_symlink()
    assert hook.stat().st_mode & stat.S_IXUSR


def test_a_removed_temp_file_keeps_the_target(tmp_path: Path) -> None:
    target = tmp_path / "check.log"
    target.write_text("nothing to mask")
    with atomic.replacing(target) as tmp:
        tmp.write_text("unused")
        tmp.unlink()
    assert target.read_text() == "nothing to mask" and os.listdir(tmp_path) == ["check.log"]


def test_temp_names_are_unique_and_beside_the_target(tmp_path: Path) -> None:
    names = {atomic.temp_path(tmp_path / "x.json") for _ in range(50)}
    assert len(names) == 50 and all(n.parent == tmp_path and n.name.startswith(".x.json.") for n in names)
