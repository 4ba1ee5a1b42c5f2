"""Which changed files judge a plan, by what the tip's tests use (judges.judging_paths,
judge_support.py), over real repositories' tip trees, for Python, Node, Go and Rust. The CLI runs
are tests/test_judge_support.py."""

from __future__ import annotations

from pathlib import Path

import pygit2
from helpers import make_repo

from papayu_git.judges import command_files, judging_paths
from papayu_git.objects import GitTree


def _judging(tmp_path: Path, files: dict[str, str], command: str = "") -> list[str]:
    repo = make_repo(tmp_path / "repo", files)
    git = pygit2.Repository(str(repo))
    tip = GitTree(git, git.head.peel(pygit2.Commit).tree)
    return judging_paths(list(files), tip, command=command)


def test_python_support_by_import_graph_and_content(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "from pkg.core import add\n",
        "pkg/core.py": "def add(a, b):\n    return a + b\n",
        "pkg/calc.py": "def mul(a, b):\n    return a * b\n",  # only tests import it: the code under test
        "pkg/testing.py": "def expected():\n    return 5\n",  # named for tests, only tests import it
        "pkg/checks.py": "import pytest\n\n\n@pytest.fixture\ndef five():\n    return 5\n",
        "pkg/shared.py": "import pytest\n\n\ndef helper():\n    return 1\n",  # the package uses it too
        "pkg/cli.py": "from pkg.shared import helper\n",
        "conftest.py": "pytest_plugins = ['pkg.checks']\n",
        "tests/test_x.py": "from pkg.testing import expected\nfrom pkg.calc import mul\nfrom pkg.shared import helper\n",
        "calc.py": "def add(a, b):\n    return a + b\n",
    }
    judging = _judging(tmp_path, files)
    assert "pkg/testing.py" in judging and "pkg/checks.py" in judging
    assert not {"pkg/core.py", "pkg/calc.py", "pkg/shared.py", "pkg/cli.py", "calc.py"} & set(judging)


def test_node_go_and_rust_support(tmp_path: Path) -> None:
    files = {
        "package.json": "{}\n",
        "lib/calc.js": "exports.add = (a, b) => a + b;\n",
        "lib/test-utils.js": "const assert = require('node:assert');\nexports.same = (a, b) => assert.equal(a, b);\n",
        "lib/expect.js": "const { expect } = require('vitest');\nexports.check = (v) => expect(v).toBe(5);\n",
        "lib/format.js": "const { add } = require('./calc');\nexports.show = (a, b) => String(add(a, b));\n",
        "test/calc.test.js": "const { same } = require('../lib/test-utils');\nconst { check } = require('../lib/expect');\n",
        "go.mod": "module example.com/calc\n",
        "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
        "assert.go": 'package calc\n\nimport (\n\t"testing"\n)\n\nfunc Same(t *testing.T, a, b int) {}\n',
        "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod fixtures;\n",
        "src/fixtures.rs": "pub fn five() -> i32 { 5 }\n",
        "src/util.rs": "pub fn twice(a: i32) -> i32 { a * 2 }\n",
    }
    judging = _judging(tmp_path, files)
    assert {"lib/test-utils.js", "lib/expect.js", "assert.go", "src/fixtures.rs"} <= set(judging), judging
    assert not {"lib/calc.js", "lib/format.js", "calc.go", "src/lib.rs", "src/util.rs"} & set(judging)


class _Files:
    def __init__(self, *files: str) -> None:
        self.files = set(files)

    def entry_kind(self, path: str) -> str | None:
        return "file" if path in self.files else None


def test_the_command_runs_programs_and_scripts_and_reads_operands() -> None:
    tip = _Files("calc.py", "pkg/mod.py", "ci/test.sh", "run_tests.py", "check", "Makefile", "ci/pytest.ini", "ci.mk")
    assert command_files("grep -q 'a + b' calc.py", tip) == frozenset()
    assert command_files("python -m doctest pkg/mod.py", tip) == frozenset()
    assert command_files("python3 -m py_compile calc.py && ./check", tip) == {"check"}
    assert command_files("X=1 timeout 60 python3.11 run_tests.py calc.py", tip) == {"run_tests.py"}
    assert command_files("bash -c 'sh ci/test.sh && grep x calc.py'", tip) == {"ci/test.sh"}
    assert command_files("python -m pytest -c ci/pytest.ini tests", tip) == {"ci/pytest.ini"}
    assert command_files("make -f ci.mk test", tip) == {"ci.mk", "Makefile"}
