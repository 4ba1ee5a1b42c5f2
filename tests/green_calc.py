"""The green calc project the judge's tests attack: add and mul, each with its own test file,
the check pytest (per-test results); BROKEN is the plan's code that breaks test_add."""

from __future__ import annotations

import sys

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
BROKEN = CALC.replace("a + b", "a - b")
TESTS = {
    "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
}
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"
