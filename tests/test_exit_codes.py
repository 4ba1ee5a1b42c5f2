"""Exit codes 3 (a bug) and 130 (Ctrl-C) through the real CLI, mid-transaction:
both roll back, and the user's state is what it was."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu, processes_with, run_papayu_bg, snapshot, user_view, wait_gone, write_plan


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", ".gitignore": "*.log\n"})
    (repo / "README.md").write_text("x\nlocal edit\n")
    (repo / "untracked.txt").write_text("mine\n")
    (repo / "debug.log").write_text("ignored\n")
    return repo


@pytest.mark.parametrize("stage", ["after_commit", "during_check", "during_land"])
def test_a_bug_mid_apply_exits_3_rolls_back_and_writes_a_masked_report(repo: Path, tmp_path: Path, stage: str) -> None:
    before = snapshot(repo)
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "n\n"}])
    proc = papayu(
        "apply", str(plan), "--check", "true", cwd=repo, env={"PAPAYU_TEST_CRASH_AT": stage, "TMPDIR": str(tmp_path)}
    )
    assert proc.returncode == 3, proc.stderr
    assert "ERR_INTERNAL: RuntimeError: simulated bug" in proc.stderr and "ghp_TTTT" not in proc.stderr
    report = Path(re.search(r"the traceback is in (\S+)", proc.stderr).group(1))
    assert report.parent == tmp_path and "Traceback" in report.read_text()
    assert f"simulated bug at {stage}" in report.read_text() and "ghp_TTTT" not in report.read_text()
    assert user_view(snapshot(repo)) == user_view(before)
    assert git(repo, "branch", "--list", "papayu/*") == ""
    again = papayu("apply", str(plan), "--check", "true", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert (repo / "new.txt").read_text() == "n\n" and (repo / "README.md").read_text() == "x\nlocal edit\n"


def test_ctrl_c_during_the_check_exits_130_kills_the_check_and_rolls_back(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    marker = f"60{os.getpid()}.5"  # quoted in papayu's own command line, so only the check carries it
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "n\n"}])
    proc = run_papayu_bg(["apply", str(plan), "--check", f"exec sleep 6''{marker[1:]}"], repo)
    deadline = time.monotonic() + 60
    while not processes_with(f"sleep {marker}"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert wait_gone(marker) == []
    assert user_view(snapshot(repo)) == user_view(before)
    assert git(repo, "branch", "--list", "papayu/*") == ""
    again = papayu("apply", str(plan), "--check", "true", cwd=repo)
    assert again.returncode == 0, again.stderr
