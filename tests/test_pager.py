"""The pager, as git chooses it (output.paged): `show`, `diff` and `trace list` with stdout on a real
terminal (a pty) page through GIT_PAGER, else core.pager, else PAGER; `cat` or an empty value turns it
off, so does a stdout that is not a terminal; a pager that does not exist still leaves the text printed.

Each pager here is a script that writes what it was given to its own file."""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu, patch_action, write_plan

CALC = "def add(a, b):\n    return a - b\n"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
ADDED = "+    return a + b"
ADDED_COLOURED = "\x1b[32m+    return a + b\x1b[0m"
PAGER_SCRIPT = '#!/bin/sh\nprintf %s "$LESS" > "$1.less"\ncat > "$1"\n'
# What the user's environment may bring that would choose or change the pager.
CHOOSERS = ("GIT_PAGER", "PAGER", "LESS", "NO_COLOR", "PAPAYU_COLOR")


@pytest.fixture
def plan_id(tmp_path: Path) -> str:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), FIX)], "make add() add")
    proc = papayu("apply", str(plan), "--no-check", "--review", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["plan_id"])


@pytest.fixture
def repo(tmp_path: Path, plan_id: str) -> Path:
    return tmp_path / "repo"


class Pagers:
    """Three pagers, one per way of choosing it; ``got(name)`` is what that one was given (None: it never ran)."""

    def __init__(self, directory: Path) -> None:
        self.script = directory / "pager.sh"
        self.script.write_text(PAGER_SCRIPT)
        self.script.chmod(0o755)
        self.directory = directory

    def command(self, name: str) -> str:
        return f"{shlex.quote(str(self.script))} {shlex.quote(str(self.directory / name))}"

    def got(self, name: str) -> str | None:
        path = self.directory / name
        return path.read_text() if path.exists() else None

    def less(self, name: str) -> str:
        return (self.directory / f"{name}.less").read_text()


@pytest.fixture
def pagers(tmp_path: Path) -> Pagers:
    return Pagers(tmp_path)


def environment(**chosen: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CHOOSERS}
    return {**env, **chosen}


def on_terminal(repo: Path, *args: str, env: dict[str, str]) -> str:
    """`papayu ARGS` with stdout on a pty (stdin and stderr are not): what the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", *args],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    shown, deadline = b"", time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        _, stderr = proc.communicate(timeout=60)
    finally:
        os.close(master)
    assert proc.returncode == 0, stderr.decode()
    return shown.decode().replace("\r\n", "\n")


def test_show_diff_and_trace_list_page_on_a_terminal(repo: Path, plan_id: str, pagers: Pagers) -> None:
    env = environment(GIT_PAGER=pagers.command("git-pager"))
    shown = on_terminal(repo, "show", plan_id, env=env)
    paged = pagers.got("git-pager")
    assert paged is not None and ADDED_COLOURED in paged and f"plan {plan_id}" in paged
    assert ADDED not in shown and plan_id not in shown
    assert pagers.less("git-pager") == "FRX"  # git's default for less, so a short text just prints

    shown = on_terminal(repo, "diff", plan_id, env=env)
    paged = pagers.got("git-pager")
    assert paged is not None and ADDED_COLOURED in paged and "diff --git a/calc.py b/calc.py" in paged
    assert "make add() add" not in paged and "plan " not in paged  # only the diff
    assert ADDED not in shown

    on_terminal(repo, "trace", "list", env=env)
    paged = pagers.got("git-pager")
    assert paged is not None and paged.startswith("AT ") and "TRACE" in paged.splitlines()[0]
    assert len(paged.splitlines()) == 2  # the header and the apply's trace
    assert paged.splitlines()[1].split()[2] == plan_id and "diff --git" not in paged


def test_no_pager_when_stdout_is_not_a_terminal(repo: Path, plan_id: str, pagers: Pagers) -> None:
    env = {"GIT_PAGER": pagers.command("git-pager")}
    for args in (("show", plan_id), ("diff", plan_id), ("trace", "list")):
        proc = papayu(*args, cwd=repo, env=env)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
        assert pagers.got("git-pager") is None
    assert ADDED in papayu("diff", plan_id, cwd=repo, env=env).stdout


@pytest.mark.parametrize("off", ["cat", "", "  cat "])
def test_git_pager_cat_or_empty_turns_the_pager_off(repo: Path, plan_id: str, pagers: Pagers, off: str) -> None:
    git(repo, "config", "core.pager", pagers.command("core-pager"))
    shown = on_terminal(repo, "diff", plan_id, env=environment(GIT_PAGER=off, PAGER=pagers.command("pager")))
    assert ADDED_COLOURED in shown
    assert pagers.got("core-pager") is None and pagers.got("pager") is None


def test_core_pager_is_used_when_git_pager_is_unset(repo: Path, plan_id: str, pagers: Pagers) -> None:
    git(repo, "config", "core.pager", pagers.command("core-pager"))
    shown = on_terminal(repo, "diff", plan_id, env=environment(PAGER=pagers.command("pager")))
    assert ADDED_COLOURED in (pagers.got("core-pager") or "") and pagers.got("pager") is None
    assert ADDED not in shown


def test_git_pager_wins_over_core_pager_which_wins_over_pager(repo: Path, plan_id: str, pagers: Pagers) -> None:
    git(repo, "config", "core.pager", pagers.command("core-pager"))
    env = environment(GIT_PAGER=pagers.command("git-pager"), PAGER=pagers.command("pager"))
    on_terminal(repo, "diff", plan_id, env=env)
    assert ADDED in (pagers.got("git-pager") or "")
    assert pagers.got("core-pager") is None and pagers.got("pager") is None

    git(repo, "config", "--unset", "core.pager")
    on_terminal(repo, "diff", plan_id, env=environment(PAGER=pagers.command("pager")))
    assert ADDED in (pagers.got("pager") or "") and pagers.got("core-pager") is None


def test_a_pager_that_does_not_exist_still_leaves_the_text_printed(repo: Path, plan_id: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-pager"
    shown = on_terminal(repo, "diff", plan_id, env=environment(GIT_PAGER=str(missing)))
    assert ADDED_COLOURED in shown and "diff --git a/calc.py b/calc.py" in shown
    shown = on_terminal(repo, "show", plan_id, env=environment(GIT_PAGER=str(missing)))
    assert ADDED_COLOURED in shown and f"plan {plan_id}" in shown
