"""The first run as the README tells it: the Quickstart's `make link` puts only `git-papayu` on the
PATH (the user's python, pip and pytest stay theirs) and its man page where `man` finds it, so
`git papayu --help` works through real git and man; every usage error names `-h`, which works
without man; `make venv` says what it installs and nothing else (no build, no setuptools notes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, make_repo

from papayu_git import __version__

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Read before the hermetic fixture moves HOME, so a fresh venv installs from the downloads of earlier runs.
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
needs_venv = pytest.mark.skipif(not (ROOT / ".venv/bin/git-papayu").exists(), reason="no .venv here (make venv)")
needs_man = pytest.mark.skipif(shutil.which("man") is None, reason="no man here (Debian: apt-get install man-db)")


def quickstart_install_line() -> str:
    block = re.search(r"## Quickstart\n\n```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "no Quickstart block in the README"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    assert not any("export PATH" in line and ".venv" in line for line in lines), lines
    return lines[0]


def user_env(home: Path, path: str) -> dict[str, str]:
    """A user's shell: their HOME and PATH, man's search path derived from PATH (no MANPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "VIRTUAL_ENV", "PYTHONPATH")}
    return {**env, "HOME": str(home), "PATH": path, "MANPAGER": "cat", "PAGER": "cat", "GIT_PAGER": "cat"}


def git_papayu(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "papayu", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def assert_help_through_git_and_man(env: dict[str, str], cwd: Path) -> None:
    """`git papayu --help`: git runs `man git-papayu`, which must find the page from PATH alone."""
    shown = git_papayu(env, cwd, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "GIT-PAPAYU(1)" in shown.stdout and f"papayu-git {__version__}" in shown.stdout, shown.stdout[:500]


def assert_usage_errors_name_a_help_that_works(env: dict[str, str], cwd: Path) -> None:
    for args, named in ((["stauts"], "git papayu -h"), (["plan"], "git papayu plan -h"), (["--nope"], "git papayu -h")):
        refused = git_papayu(env, cwd, *args)
        assert refused.returncode == 2 and f"Try '{named}' for help." in refused.stderr, refused.stderr
        helped = git_papayu(env, cwd, *named.split()[2:])
        assert helped.returncode == 0 and "Usage: git papayu" in helped.stdout, helped.stderr


@needs_venv
@needs_man
def test_the_quickstart_puts_only_git_papayu_on_the_path_and_its_man_page_where_man_looks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = user_env(home, SYSTEM_PATH)
    line = quickstart_install_line()
    assert line.startswith("make link"), line
    # The venv is this checkout's own (-o venv: not rebuilt for the test); the links are the README's.
    subprocess.run(["sh", "-c", f"{line} -o venv"], cwd=ROOT, env=env, check=True, capture_output=True)
    assert os.listdir(home / ".local/bin") == ["git-papayu"]
    env["PATH"] = f"{home}/.local/bin:{SYSTEM_PATH}"
    project = make_repo(tmp_path / "project")
    version = git_papayu(env, project, "--version")
    assert version.returncode == 0 and "papayu-git" in version.stdout, version.stderr
    listed = git_papayu(env, project, "list")
    assert listed.returncode == 0 and "no plans yet" in listed.stdout, listed.stderr
    for tool in ("python", "python3", "pip", "pytest"):
        found = shutil.which(tool, path=env["PATH"])
        assert found is None or not found.startswith(str(ROOT)), f"{tool} resolves to {found}"
    linked = home / ".local/share/man/man1/git-papayu.1"
    where = subprocess.run(["man", "-w", "git-papayu"], env=env, capture_output=True, text=True)
    assert where.stdout.strip() == str(linked.resolve()), where  # man reports the link's target
    assert str(home / ".local/share/man") in subprocess.run(["manpath"], env=env, capture_output=True, text=True).stdout
    assert_help_through_git_and_man(env, project)
    assert_usage_errors_name_a_help_that_works(env, project)


@needs_venv
@needs_man
def test_a_venv_on_the_path_shows_its_man_page_for_git_papayu_help(tmp_path: Path) -> None:
    """The editable install: `make venv` copies the page setuptools leaves out of editable installs."""
    env = user_env(tmp_path / "home", f"{ROOT / '.venv/bin'}:{SYSTEM_PATH}")
    assert_help_through_git_and_man(env, make_repo(tmp_path / "project"))


@needs_venv
def test_without_man_the_usage_hint_still_names_a_help_that_works(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # git and papayu, no man: `git papayu --help` cannot work here
    bin_dir.mkdir()
    os.symlink(shutil.which("git") or "/usr/bin/git", bin_dir / "git")
    os.symlink(ROOT / ".venv/bin/git-papayu", bin_dir / "git-papayu")
    env = user_env(tmp_path / "home", str(bin_dir))
    project = make_repo(tmp_path / "project")
    assert git_papayu(env, project, "--help").returncode != 0  # git's own failure: no man viewer
    assert_usage_errors_name_a_help_that_works(env, project)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_venv_says_what_it_installs_and_nothing_else(tmp_path: Path) -> None:
    """A fresh venv from the real Makefile: one line that says what is installed, no compiler run,
    none of setuptools' deprecation or editable-install notes."""
    venv = tmp_path / "venv"
    proc = subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "EXTRAS=test", "venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PIP_CACHE_DIR": PIP_CACHE},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = (proc.stdout + proc.stderr).strip().splitlines()
    assert said == [
        f"Installing papayu-git[test] into {venv} (prebuilt wheels: about a minute, the first time on a machine longer)"
    ], said
    assert (venv / "share/man/man1/git-papayu.1").read_bytes() == (ROOT / "man/git-papayu.1").read_bytes()
    again = subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "EXTRAS=test", "venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and again.stdout + again.stderr == "", again.stdout + again.stderr
