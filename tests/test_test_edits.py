"""Test edits need a human: a plan that modifies or deletes existing tests never lands unasked.

Real repositories and the real CLI: with -y (or without a terminal) such a plan is committed and
checked, then stops at review; --allow-test-edits or an interactive yes lands it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, papayu, patch_action, plan_record, sha, snapshot, trace_record, write_plan
from llm_server import ScriptedLLM, chat

from papayu_git.testfiles import (
    BUILTIN_TEST_PATTERNS,
    compile_patterns,
    configured_test_patterns,
    edited_tests,
    is_test_path,
)

CALC = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
BREAK_CODE = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return a - b\n"
BEND_TEST = (
    "--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -4,2 +4,2 @@\n def test_add():\n"
    "-    assert add(2, 2) == 4\n+    assert add(2, 2) == 0\n"
)


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": CALC,
            "tests/test_calc.py": TEST,
            "tests/helpers/data.txt": "d\n",
            "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
        },
    )


def cheating_plan(directory: Path) -> Path:
    """Breaks add() and rewrites the test's assertion to match: the check passes."""
    return write_plan(
        directory,
        [
            patch_action("calc.py", CALC.encode(), BREAK_CODE),
            patch_action("tests/test_calc.py", TEST.encode(), BEND_TEST),
        ],
        summary="make add subtract",
    )


def apply_json(repo: Path, plan: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = papayu("apply", str(plan), "--json", *args, cwd=repo)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("yes", [["-y"], []], ids=["yes", "no-terminal"])
def test_a_plan_that_bends_a_test_stops_at_review(calc_repo: Path, tmp_path: Path, yes: list[str]) -> None:
    before = snapshot(calc_repo)
    code, data, stderr = apply_json(calc_repo, cheating_plan(tmp_path), "--check", CHECK, *yes)
    plan_id = data["plan_id"]
    assert code == 1, stderr  # not landed: a script running `apply -y` must notice
    assert data["state"] == "review" and data["test_edits"] == ["tests/test_calc.py"]
    assert data["error"]["code"] == "ERR_TEST_EDITS_HELD" and not data["ok"]
    assert data["check"]["passed"]  # the check was run, and it passes: that is the danger
    assert snapshot(calc_repo) == {
        **before,
        "refs": before["refs"]
        + git(calc_repo, "for-each-ref", "--format=%(refname) %(objectname)", f"refs/heads/papayu/{plan_id}"),
    }
    assert (calc_repo / "calc.py").read_text() == CALC
    warning = next(w for w in data["warnings"] if "tests/test_calc.py" in w)
    assert f"git papayu land {plan_id}" in warning and "tests/test_calc.py" in data["error"]["reason"]
    kept = git(calc_repo, "rev-parse", f"papayu/{plan_id}").strip()
    assert data["commit"] == kept
    assert "Papayu-Test-Edits: tests/test_calc.py\n" in git(calc_repo, "log", "-1", "--format=%B", kept)
    assert trace_record(calc_repo, data["trace_id"])["test_edits"] == ["tests/test_calc.py"]
    outcome = plan_record(calc_repo, plan_id)["extra"]["apply"]
    assert outcome["state"] == "review" and outcome["test_edits"] == ["tests/test_calc.py"]
    # After review, the printed command lands it.
    landed = papayu("land", plan_id, cwd=calc_repo)
    assert landed.returncode == 0, landed.stderr
    assert git(calc_repo, "rev-parse", "HEAD").strip() == kept


def test_allow_test_edits_lands_and_records_them(calc_repo: Path, tmp_path: Path) -> None:
    code, data, stderr = apply_json(calc_repo, cheating_plan(tmp_path), "--check", CHECK, "-y", "--allow-test-edits")
    assert code == 0, stderr
    assert data["state"] == "landed" and data["test_edits"] == ["tests/test_calc.py"]
    assert "a - b" in (calc_repo / "calc.py").read_text()
    assert "Papayu-Test-Edits: tests/test_calc.py\n" in git(calc_repo, "log", "-1", "--format=%B")
    assert trace_record(calc_repo, data["trace_id"])["test_edits"] == ["tests/test_calc.py"]
    assert git(calc_repo, "branch", "--list", "papayu/*") == ""


def test_a_new_test_file_lands_normally(calc_repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        [
            {
                "kind": "CREATE_FILE",
                "path": "tests/test_more.py",
                "content": "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
            },
            {"kind": "CREATE_FILE", "path": "src/util_test.go", "content": "package src\n"},
        ],
    )
    code, data, stderr = apply_json(calc_repo, plan, "--check", CHECK, "-y")
    assert code == 0, stderr
    assert data["state"] == "landed" and data["test_edits"] == []
    assert "Papayu-Test-Edits" not in git(calc_repo, "log", "-1", "--format=%B")
    assert trace_record(calc_repo, data["trace_id"])["test_edits"] == []


def test_rewriting_a_test_with_identical_bytes_is_no_test_edit(calc_repo: Path, tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        [
            {"kind": "UPDATE_FILE", "path": "calc.py", "content": CALC.replace("a + b", "b + a")},
            {"kind": "UPDATE_FILE", "path": "tests/test_calc.py", "content": TEST},
        ],
    )
    proc = papayu("apply", str(plan), "--json", "--protocol", "1", "--check", CHECK, "-y", cwd=calc_repo)
    data = json.loads(proc.stdout)
    assert data["state"] == "landed" and data["test_edits"] == [], proc.stderr


@pytest.mark.parametrize(
    "action, expected",
    [
        ({"kind": "DELETE_FILE", "path": "tests/test_calc.py"}, ["tests/test_calc.py"]),
        ({"kind": "DELETE_DIR", "path": "tests"}, ["tests/helpers/data.txt", "tests/test_calc.py"]),
    ],
    ids=["delete-file", "delete-dir"],
)
def test_deleting_tests_is_caught(calc_repo: Path, tmp_path: Path, action: dict[str, str], expected: list[str]) -> None:
    head = git(calc_repo, "rev-parse", "HEAD")
    code, data, stderr = apply_json(calc_repo, write_plan(tmp_path, [action]), "--check", "true", "-y")
    assert code == 1, stderr
    assert data["state"] == "review" and data["test_edits"] == expected
    assert git(calc_repo, "rev-parse", "HEAD") == head and (calc_repo / "tests" / "test_calc.py").exists()
    assert f"Papayu-Test-Edits: {', '.join(expected)}\n" in git(
        calc_repo, "log", "-1", "--format=%B", f"papayu/{data['plan_id']}"
    )


def test_custom_patterns_from_git_config_replace_the_built_in_list(calc_repo: Path, tmp_path: Path) -> None:
    (calc_repo / "checks").mkdir()
    (calc_repo / "checks" / "verify.sh").write_text("exit 0\n")
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-q", "-m", "checks")
    git(calc_repo, "config", "papayu.testPatterns", "checks/, spec_*.rb")
    assert configured_test_patterns(calc_repo) == (("checks/", "spec_*.rb"), "setting test_patterns")
    plan = write_plan(
        tmp_path, [{"kind": "UPDATE_FILE", "path": "checks/verify.sh", "content": "exit 1\n"}], name="checks.json"
    )
    code, data, _ = apply_json(calc_repo, plan, "--no-check", "-y", "--protocol", "1")
    assert data["state"] == "review" and data["test_edits"] == ["checks/verify.sh"]
    # Not a test edit any more, but tests/ still judges the plan: the tip's version of the test fails
    # on the broken code, the plan's own version passes, so a human decides.
    code, data, stderr = apply_json(calc_repo, cheating_plan(tmp_path), "--check", CHECK, "-y")
    assert code == 1 and data["state"] == "review" and data["test_edits"] == [], stderr
    assert data["error"]["code"] == "ERR_JUDGE_EDITS_HELD", data["error"]
    assert data["check"]["verdict"]["explained"] == ["tests/test_calc.py::test_add"], data["check"]["verdict"]
    assert (calc_repo / "calc.py").read_text() == CALC


def test_memory_test_roots_win_over_the_setting(calc_repo: Path, tmp_path: Path) -> None:
    git(calc_repo, "config", "papayu.testPatterns", "nothing-here/**")
    assert papayu("memory", "set", "project.test_roots", "qa,tests/test_calc.py", cwd=calc_repo).returncode == 0
    assert configured_test_patterns(calc_repo) == (("qa", "tests/test_calc.py"), "memory project.test_roots")
    code, data, stderr = apply_json(calc_repo, cheating_plan(tmp_path), "--check", CHECK, "-y")
    assert code == 1 and data["state"] == "review" and data["test_edits"] == ["tests/test_calc.py"], stderr
    plan = write_plan(tmp_path, [{"kind": "DELETE_FILE", "path": "tests/helpers/data.txt"}], name="d.json")
    code, data, stderr = apply_json(calc_repo, plan, "--no-check", "-y")
    assert data["state"] == "landed" and data["test_edits"] == [], stderr  # not under the memory's roots


def test_git_config_memory_override_is_read_too(calc_repo: Path) -> None:
    git(calc_repo, "config", "papayu.project.testRoots", "spec")
    assert configured_test_patterns(calc_repo) == (("spec",), "memory project.test_roots")


def test_show_names_the_edited_tests(calc_repo: Path, tmp_path: Path) -> None:
    _code, data, _ = apply_json(calc_repo, cheating_plan(tmp_path), "--check", CHECK, "-y")
    shown = papayu("show", data["plan_id"], cwd=calc_repo)
    assert shown.returncode == 0
    assert "edits tests or how they run: tests/test_calc.py" in shown.stdout and "state: review" in shown.stdout
    as_json = json.loads(papayu("show", data["plan_id"], "--json", cwd=calc_repo).stdout)
    assert as_json["plan"]["extra"]["apply"]["test_edits"] == ["tests/test_calc.py"]


@pytest.mark.parametrize("answer, state", [("y", "landed"), ("n", "review")])
def test_a_terminal_is_asked_naming_the_tests(calc_repo: Path, tmp_path: Path, answer: str, state: str) -> None:
    import os
    import pty
    import select
    import subprocess
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "apply", str(cheating_plan(tmp_path)), "--check", CHECK, "--json"],
        cwd=calc_repo,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    prompt, deadline = b"", time.monotonic() + 60
    while b"check passes?" not in prompt:
        assert time.monotonic() < deadline and proc.poll() is None, prompt
        if select.select([master], [], [], 1.0)[0]:
            prompt += os.read(master, 1024)
    assert b"tests/test_calc.py" in prompt
    os.write(master, f"{answer}\n".encode())
    while proc.poll() is None:  # keep draining the terminal (the check's spinner writes to it)
        assert time.monotonic() < deadline + 120
        if select.select([master], [], [], 0.2)[0]:
            try:
                os.read(master, 4096)
            except OSError:
                break
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    data = json.loads(out)
    assert proc.returncode == (0 if state == "landed" else 1) and data["state"] == state
    assert data["test_edits"] == ["tests/test_calc.py"]
    assert ("a - b" in (calc_repo / "calc.py").read_text()) is (state == "landed")


# --- fix takes the option through the same decorator ---------------------------------------------


def _fix_script() -> list[Any]:
    plan = {
        "summary": "make the test agree",
        "actions": [],
        "plan": [{"step": "edit", "details": "x"}],
        "questions": [],
        "context_requests": [],
        "risks": [],
        "commands_to_run": [],
        "memory_patch": {},
    }
    change = {
        "summary": "make add subtract",
        "actions": [
            {"kind": "PATCH_FILE", "path": "calc.py", "patch": BREAK_CODE, "base_sha256": sha(CALC)},
            {"kind": "PATCH_FILE", "path": "tests/test_calc.py", "patch": BEND_TEST, "base_sha256": sha(TEST)},
        ],
    }
    return [chat(plan), chat(change)]


@pytest.mark.parametrize("allow, state", [([], "review"), (["--allow-test-edits"], "landed")])
def test_fix_holds_or_lands_test_edits(calc_repo: Path, llm: ScriptedLLM, allow: list[str], state: str) -> None:
    llm.script = _fix_script()
    proc = papayu(
        "fix",
        "make add subtract and fix tests/test_calc.py",
        "-y",
        "--check",
        CHECK,
        "--json",
        *allow,
        cwd=calc_repo,
        env=llm.env(),
    )
    assert proc.returncode == (0 if state == "landed" else 1), proc.stderr
    out = json.loads(proc.stdout)["apply"]
    assert out["state"] == state and out["test_edits"] == ["tests/test_calc.py"]
    assert ("a - b" in (calc_repo / "calc.py").read_text()) is (state == "landed")


# --- pattern matching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_calc.py",
        "tests/data/fixture.json",
        "test/x.c",
        "Tests/Unit/a.py",
        "pkg/test_io.py",
        "test_top.py",
        "pkg/io_test.py",
        "a/b/conftest.py",
        "cmd/main_test.go",
        "web/app.test.ts",
        "web/app.test.js",
        "web/App.test.tsx",
        "web/app.spec.jsx",
        "e2e/login.spec.ts",
    ],
)
def test_built_in_patterns_match_tests(path: str) -> None:
    assert is_test_path(path, BUILTIN_TEST_PATTERNS)


@pytest.mark.parametrize(
    "path",
    [
        "calc.py",
        "src/testing.py",
        "pkg/tests.py",
        "contest.py",
        "src/test_data/x.txt",
        "main_test.rs",
        "web/app.test.css",
        "web/app.spec.py",
        "pkg/tests/x.py",
        "attest/x.py",
        "latest_test",
        "test_x.pyc",
    ],
)
def test_built_in_patterns_leave_other_files(path: str) -> None:
    assert not is_test_path(path, BUILTIN_TEST_PATTERNS)


def test_a_pattern_naming_a_directory_covers_what_is_below_it() -> None:
    assert is_test_path("qa/a/b.py", ["qa"]) and is_test_path("src/qa/b.py", ["qa"])  # no '/': any depth
    assert is_test_path("src/tests/x.py", ["src/tests/"]) and not is_test_path("lib/src/tests/x.py", ["src/tests"])
    assert is_test_path("spec/a_spec.rb", ["/spec"]) and not is_test_path("x/spec/a_spec.rb", ["/spec"])
    assert is_test_path("x/y_spec.rb", ["*_spec.rb"]) and is_test_path("tests/x", ["./tests"])
    assert is_test_path("anything", ["**"]) and not is_test_path("qa", [])
    assert not is_test_path("tests/fixtures/big.bin", ["tests/**", "!tests/fixtures"])
    assert is_test_path("tests/test_a.py", ["tests/**", "!tests/fixtures"])
    assert compile_patterns(["tests/**", "conftest.py", "", "/"]) == ("tests/**", "**/conftest.py/**")


def test_edited_tests_on_a_real_tree(tmp_path: Path) -> None:
    import pygit2

    from papayu_git.objects import GitTree, TreeChanges

    root = make_repo(
        tmp_path / "r",
        {"a.py": "a\n", "tests/t1.py": "1\n", "tests/sub/t2.py": "2\n", "lib/x_test.go": "x\n", "lib/y.go": "y\n"},
    )
    repo = pygit2.Repository(str(root))
    base = GitTree(repo, repo.head.peel(pygit2.Commit).tree)
    changes = TreeChanges(
        writes={"a.py": b"b\n", "tests/t1.py": b"1\n", "tests/new.py": b"n\n", "lib/x_test.go": b"changed\n"},
        delete_files=frozenset({"lib/y.go"}),
        delete_dirs=frozenset({"tests/sub"}),
        create_dirs=frozenset({"tests/empty"}),
    )
    assert edited_tests(base, changes, BUILTIN_TEST_PATTERNS) == ["lib/x_test.go", "tests/sub/t2.py"]
    assert edited_tests(base, changes, ["*.go"]) == ["lib/x_test.go", "lib/y.go"]
    assert edited_tests(base, changes, []) == []


# --- files that change how tests run -------------------------------------------------------

DESELECT_ALL = "def pytest_collection_modifyitems(config, items):\n    items.clear()\n"
# Loaded before the tests: the broken add() is replaced with a correct one, so they pass.
PATCH_CODE = "import calc\n\ncalc.add = lambda a, b: a + b\n"


def test_a_new_conftest_that_deselects_every_test_is_held(calc_repo: Path, tmp_path: Path) -> None:
    """The loophole: break the code, add a conftest.py that patches it back; the check passes."""
    plan = write_plan(
        tmp_path,
        [
            patch_action("calc.py", CALC.encode(), BREAK_CODE),
            {"kind": "CREATE_FILE", "path": "tests/conftest.py", "content": PATCH_CODE},
        ],
    )
    code, data, stderr = apply_json(calc_repo, plan, "--check", CHECK, "-y")
    assert code == 1, stderr
    assert data["test_edits"] == ["tests/conftest.py"] and (calc_repo / "calc.py").read_text() == CALC
    # The broken code passes in the plan's own tree only: the tip's tests without the new conftest
    # (the regression run) fail on it. Held for a human, naming the conftest, never landed.
    assert data["state"] == "review" and data["error"]["code"] == "ERR_TEST_EDITS_HELD", data
    assert data["check"]["verdict"]["explained"] == data["check"]["verdict"]["broken"] != [], data
    assert "tests/test_calc.py::test_add" in data["error"]["reason"]


PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


@pytest.mark.parametrize(
    ("diff", "held"),
    [
        ("@@ -1,2 +1,3 @@\n [tool.pytest.ini_options]\n pythonpath = ['.']\n+addopts = '-q'\n", True),
        ("@@ -1,2 +1,4 @@\n+[project]\n+name = 'calc'\n [tool.pytest.ini_options]\n pythonpath = ['.']\n", False),
    ],
    ids=["pytest-config", "project-table-only"],
)
def test_pyproject_counts_only_when_its_test_part_changes(
    calc_repo: Path, tmp_path: Path, diff: str, held: bool
) -> None:
    patch = "--- a/pyproject.toml\n+++ b/pyproject.toml\n" + diff
    plan = write_plan(tmp_path, [patch_action("pyproject.toml", PYPROJECT.encode(), patch)])
    code, data, stderr = apply_json(calc_repo, plan, "--check", CHECK, "-y")
    assert data["test_edits"] == (["pyproject.toml"] if held else []), stderr
    assert data["state"] == ("review" if held else "landed") and code == (1 if held else 0)


@pytest.mark.parametrize(
    ("path", "old", "new", "counts"),
    [
        ("tests/conftest.py", None, DESELECT_ALL, True),
        ("pytest.ini", None, "[pytest]\naddopts = -x\n", True),
        ("sub/tox.ini", "[tox]\n", "[tox]\nskipsdist = true\n", True),
        ("jest.config.js", "module.exports = {}\n", None, True),
        ("package.json", '{"scripts": {"test": "jest"}}', '{"scripts": {"test": "exit 0"}}', True),
        (
            "package.json",
            '{"version": "1.0.0", "scripts": {"test": "jest"}}',
            '{"version": "1.0.1", "scripts": {"test": "jest"}}',
            False,
        ),
        ("web/package.json", None, '{"scripts": {"build": "tsc"}}', False),
        ("setup.cfg", "[metadata]\nname = x\n", "[metadata]\nname = x\n[tool:pytest]\naddopts = -k no\n", True),
        ("setup.cfg", "[metadata]\nname = x\n", "[metadata]\nname = y\n", False),
        ("pyproject.toml", "[tool.pytest.ini_options]\n", "not = [toml", True),
        ("src/app.py", "a = 1\n", "a = 2\n", False),
    ],
)
def test_changes_how_tests_run(path: str, old: str | None, new: str | None, counts: bool) -> None:
    from papayu_git.testfiles import changes_how_tests_run

    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    assert changes_how_tests_run(path, encode(old), encode(new)) is counts
