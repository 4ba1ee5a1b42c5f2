"""The calc project of the everyday-loop tests: a failing test_add on a red tip, a passing test_sub,
the check pytest (per-test results), and a scripted model's answers fixing it well or wrongly.
Its repository is the `calc` fixture (conftest.py)."""

from __future__ import annotations

import sys
from typing import Any

from llm_server import Reply, chat, plan_answer, shown_files

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
GOAL = "fix the failing test tests/test_calc.py"
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "from calc import add, sub\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n"
)
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


def patch(old: str, new: str) -> str:
    return f"--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return {old}\n+    return {new}\n"


WRONG = patch("a - b", "a * b")  # add(2, 3) == 6: test_add still fails
GOOD = patch("a - b", "a + b")


def apply_answer(diff: str, summary: str = "add() fixed") -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        base = shown_files(body)["calc.py"]
        return chat(
            {
                "summary": summary,
                "actions": [{"kind": "PATCH_FILE", "path": "calc.py", "patch": diff, "base_sha256": base}],
            }
        )

    return reply


def attempt(diff: str) -> list[Any]:
    """One attempt of `fix`: the PLAN round's answer, then the APPLY round's change."""
    return [chat(plan_answer("add() subtracts")), apply_answer(diff)]
