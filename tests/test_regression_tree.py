"""The regression run checks the tip's tests on the plan's code: a plan cannot write its own judge.

Real repositories: the tip is committed with git, the plan's commit is built like the transaction
builds it (objects.build_tree on the tip), and the regression commit is read back with git.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
from io import BytesIO
from pathlib import Path

import pygit2
import pytest
from helpers import apply_json, git, make_repo, snapshot, write_plan

from papayu_git.check.judge_tree import judge_paths, tip_tests_commit
from papayu_git.objects import MODE_FILE, MODE_TREE, GitTree, TreeChanges, build_tree, create_commit
from papayu_git.testfiles import BUILTIN_TEST_PATTERNS, edited_tests

CALC = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
PYPROJECT = "[project]\nname = 'calc'\ndependencies = []\n\n[tool.pytest.ini_options]\npythonpath = ['.']\n"
PATCH_BACK = "import calc\n\ncalc.add = lambda a, b: a + b\n"


def calc_files(**extra: str) -> dict[str, str | bytes]:
    return {"calc.py": CALC, "tests/test_calc.py": TEST, "pyproject.toml": PYPROJECT, **extra}


def tip_repo(root: Path, files: dict[str, str | bytes], *, executable: tuple[str, ...] = ()) -> pygit2.Repository:
    make_repo(root, files)
    if executable:
        git(root, "update-index", "--chmod=+x", *executable)
        git(root, "commit", "-q", "-m", "modes")
    return pygit2.Repository(str(root))


def tip_of(repo: pygit2.Repository) -> str:
    return str(repo.head.target)


def plan_commit(
    repo: pygit2.Repository,
    writes: dict[str, str] | None = None,
    delete_files: tuple[str, ...] = (),
    delete_dirs: tuple[str, ...] = (),
) -> str:
    """The plan's commit on the tip, built as the transaction builds it."""
    tip = repo.head.peel(pygit2.Commit)
    changes = TreeChanges(
        writes={path: data.encode() for path, data in (writes or {}).items()},
        delete_files=frozenset(delete_files),
        delete_dirs=frozenset(delete_dirs),
    )
    return create_commit(repo, build_tree(GitTree(repo, tip.tree), changes), tip.id, "plan")


def files(root: Path, rev: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, object id) of every entry of ``rev``'s tree, as git lists it."""
    out: dict[str, tuple[str, str]] = {}
    for line in git(root, "ls-tree", "-r", "--full-tree", rev).splitlines():
        meta, path = line.split("\t", 1)
        mode, _kind, oid = meta.split()
        out[path] = (mode, oid)
    return out


def judged(root: Path, repo: pygit2.Repository, plan: str) -> tuple[str, dict[str, tuple[str, str]]]:
    commit, _paths = tip_tests_commit(repo, tip_of(repo), plan, root)
    assert commit is not None
    return commit, files(root, commit)


def without(entries: dict[str, tuple[str, str]], *paths: str) -> dict[str, tuple[str, str]]:
    return {path: entry for path, entry in entries.items() if path not in paths}


# --- what is removed and what is put back --------------------------------------------------------


def test_a_new_test_file_is_removed_and_the_plans_code_kept(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    smoke = "import os\n\nos._exit(0)\n"
    plan = plan_commit(repo, {"calc.py": BROKEN, "tests/test_0_smoke.py": smoke, "docs/x.md": "x\n"})
    assert judge_paths(repo, tip_of(repo), plan, root) == ["docs/x.md", "tests/test_0_smoke.py"]
    _, tree = judged(root, repo, plan)
    assert tree == without(files(root, plan), "docs/x.md", "tests/test_0_smoke.py")
    assert tree["calc.py"] == files(root, plan)["calc.py"] != files(root, "HEAD")["calc.py"]


def test_an_edited_test_is_put_back(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    plan = plan_commit(repo, {"calc.py": BROKEN, "tests/test_calc.py": TEST.replace("== 4", "== 0")})
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, plan), "tests/test_calc.py": files(root, "HEAD")["tests/test_calc.py"]}


def test_a_deleted_test_comes_back_with_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"tests/run.sh": "#!/bin/sh\nexit 1\n"}), executable=("tests/run.sh",))
    plan = plan_commit(repo, {"calc.py": BROKEN}, delete_files=("tests/run.sh", "tests/test_calc.py"))
    _, tree = judged(root, repo, plan)
    tip = files(root, "HEAD")
    assert tree["tests/run.sh"] == tip["tests/run.sh"] and tree["tests/run.sh"][0] == "100755"
    assert tree == {
        **files(root, plan),
        "tests/run.sh": tip["tests/run.sh"],
        "tests/test_calc.py": tip["tests/test_calc.py"],
    }


def test_deleted_symlinks_and_submodules_in_a_test_dir_come_back_as_they_were(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    tip_repo(root, calc_files(**{"data.txt": "d\n"}))
    (root / "tests" / "data.txt").symlink_to("../data.txt")
    git(root, "add", "tests/data.txt")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{git(root, 'rev-parse', 'HEAD').strip()},tests/vendor")
    git(root, "commit", "-q", "-m", "a link and a submodule")
    repo = pygit2.Repository(str(root))
    plan = plan_commit(repo, {"calc.py": BROKEN}, delete_dirs=("tests",))
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, "HEAD"), "calc.py": files(root, plan)["calc.py"]}
    assert tree["tests/data.txt"][0] == "120000" and tree["tests/vendor"][0] == "160000"


def test_a_directory_that_replaced_a_test_file_is_undone(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"tests/data": "fixture\n"}))
    plan = plan_commit(repo, {"tests/data/a.txt": "a\n", "calc.py": BROKEN}, delete_files=("tests/data",))
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, "HEAD"), "calc.py": files(root, plan)["calc.py"]}


def test_new_conftests_at_the_root_and_below_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"pkg/sub/mod.py": "m = 1\n"}))
    plan = plan_commit(repo, {"calc.py": BROKEN, "conftest.py": PATCH_BACK, "pkg/sub/conftest.py": PATCH_BACK})
    assert judge_paths(repo, tip_of(repo), plan, root) == ["conftest.py", "pkg/sub/conftest.py"]
    _, tree = judged(root, repo, plan)
    assert tree == without(files(root, plan), "conftest.py", "pkg/sub/conftest.py")


def test_a_pytest_ini_change_is_reverted(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"pytest.ini": "[pytest]\ntestpaths = tests\n"}))
    plan = plan_commit(repo, {"calc.py": BROKEN, "pytest.ini": "[pytest]\naddopts = -k nothing\n"})
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, plan), "pytest.ini": files(root, "HEAD")["pytest.ini"]}


def test_a_pyproject_change_is_taken_from_the_tip_whatever_its_section(tmp_path: Path) -> None:
    """Not the plan's code: its dependencies shape the verdict too (the plan's own run shows
    whether they change it)."""
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    plan = plan_commit(repo, {"pyproject.toml": PYPROJECT.replace("[]", "['attrs']"), "calc.py": BROKEN})
    assert judge_paths(repo, tip_of(repo), plan, root) == ["pyproject.toml"]
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, plan), "pyproject.toml": files(root, "HEAD")["pyproject.toml"]}


def test_a_pyproject_pytest_change_is_reverted_whole(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    bent = PYPROJECT.replace("[]", "['attrs']") + "addopts = '-k nothing'\n"
    plan = plan_commit(repo, {"pyproject.toml": bent, "calc.py": BROKEN})
    _, tree = judged(root, repo, plan)
    assert tree == {**files(root, plan), "pyproject.toml": files(root, "HEAD")["pyproject.toml"]}


SHADOWS = {
    "unittest/__main__.py": "import os\nos._exit(0)\n",
    "pytest.py": "raise SystemExit(0)\n",
    "src/_pytest/__init__.py": "",
    "sitecustomize.py": "import os\nos._exit(0)\n",
    "src/usercustomize.py": "import os\nos._exit(0)\n",
    "x.pth": "import os; os._exit(0)\n",
    "lib/deep/y.pth": "import os; os._exit(0)\n",
}


def test_startup_hooks_and_runner_shadows_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    code = {"lib/unittest.py": "x = 1\n", "src/pkg/pytest_helpers.py": "x = 1\n"}
    not_code = {"tools/py.py": "x = 1\n", "pytest_plugin_notes.md": "n\n"}
    plan = plan_commit(repo, {"calc.py": BROKEN, **SHADOWS, **code, **not_code})
    assert judge_paths(repo, tip_of(repo), plan, root) == sorted({**SHADOWS, **not_code})
    _, tree = judged(root, repo, plan)
    assert tree == without(files(root, plan), *SHADOWS, *not_code)


def test_a_runners_own_repository_keeps_its_code(tmp_path: Path) -> None:
    """pytest's own src/_pytest is its code, not a shadow: the regression run tests the plan's."""
    root = tmp_path / "repo"
    repo = tip_repo(root, {"src/_pytest/main.py": "a = 1\n", "src/pytest/__init__.py": "", "testing/x.txt": "t\n"})
    plan = plan_commit(repo, {"src/_pytest/main.py": "a = 2\n", "src/_pytest/new.py": "b = 1\n"})
    assert tip_tests_commit(repo, tip_of(repo), plan, root) == (None, [])


def test_a_plan_changing_only_code_needs_no_second_run(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"pkg/old.py": "o = 1\n"}))
    plan = plan_commit(repo, {"calc.py": BROKEN, "pkg/new.py": "n = 1\n"}, delete_files=("pkg/old.py",))
    assert judge_paths(repo, tip_of(repo), plan, root) == []
    assert tip_tests_commit(repo, tip_of(repo), plan, root) == (None, [])


def test_documents_and_data_the_plan_changes_are_taken_from_the_tip(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"docs/old.md": "o\n", "testdata/add.golden": "5\n"}))
    plan = plan_commit(
        repo, {"calc.py": BROKEN, "README.md": "r\n", "testdata/add.golden": "6\n"}, delete_files=("docs/old.md",)
    )
    assert judge_paths(repo, tip_of(repo), plan, root) == ["README.md", "docs/old.md", "testdata/add.golden"]
    _, tree = judged(root, repo, plan)
    head = files(root, "HEAD")
    assert tree == {
        **without(files(root, plan), "README.md"),
        "docs/old.md": head["docs/old.md"],
        "testdata/add.golden": head["testdata/add.golden"],
    }


def test_configured_test_patterns_add_to_what_is_a_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project's own test locations judge the plan too; the usual ones still do."""
    monkeypatch.setenv("PAPAYU_TEST_PATTERNS", "qa/**")
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files(**{"qa/check_calc.py": TEST}))
    plan = plan_commit(repo, {"qa/check_calc.py": "", "qa/check_new.py": "", "tests/test_new.py": ""})
    _, tree = judged(root, repo, plan)
    assert tree == {
        **without(files(root, plan), "qa/check_new.py", "tests/test_new.py"),
        "qa/check_calc.py": files(root, "HEAD")["qa/check_calc.py"],
    }


def test_the_commit_is_a_child_of_the_tip_that_no_ref_names(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    plan = plan_commit(repo, {"calc.py": BROKEN, "tests/test_0_smoke.py": "import os\nos._exit(0)\n"})
    before = snapshot(root)
    commit, _ = judged(root, repo, plan)
    assert snapshot(root) == before  # refs, HEAD, index, work tree
    assert git(root, "rev-parse", f"{commit}^@").split() == [tip_of(repo)]
    assert git(root, "for-each-ref", "--contains", commit) == ""
    assert git(root, "cat-file", "-t", commit).strip() == "commit"


# --- the regression run fails what the plan's own run passes ------------------------------------------------

CHEATS = {
    "exit-before-the-tests": {"tests/test_0_smoke.py": "import os\n\nos._exit(0)\n"},
    "patch-back-in-a-test": {"tests/test_aaa.py": PATCH_BACK},
    "patch-back-in-a-conftest": {"conftest.py": PATCH_BACK},
}


def run_tests(root: Path, rev: str, into: Path) -> int:
    archive = subprocess.run(["git", "archive", rev], cwd=root, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    return subprocess.run(
        command, cwd=into, capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    ).returncode


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_the_regression_run_fails_a_plan_that_wrote_its_own_judge(tmp_path: Path, cheat: str) -> None:
    root = tmp_path / "repo"
    repo = tip_repo(root, calc_files())
    plan = plan_commit(repo, {"calc.py": BROKEN, **CHEATS[cheat]})
    commit, _ = judged(root, repo, plan)
    assert run_tests(root, plan, tmp_path / "plan") == 0  # the plan's own run: green, the danger
    assert run_tests(root, commit, tmp_path / "judge") == 1  # the tip's tests: red


# --- speed -----------------------------------------------------------------------------------


def synthetic_repo(root: Path, dirs: int = 20, subdirs: int = 20, per_dir: int = 50) -> pygit2.Repository:
    """A repository of dirs * subdirs * per_dir files (20k) plus a tests directory, committed on main."""
    git(root.parent, "init", "-q", "-b", "main", str(root))
    repo = pygit2.Repository(str(root))
    top = repo.TreeBuilder()
    for d in range(dirs):
        outer = repo.TreeBuilder()
        for s in range(subdirs):
            inner = repo.TreeBuilder()
            for f in range(per_dir):
                inner.insert(f"m{f}.py", repo.create_blob(f"# {d}/{s}/{f}\n".encode()), MODE_FILE)
            outer.insert(f"s{s}", inner.write(), MODE_TREE)
        top.insert(f"d{d}", outer.write(), MODE_TREE)
    tests = repo.TreeBuilder()
    tests.insert("test_calc.py", repo.create_blob(TEST.encode()), MODE_FILE)
    top.insert("tests", tests.write(), MODE_TREE)
    sig = pygit2.Signature("Test", "test@example.com")
    repo.create_commit("refs/heads/main", sig, sig, "20k files", top.write(), [])
    return repo


def test_the_commit_at_20k_files_takes_milliseconds(tmp_path: Path) -> None:
    root = tmp_path / "big"
    repo = synthetic_repo(root)
    plan = plan_commit(repo, {"d3/s4/m5.py": "broken\n", "tests/test_calc.py": "", "tests/test_new.py": ""})
    tip = tip_of(repo)
    start = time.perf_counter()
    commit, _paths = tip_tests_commit(repo, tip, plan, root)
    elapsed = time.perf_counter() - start
    print(f"\nregression commit at 20k files, a 3-file plan: {elapsed * 1000:.1f} ms")
    assert commit is not None and elapsed < 1.0
    diff = git(root, "diff", "--name-status", tip, commit)
    assert diff == "M\td3/s4/m5.py\n"


# --- the test-edit hold ----------------------------------------------------------------------


def test_creating_a_runner_shadow_or_startup_hook_is_held_like_a_test_edit(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    own = {"src/_pytest/__init__.py": "", "src/_pytest/main.py": "a = 1\n", "py/tool.py": "t = 1\n"}
    repo = tip_repo(root, {**calc_files(), **own})
    base = GitTree(repo, repo.head.peel(pygit2.Commit).tree)
    held = {
        **{path: data for path, data in SHADOWS.items() if not path.startswith("src/_pytest/")},
        "src/nose2/__init__.py": "",
        "py/__init__.py": "",  # the plain directory py/ made a package: `import py` finds it now
    }
    kept = {
        "src/_pytest/main.py": "a = 2\n",  # the project's own _pytest: its code, not a shadow
        "src/_pytest/new.py": "b = 1\n",
        "py/tool.py": "t = 2\n",
        "tools/py.py": "x\n",
        "lib/unittest.py": "x\n",
    }
    changes = TreeChanges(writes={path: data.encode() for path, data in {**held, **kept}.items()})
    assert edited_tests(base, changes, BUILTIN_TEST_PATTERNS) == sorted(held)
    deleted = TreeChanges(writes={}, delete_files=frozenset({"src/_pytest/main.py"}))
    assert edited_tests(base, deleted, BUILTIN_TEST_PATTERNS) == []


def test_a_plan_creating_sitecustomize_stops_at_review(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", calc_files())
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "sitecustomize.py", "content": "x = 1\n"}])
    data = apply_json(root, plan, "--check", f"{sys.executable} -m pytest -q -p no:cacheprovider tests", "-y")
    assert data["_rc"] == 1, data["_stderr"]
    assert data["state"] == "review" and data["test_edits"] == ["sitecustomize.py"]
    assert data["error"]["code"] == "ERR_TEST_EDITS_HELD" and not (root / "sitecustomize.py").exists()
