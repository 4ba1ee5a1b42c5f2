"""What lands is what was checked (docs/DESIGN.md, "Landing"), through the real CLI.

A plan adding `.gitattributes` conversions (working-tree-encoding, eol through a macro) for files
it changes does not land on its own; its own run sees the files converted, as a checkout of its
commit would have them. A user whose git converts on checkout (core.autocrlf) gets in the work
tree the very bytes the check ran, and a `.gitattributes` that converts nothing (linguist-*,
export-ignore) lands with the plan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import (
    apply_actions,
    apply_why,
    blob,
    create_action,
    git,
    head_of,
    make_repo,
    update_action,
)

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
DATA_TEST = (
    "from pathlib import Path\n\n\ndef test_rows():\n"
    "    assert Path(__file__).parent.joinpath('rows.txt').read_bytes().count(b'\\n') == 2\n"
)
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


def _repo(tmp_path: Path, **files: str) -> Path:
    repo = make_repo(
        tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": PYPROJECT, "tests/test_add.py": TEST, **files}
    )
    git(repo, "config", "papayu.check.command", f"{PYTEST} tests")
    return repo


def test_a_plan_adding_a_working_tree_encoding_is_checked_converted_and_does_not_land(tmp_path: Path) -> None:
    """calc.py as UTF-16 is what a checkout of the plan's commit holds: its own run imports that
    (and fails), where last round it ran the UTF-8 blob and landed the UTF-16 file."""
    repo = _repo(tmp_path)
    head = head_of(repo)
    actions = [
        update_action("calc.py", CALC + "\n# tidied\n"),
        create_action(".gitattributes", "calc.py working-tree-encoding=UTF-16LE\n"),
    ]
    data = apply_actions(repo, "encoding", actions)
    assert data["state"] != "landed" and head_of(repo) == head, apply_why(data)
    assert "null bytes" in Path(data["check"]["own_log"]).read_text(), apply_why(data)
    assert (repo / "calc.py").read_text() == CALC and not (repo / ".gitattributes").exists()


@pytest.mark.parametrize(
    "attributes",
    ["[attr]windows text eol=crlf\n*.txt windows\n", "tests/rows.txt -text\n* text eol=crlf\n"],
    ids=["macro", "eol"],
)
def test_a_plan_adding_eol_conversions_is_held_with_the_line_named(tmp_path: Path, attributes: str) -> None:
    """Line endings a test does not notice: the runs pass, and the work tree would still get
    bytes the regression run never saw. Held, the attribute line named."""
    repo = _repo(tmp_path, **{"tests/rows.txt": "a\nb\n", "tests/test_rows.py": DATA_TEST})
    head = head_of(repo)
    data = apply_actions(
        repo, "eol", [update_action("calc.py", CALC + "\n# tidied\n"), create_action(".gitattributes", attributes)]
    )
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_RUNNER_REACH_HELD"), apply_why(data)
    assert ".gitattributes:" in data["error"]["reason"] and "converts" in data["error"]["reason"]
    assert head_of(repo) == head and git(repo, "status", "--porcelain") == ""


def test_attributes_that_convert_nothing_land_with_the_checked_bytes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    attributes = "*.py linguist-language=Python\ndocs/ export-ignore\n*.png -diff\n*.jpg binary\n*.dat -text\n"
    data = apply_actions(
        repo, "linguist", [update_action("calc.py", CALC + "\n# tidied\n"), create_action(".gitattributes", attributes)]
    )
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    for path in ("calc.py", ".gitattributes"):
        assert (repo / path).read_bytes() == blob(repo, f"HEAD:{path}"), path


def test_the_users_own_conversions_do_not_change_what_lands(tmp_path: Path) -> None:
    """core.autocrlf=true would check calc.py out with CRLF; the check (which reads none of the
    user's configuration) ran it with LF. The work tree gets the bytes the check ran, said, and
    git sees no change."""
    repo = _repo(tmp_path, **{".gitattributes": "* text=auto\n"})
    git(repo, "config", "core.autocrlf", "true")
    data = apply_actions(repo, "fix", [update_action("calc.py", CALC + "\n# tidied\n")])
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert (repo / "calc.py").read_bytes() == (CALC + "\n# tidied\n").encode()
    assert "written as the check ran it" in data["_stderr"]
    assert git(repo, "status", "--porcelain") == ""
