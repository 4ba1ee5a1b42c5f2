"""The first run as the README tells it: the Quickstart's line puts only `git-papayu` on the PATH
(the user's python, pip and pytest stay theirs), and `make` says what the long llama.cpp build is
and how to skip it, before it starts (the Makefile run for real, its installers stubbed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, make_repo

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def quickstart_link_line() -> str:
    block = re.search(r"## Quickstart\n\n```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "no Quickstart block in the README"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    assert not any("export PATH" in line and ".venv" in line for line in lines), lines
    return next(line for line in lines if "git-papayu" in line)


@pytest.mark.skipif(not (ROOT / ".venv/bin/git-papayu").exists(), reason="no .venv here (make venv)")
def test_the_quickstart_puts_only_git_papayu_on_the_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": SYSTEM_PATH}
    subprocess.run(["sh", "-c", quickstart_link_line()], cwd=ROOT, env=env, check=True)
    assert os.listdir(home / ".local/bin") == ["git-papayu"]
    env["PATH"] = f"{home}/.local/bin:{SYSTEM_PATH}"
    project = make_repo(tmp_path / "project")
    version = subprocess.run(["git", "papayu", "--version"], cwd=project, env=env, capture_output=True, text=True)
    assert version.returncode == 0 and "papayu-git" in version.stdout, version.stderr
    listed = subprocess.run(["git", "papayu", "list"], cwd=project, env=env, capture_output=True, text=True)
    assert listed.returncode == 0 and "no plans yet" in listed.stdout, listed.stderr
    for tool in ("python", "python3", "pip", "pytest"):
        found = shutil.which(tool, path=env["PATH"])
        assert found is None or not found.startswith(str(ROOT)), f"{tool} resolves to {found}"


def make(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`make ARGS` on papayu's Makefile with a fresh VENV and HOME (no llama.cpp wheel built yet),
    the installers stubbed: `pip wheel` leaves a fake wheel where the recipe expects one."""
    venv, home = tmp_path / "venv", tmp_path / "home"
    venv.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    pip = tmp_path / "pip"
    pip.write_text(
        "#!/bin/sh\n"
        '[ "$1" = wheel ] || exit 0\n'
        'for a in "$@"; do case "$a" in llama-cpp-python==*) version="${a#*==}";; esac; done\n'
        'while [ $# -gt 0 ]; do [ "$1" = --wheel-dir ] && mkdir -p "$2" && '
        'touch "$2/llama_cpp_python-$version-py3-none-any.whl"; shift; done\n'
    )
    pip.chmod(0o755)
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "PYTHON=true", f"PIP={pip}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_says_what_the_llama_build_is_and_how_to_skip_it_before_it_starts(tmp_path: Path) -> None:
    with_model = make(tmp_path, "venv", "EXTRAS=test,local")
    assert with_model.returncode == 0, with_model.stderr
    said = with_model.stdout
    assert "building llama-cpp-python" in said and "minutes" in said.replace("min ", "minutes "), said
    assert "make venv EXTRAS=test,lint" in said and ".cache/papayu-git/llama-wheel-" in said
    again = make(tmp_path, "venv", "EXTRAS=test,local", "-B")  # the same HOME: the wheel is there now
    assert "reusing the wheel built earlier" in again.stdout, again.stdout
    for_demo = make(tmp_path / "demo", "-n", "demo", "EXTRAS=test,local")  # a fresh venv: the recipe runs
    assert 'GOAL="demo"' in for_demo.stdout  # the note will name `make demo EXTRAS=test,lint`
    without = make(tmp_path / "plain", "venv", "EXTRAS=test")
    assert without.returncode == 0 and "llama.cpp" not in without.stdout, without.stdout
