"""The base run: the check on the tip, once per (tip tree, command, environment), shared by
every plan and by concurrent runs; real git, real bwrap, real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git, make_repo

from papayu_git.check import CheckCommand, sandbox
from papayu_git.check.base import base_run, cached
from papayu_git.check.results import Outcome
from papayu_git.repository import open_repo

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)
TESTS = (
    "def test_ok():\n    assert True\n\n"
    "def test_broken():\n    assert 1 == 2\n\n"
    "def test_slow():\n    import time; time.sleep(1.5)\n"
)


def _repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"test_x.py": TESTS, "pytest.ini": "[pytest]\n"})


def _run(repo: Path, **kw: object) -> object:
    pyrepo = open_repo(repo)
    check = CheckCommand(f"{sys.executable} -m pytest -q -p no:cacheprovider", "--check")
    box = sandbox.resolve(str(repo))
    head = str(pyrepo.head.target)
    return base_run(pyrepo, repo / ".git/papayu", head, check, box, repo, timeout_sec=60, **kw)  # type: ignore[arg-type]


def test_the_base_run_is_per_test_and_cached_per_tip(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = _run(repo)
    assert not first.cached and first.exit_code == 1  # type: ignore[attr-defined]
    outcomes = first.results.outcomes  # type: ignore[attr-defined]
    assert outcomes == {
        "test_x.py::test_ok": Outcome.PASSED,
        "test_x.py::test_broken": Outcome.FAILED,
        "test_x.py::test_slow": Outcome.PASSED,
    }
    again = _run(repo)
    assert again.cached and again.results.outcomes == outcomes  # type: ignore[attr-defined]
    # A new tip is a new key; the old result stays for plans still built on the old tip.
    (repo / "notes.txt").write_text("x\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    made = _run(repo)
    assert not made.cached and cached(repo / ".git/papayu", made.key) is not None  # type: ignore[attr-defined]
    assert made.origin == "this check" and _run(repo).origin == "this check"  # type: ignore[attr-defined]


def test_an_install_into_the_environment_is_a_new_base(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    site = repo / ".venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    first = _run(repo)
    assert _run(repo).key == first.key  # type: ignore[attr-defined]
    (site / "newpkg").mkdir()  # what `pip install newpkg` does
    assert _run(repo).key != first.key  # type: ignore[attr-defined]


def test_concurrent_runs_compute_one_base(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = (
        "import sys, json; sys.path[:0] = [sys.argv[2]]\n"
        "from tests_probe import run\n"
        "print(json.dumps(run(sys.argv[1])))\n"
    )
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "tests_probe.py").write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from papayu_git.check import CheckCommand, sandbox\n"
        "from papayu_git.check.base import base_run\n"
        "from papayu_git.repository import open_repo\n"
        "def run(root):\n"
        "    repo = open_repo(Path(root))\n"
        f"    check = CheckCommand({sys.executable!r} + ' -m pytest -q -p no:cacheprovider', '--check')\n"
        "    box = sandbox.resolve(root)\n"
        "    r = base_run(repo, Path(root) / '.git/papayu', str(repo.head.target), check, box, Path(root),"
        " timeout_sec=60)\n"
        "    return {'cached': r.cached, 'key': r.key}\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(repo), str(probe)], stdout=subprocess.PIPE, text=True, cwd=repo
        )
        for _ in range(3)
    ]
    import json

    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert len({o["key"] for o in outs}) == 1
    assert sorted(o["cached"] for o in outs) == [False, True, True]  # one base run, never two
