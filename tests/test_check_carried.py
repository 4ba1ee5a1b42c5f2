"""Files of the user's tree the check gets besides the plan's checkout, and never over it: the
ignored lockfiles papayu carries (papayu_git/check/lockfiles.py) and the files named by
`papayu.check.include`. A file the plan's checkout has (tracked, or written by the plan) is
always the plan's. Real git repositories, the real CLI and the real sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import apply_json, make_repo, write_plan

from papayu_git.check import lockfiles, sandbox

CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'


# --- which lockfiles are carried, and never over the plan's files ---------------------------------


def test_only_ignored_lockfiles_next_to_a_manifest_are_carried_and_never_over_the_checkouts_files(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "Cargo.lock\nyarn.lock\npoetry.lock\n",
            "Cargo.toml": CARGO_TOML,
            "web/package.json": "{}\n",
            "py/pyproject.toml": "[project]\nname = 'x'\n",
            "go.mod": "module x\n",
            "go.sum": "tracked\n",
            "linked/Cargo.toml": CARGO_TOML,
        },
    )
    for rel, text in {"Cargo.lock": "user lock\n", "web/yarn.lock": "yarn\n", "py/poetry.lock": "poetry\n"}.items():
        (repo / rel).write_text(text)
    (repo / "notes.lock").write_text("no manifest names it\n")
    (repo / "go.sum").write_text("tracked, edited\n")  # tracked: in every checkout as committed
    os.symlink(repo / "Cargo.lock", repo / "linked/Cargo.lock")  # a symlink is not the user's lock
    assert lockfiles.ignored_lockfiles(repo) == ["Cargo.lock", "py/poetry.lock", "web/yarn.lock"]

    # The checkout: the plan's yarn.lock is its own; the plan made web/ reach outside (a symlink).
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    (work / "py").mkdir(parents=True)
    outside.mkdir()
    (work / "py/poetry.lock").write_text("the plan's lock\n")
    os.symlink(outside, work / "web")
    assert lockfiles.carry(repo, work) == ["Cargo.lock"]
    assert (work / "Cargo.lock").read_text() == "user lock\n"
    assert (work / "Cargo.lock").stat().st_mtime_ns == (repo / "Cargo.lock").stat().st_mtime_ns
    assert (work / "py/poetry.lock").read_text() == "the plan's lock\n"
    assert list(outside.iterdir()) == []
    assert lockfiles.carry(repo, work) == []  # already there: never overwritten


@pytest.mark.skipif(sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}")
def test_an_included_path_never_covers_the_plans_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "config/local.txt\n", "config/app.txt": "mode tip\n"})
    (repo / "config/local.txt").write_text("local settings of the user\n")
    plan = write_plan(tmp_path, [{"kind": "UPDATE_FILE", "path": "config/app.txt", "content": "mode plan\n"}])
    # The directory and a tracked file in it, both named: only the ignored file comes from the user.
    env = {"PAPAYU_CHECK_INCLUDE": "config,config/app.txt"}
    check = "cat config/app.txt config/local.txt"
    data = apply_json(repo, plan, "-y", "--check", check, env={**env, "PAPAYU_PROTOCOL_VERSION": "1"})
    assert (data.get("state"), data["_rc"]) == ("landed", 0), data
    # A data file is no code: the regression run reads the tip's, the plan's own run the plan's,
    # never the user's copy laid over it.
    log = Path(data["check"]["own_log"]).read_text()
    assert "mode plan" in log and "mode tip" not in log, log
    assert "local settings of the user" in log, log
