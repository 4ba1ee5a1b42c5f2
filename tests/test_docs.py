"""README tables and the man page are generated from the code and must be up to date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from papayu_git import docs
from papayu_git.errors import ERROR_CODES
from papayu_git.settings import SETTINGS


def test_readme_starts_with_the_two_make_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2:6] == [
        "```sh",
        "make demo    # sets up .venv and runs papayu end to end on a built-in sample repository",
        "make test    # sets up .venv and runs the whole test suite",
        "```",
    ]


def test_readme_tables_are_up_to_date() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert docs.render_readme(text) == text, "run: python -m papayu_git.docs --write"


def test_man_page_is_up_to_date() -> None:
    assert (ROOT / "man" / "git-papayu.1").read_text(encoding="utf-8") == docs.man_page(), (
        "run: python -m papayu_git.docs --write"
    )


def test_every_code_setting_and_limit_is_in_the_readme() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"| `{code}` |" in text for code in ERROR_CODES)
    assert all(f"`{s.env or '-'}`" in text and s.meaning in text for s in SETTINGS)
    assert all(f"`{lim.code}`" in text for lim in docs.limits())
    assert "| path length | 240 characters | `ERR_PATH_TOO_LONG` |" in text


def test_check_fails_on_a_stale_readme_and_write_fixes_it(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    readme.write_text(text.replace("| `ERR_PATH_EMPTY` |", "| `ERR_PATH_GONE` |"), encoding="utf-8")
    run = [sys.executable, "-m", "papayu_git.docs"]
    check = subprocess.run([*run, "--check", str(readme)], capture_output=True, text=True)
    assert check.returncode == 1 and "out of date" in check.stderr
    assert subprocess.run([*run, "--write", str(readme)], capture_output=True).returncode == 0
    assert readme.read_text(encoding="utf-8") == text


def test_missing_region_is_an_error() -> None:
    with pytest.raises(ValueError, match="SETTINGS-TABLE"):
        docs.render_readme(
            "<!-- ERROR-TABLE:BEGIN -->\n<!-- ERROR-TABLE:END -->\n"
            "<!-- LIMITS-TABLE:BEGIN -->\n<!-- LIMITS-TABLE:END -->\n"
        )
