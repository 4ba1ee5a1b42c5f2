"""The README stays short and its links resolve; the reference tables, the README's key settings
and the man page are generated from the code and must be up to date."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from papayu_git import docs
from papayu_git.errors import ERROR_CODES
from papayu_git.memory import MEMORY_WHITELIST, git_config_key
from papayu_git.settings import SETTINGS

README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "REFERENCE.md"
MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 400


def test_readme_starts_with_the_two_make_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[2:6] == [
        "```sh",
        "make demo    # sets up .venv and runs papayu end to end on a built-in sample repository",
        "make test    # sets up .venv and runs the whole test suite",
        "```",
    ]


def test_readme_is_short_enough_to_read() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; details belong in docs/"


@pytest.mark.parametrize("path", [REFERENCE, README], ids=lambda p: p.name)
def test_generated_regions_are_up_to_date(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert docs.render(text, docs.DOCUMENTS[path.name]) == text, "run: python -m papayu_git.docs --write"


def test_man_page_is_up_to_date() -> None:
    assert (ROOT / "man" / "git-papayu.1").read_text(encoding="utf-8") == docs.man_page(), (
        "run: python -m papayu_git.docs --write"
    )


def test_every_code_setting_limit_and_memory_key_is_in_the_reference() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert all(f"| `{code}` |" in text for code in ERROR_CODES)
    for s in SETTINGS:  # each row: its key, variable, meaning and former names
        row = f"| {f'`{s.key}`' if s.git else '(environment only)'} | `{s.env}` | `{s.default}` | "
        assert row + docs._cell(s.meaning) + " | " + ", ".join(f"`{n}`" for n in s.old) + " |" in text
    assert all(f"`{lim.code}`" in text for lim in docs.limits())
    assert "| path length | 240 characters | `ERR_PATH_TOO_LONG` |" in text
    assert all(f"| `{key}` |" in text for key in MEMORY_WHITELIST)


def test_key_settings_in_the_readme_are_real_settings() -> None:
    text = README.read_text(encoding="utf-8")
    by_name = {s.name: s for s in SETTINGS}
    assert all(f"| `{by_name[name].env}` |" in text for name in docs.KEY_SETTINGS)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_error_code_named_in_the_docs_exists(path: Path) -> None:
    named = set(re.findall(r"\bERR_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8"))) - {"ERR_CODE"}
    assert not sorted(named - set(ERROR_CODES))


def test_every_setting_named_in_the_readme_exists() -> None:
    text = README.read_text(encoding="utf-8")
    envs = {s.env for s in SETTINGS}
    keys = {s.git_key for s in SETTINGS} | {git_config_key(key) for key in MEMORY_WHITELIST}
    assert not sorted(set(re.findall(r"\bPAPAYU_[A-Z0-9_]*[A-Z0-9]\b", text)) - envs)
    assert not sorted(set(re.findall(r"\bpapayu\.[A-Za-z.]*[A-Za-z]", text)) - keys)


def test_check_without_arguments_covers_the_reference_readme_and_man_page() -> None:
    check = subprocess.run([sys.executable, "-m", "papayu_git.docs", "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert set(docs._outputs([])) == {REFERENCE, README, docs.MAN_PAGE}


@pytest.mark.parametrize(
    ("source", "region_row"),
    [(REFERENCE, "| `ERR_PATH_EMPTY` |"), (README, "| `PAPAYU_CHECK_SANDBOX` |")],
    ids=["reference", "readme"],
)
def test_check_fails_on_a_stale_document_and_write_fixes_it(tmp_path: Path, source: Path, region_row: str) -> None:
    copy = tmp_path / source.name
    text = source.read_text(encoding="utf-8")
    assert region_row in text
    copy.write_text(text.replace(region_row, "| `STALE` |"), encoding="utf-8")
    run = [sys.executable, "-m", "papayu_git.docs"]
    check = subprocess.run([*run, "--check", str(copy)], capture_output=True, text=True)
    assert check.returncode == 1 and "out of date" in check.stderr
    assert subprocess.run([*run, "--write", str(copy)], capture_output=True).returncode == 0
    assert copy.read_text(encoding="utf-8") == text


def test_a_file_that_is_not_a_generated_document_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "NOTES.md"
    shutil.copy(REFERENCE, other)
    proc = subprocess.run([sys.executable, "-m", "papayu_git.docs", "--check", str(other)], capture_output=True)
    assert proc.returncode != 0 and b"not a generated document" in proc.stderr


def test_missing_region_is_an_error() -> None:
    with pytest.raises(ValueError, match="SETTINGS-TABLE"):
        docs.render_reference(
            "<!-- ERROR-TABLE:BEGIN -->\n<!-- ERROR-TABLE:END -->\n"
            "<!-- LIMITS-TABLE:BEGIN -->\n<!-- LIMITS-TABLE:END -->\n"
        )
    with pytest.raises(ValueError, match="KEY-SETTINGS"):
        docs.render_readme("# papayu-git\n")


# --- links -----------------------------------------------------------------------------------

_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _unfenced(text: str) -> str:
    """Markdown without its fenced code blocks (CommonMark's rule: a backtick fence's info string
    holds no backtick, so a line opening with a code span is not a fence)."""
    kept, fence = [], ""
    for line in text.splitlines():
        mark = _FENCE_LINE.fullmatch(line)
        if not fence:
            if mark and not (mark[1][0] == "`" and "`" in mark[2]):
                fence = mark[1]
            else:
                kept.append(line)
        elif mark and mark[1][0] == fence[0] and len(mark[1]) >= len(fence) and not mark[2].strip():
            fence = ""
    return "\n".join(kept)


def _prose(text: str) -> str:
    """Markdown without fenced blocks and code spans, where a `](x)` is not a link."""
    return _CODE_SPAN.sub("", _unfenced(text))


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed,
    spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_unfenced(path.read_text(encoding="utf-8"))):
        slug = github_slug(heading)
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)  # GitHub numbers repeats
        seen[slug] = seen.get(slug, 0) + 1
    return found


def relative_links(path: Path) -> list[str]:
    targets = _LINK.findall(_prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_github_slug_matches_githubs_anchors() -> None:
    assert github_slug("The check's contract") == "the-checks-contract"
    assert github_slug("PR-based apply: `pr` and `land --when-green`") == "pr-based-apply-pr-and-land---when-green"
    assert github_slug("traces.py") == "tracespy"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link}: no heading with that anchor in {file.name}")
    assert not broken, f"{path.name}: " + "; ".join(broken)


def test_the_readme_links_every_document_in_docs() -> None:
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in relative_links(README)}
    assert not [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
