"""Golden scenarios of papayu-git (docs/CONTRIBUTING.md: golden update policy).

Each scenario is a small real repository, a goal, and what a scripted model answers in
the PLAN and APPLY rounds. Answers are functions of ``shown`` (path -> sha256 of every
FILE block the model was shown), exactly what a real model copies into base_sha256.
The first 12 recreate the upstream golden traces (tests/golden/upstream); the rest
cover codes the upstream set does not.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Answer = Callable[[dict[str, str]], Any]

OPS_PY = '''"""Arithmetic helpers."""


def add(a: int, b: int) -> int:
    return a - b


def mul(a: int, b: int) -> int:
    return a * b
'''
TEST_OPS_PY = """from calc.ops import add, mul


def test_add() -> None:
    assert add(2, 3) == 5


def test_mul() -> None:
    assert mul(2, 3) == 6
"""
BASE_FILES: dict[str, str | bytes] = {
    "README.md": "# calc\n\nTiny arithmetic package.\n",
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1.0"\n',
    "src/calc/__init__.py": "",
    "src/calc/ops.py": OPS_PY,
    "src/calc/util.py": "def clamp(x: int, lo: int, hi: int) -> int:\n    return max(lo, min(x, hi))\n",
    "tests/test_ops.py": TEST_OPS_PY,
}
PYTEST_LOG = """============================= FAILURES =============================
_____________________________ test_add _____________________________

    def test_add() -> None:
>       assert add(2, 3) == 5
E       assert -1 == 5

tests/test_ops.py:5: AssertionError
FAILED tests/test_ops.py::test_add - assert -1 == 5
"""
FIX_GOAL = "fix the failing test tests/test_ops.py::test_add"
READ_OPS = [{"type": "read_file", "path": "src/calc/ops.py"}]
FIXED_OPS = OPS_PY.replace("return a - b", "return a + b")
OPS_PATCH = (
    "--- a/src/calc/ops.py\n+++ b/src/calc/ops.py\n@@ -3,5 +3,5 @@\n \n \n"
    " def add(a: int, b: int) -> int:\n-    return a - b\n+    return a + b\n \n"
)


@dataclass(frozen=True)
class Scenario:
    name: str  # golden file name without .json
    protocol: int
    goal: str
    golden_of: str  # which round becomes the golden trace: "plan" | "apply"
    plan: Answer
    apply: Answer | None = None
    log: str | None = None
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    between: Callable[[Path], None] | None = None  # runs after PLAN, before APPLY (e.g. a new commit)
    expect: tuple[str, str | None] = ("ok", None)  # (validation_outcome, error_code) of the golden

    def repo_files(self) -> dict[str, str | bytes]:
        return {**BASE_FILES, **self.files}


def _plan_read_ops(shown: dict[str, str]) -> Any:
    return {
        "mode": "fix-plan",
        "actions": [],
        "summary": "add() subtracts instead of adding; read ops.py.",
        "plan": [{"step": "read src/calc/ops.py"}, {"step": "fix add()", "details": "'-' -> '+'"}],
        "context_requests": READ_OPS,
    }


def _patch_ops(shown: dict[str, str]) -> Any:
    return {
        "actions": [
            {
                "kind": "PATCH_FILE",
                "path": "src/calc/ops.py",
                "patch": OPS_PATCH,
                "base_sha256": shown["src/calc/ops.py"],
            }
        ],
        "summary": "Fix add(): return a + b.",
    }


def _no_changes(shown: dict[str, str]) -> Any:
    return {"actions": [], "summary": "NO_CHANGES: add() already returns a + b at the branch tip."}


def _commit_ops_change(repo: Path) -> None:
    """Someone edits add() after the plan, on the line the fix changes: the sha256 the model saw is
    stale and the 3-way merge from it conflicts (a change elsewhere in the file would merge)."""
    path = repo / "src/calc/ops.py"
    text = path.read_text().replace("    return a - b\n", "    result = a - b\n    return result\n", 1)
    path.write_text(text + "\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n")
    for args in (["add", "src/calc/ops.py"], ["commit", "-q", "-m", "add sub()"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _big_modules() -> dict[str, str | bytes]:
    body = "".join(f"def f{i}(x: int) -> int:\n    return x + {i}\n\n" for i in range(900))
    return {f"src/calc/big{i}.py": f'"""Generated module {i}."""\n\n' + body for i in range(10)}


def _diet_log() -> str:
    frames = "".join(f'  File "src/calc/big{i}.py", line {100 + i}, in f{i}\n    return x + {i}\n' for i in range(10))
    return "Traceback (most recent call last):\n" + frames + "ZeroDivisionError: division by zero\n"


SCENARIOS: list[Scenario] = [
    # --- v1 (recreating upstream v1/001..007) ---------------------------------------------
    Scenario("v1/001_fix_bug_plan", 1, FIX_GOAL, "plan", _plan_read_ops, log=PYTEST_LOG),
    Scenario(
        "v1/002_fix_bug_apply",
        1,
        FIX_GOAL,
        "apply",
        _plan_read_ops,
        log=PYTEST_LOG,
        apply=lambda shown: {
            "actions": [{"kind": "UPDATE_FILE", "path": "src/calc/ops.py", "content": FIXED_OPS}],
            "summary": "Fix add(): return a + b.",
        },
    ),
    Scenario(
        "v1/003_generate_project_apply",
        1,
        "add a command-line entry point and usage docs",
        "apply",
        lambda shown: {"actions": [], "summary": "Plan: create src/calc/cli.py and docs/usage.md."},
        apply=lambda shown: [
            {"kind": "CREATE_DIR", "path": "docs"},
            {
                "kind": "CREATE_FILE",
                "path": "src/calc/cli.py",
                "content": "import sys\n\nfrom calc.ops import add\n\n\ndef main() -> None:\n"
                "    print(add(int(sys.argv[1]), int(sys.argv[2])))\n",
            },
            {"kind": "CREATE_FILE", "path": "docs/usage.md", "content": "# Usage\n\n`python -m calc.cli 2 3`\n"},
        ],
    ),
    Scenario(
        "v1/004_protected_path_block",
        1,
        "set DEBUG=1 in the environment file",
        "apply",
        lambda shown: {"actions": [], "summary": "Plan: add DEBUG=1 to .env."},
        apply=lambda shown: {
            "actions": [{"kind": "CREATE_FILE", "path": ".env", "content": "DEBUG=1\n"}],
            "summary": "Created .env",
        },
        expect=("err", "ERR_PROTECTED_PATH"),
    ),
    Scenario(
        "v1/005_update_without_base_block",
        1,
        FIX_GOAL,
        "apply",
        _plan_read_ops,
        log=PYTEST_LOG,
        apply=lambda shown: {
            "actions": [
                {"kind": "UPDATE_FILE", "path": "src/calc/util.py", "content": "def clamp(x, lo, hi):\n    return x\n"}
            ],
            "summary": "Rewrote util.py",
        },
        expect=("err", "ERR_UPDATE_WITHOUT_BASE"),
    ),
    Scenario(
        "v1/006_context_diet_applied",
        1,
        "why does the traceback end in ZeroDivisionError?",
        "plan",
        lambda shown: {
            "actions": [],
            "summary": "Diagnosis: need more context (big modules truncated).",
            "context_requests": [],
        },
        log=_diet_log(),
        files=_big_modules(),
        env={"PAPAYU_CONTEXT_MAX_FILES": "4", "PAPAYU_CONTEXT_MAX_FILE_CHARS": "1500"},
    ),
    Scenario("v1/007_no_changes_apply", 1, FIX_GOAL, "apply", _plan_read_ops, log=PYTEST_LOG, apply=_no_changes),
    # --- v2 (recreating upstream v2/001..005) ---------------------------------------------
    Scenario("v2/001_fix_bug_plan", 2, FIX_GOAL, "plan", _plan_read_ops, log=PYTEST_LOG),
    Scenario("v2/002_fix_bug_apply_patch", 2, FIX_GOAL, "apply", _plan_read_ops, log=PYTEST_LOG, apply=_patch_ops),
    Scenario(
        "v2/003_base_mismatch_block",
        2,
        FIX_GOAL,
        "apply",
        _plan_read_ops,
        log=PYTEST_LOG,
        apply=_patch_ops,
        between=_commit_ops_change,
        expect=("ok", "ERR_BASE_MISMATCH"),
    ),
    Scenario(
        "v2/004_patch_apply_failed_block",
        2,
        FIX_GOAL,
        "apply",
        _plan_read_ops,
        log=PYTEST_LOG,
        apply=lambda shown: {
            "actions": [
                {
                    "kind": "PATCH_FILE",
                    "path": "src/calc/ops.py",
                    "base_sha256": shown["src/calc/ops.py"],
                    "patch": "--- a/src/calc/ops.py\n+++ b/src/calc/ops.py\n@@ -3,3 +3,3 @@\n"
                    " def add(x, y):\n-    return x - y\n+    return x + y\n",
                }
            ],
            "summary": "Fix add().",
        },
        expect=("ok", "ERR_PATCH_APPLY_FAILED"),
    ),
    Scenario("v2/005_no_changes_apply", 2, FIX_GOAL, "apply", _plan_read_ops, log=PYTEST_LOG, apply=_no_changes),
    # --- beyond upstream --------------------------------------------------------------------
    Scenario(
        "v2/006_update_existing_forbidden_block",
        2,
        FIX_GOAL,
        "apply",
        _plan_read_ops,
        log=PYTEST_LOG,
        apply=lambda shown: {
            "actions": [{"kind": "UPDATE_FILE", "path": "src/calc/ops.py", "content": FIXED_OPS}],
            "summary": "Rewrote ops.py.",
        },
        expect=("err", "ERR_V2_UPDATE_EXISTING_FORBIDDEN"),
    ),
    Scenario(
        "v2/007_path_traversal_block",
        2,
        "write the report next to the repository",
        "apply",
        lambda shown: {"actions": [], "summary": "Plan: write ../report.md."},
        apply=lambda shown: {
            "actions": [{"kind": "CREATE_FILE", "path": "../report.md", "content": "hi\n"}],
            "summary": "Wrote the report.",
        },
        expect=("err", "ERR_PATH_TRAVERSAL"),
    ),
    Scenario(
        "v2/008_memory_patch_plan",
        2,
        "remember: run the tests with pytest -q",
        "plan",
        lambda shown: {
            "actions": [],
            "summary": "Noted the test command.",
            "memory_patch": {"project.default_test_command": "pytest -q"},
        },
    ),
    Scenario(
        "v2/009_non_utf8_block",
        2,
        "fix the greeting in src/calc/legacy.txt",
        "apply",
        lambda shown: {
            "actions": [],
            "summary": "Plan: patch legacy.txt.",
            "context_requests": [{"type": "read_file", "path": "src/calc/legacy.txt"}],
        },
        apply=lambda shown: {
            "actions": [
                {
                    "kind": "PATCH_FILE",
                    "path": "src/calc/legacy.txt",
                    "base_sha256": shown["src/calc/legacy.txt"],
                    "patch": "--- a/src/calc/legacy.txt\n+++ b/src/calc/legacy.txt\n@@ -1 +1 @@\n-Gr\ufffd\ufffde\n+Hello\n",
                }
            ],
            "summary": "Fix the greeting.",
        },
        files={"src/calc/legacy.txt": "Grüße\n".encode("latin-1")},
        expect=("ok", "ERR_NON_UTF8_FILE"),
    ),
]
