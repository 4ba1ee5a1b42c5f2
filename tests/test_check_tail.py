"""The tail of a red check's log without the runner's warnings (papayu_git/check/tail.py): each tool's
form of a warning is left out and counted, whatever the warning says; what says why a test failed
stays. The real pytest run of it is in tests/test_story.py."""

from __future__ import annotations

from papayu_git.check.tail import without_warnings

FAILURE = (
    "=================================== FAILURES ===================================\n"
    "___________________________________ test_add ___________________________________\n"
    "\n"
    "    def test_add():\n"
    ">       assert add(2, 3) == 5\n"
    "E       assert -1 == 5\n"
    "\n"
    "tests/test_calc.py:5: AssertionError\n"
)


def test_pytest_warnings_summary_goes_also_when_the_tail_starts_inside_it() -> None:
    summary = (
        "tests/test_a.py::test_one\n"
        "  /repo/tests/test_a.py:3: DeprecationWarning: old api\n"
        "    warnings.warn('old api', DeprecationWarning)\n"
        "\n"
        "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html\n"
    )
    end = "=========================== short test summary info ============================\n"
    whole = f"{FAILURE}=============================== warnings summary ===============================\n{summary}{end}"
    kept, left_out = without_warnings(whole)
    assert kept == FAILURE + end and left_out == 6
    cut, left_out = without_warnings(summary + end)  # the tail began inside the section
    assert cut == end and left_out == 5


def test_python_node_npm_and_rustc_warnings_go_and_are_counted() -> None:
    text = (
        "/usr/lib/python3/site-packages/lib.py:12: FutureWarning: the default will change\n"
        "  return frame.groupby(key)\n"
        "(node:4242) [DEP0040] DeprecationWarning: The `punycode` module is deprecated.\n"
        "(Use `node --trace-deprecation ...` to show where the warning was created)\n"
        "npm WARN deprecated inflight@1.0.6: This module is not supported\n"
        "warning: unused variable: `x`\n"
        " --> src/lib.rs:3:9\n"
        "  |\n"
        "3 |     let x = 1;\n"
        "  |         ^ help: if this is intentional, prefix it with an underscore: `_x`\n"
        "\n"
        "thread 'tests::adds' panicked at src/lib.rs:9:5: assertion failed\n"
    )
    kept, left_out = without_warnings(text)
    assert kept == "thread 'tests::adds' panicked at src/lib.rs:9:5: assertion failed\n" and left_out == 11


def test_a_failure_that_mentions_a_warning_stays() -> None:
    text = FAILURE + "E   UserWarning was raised instead of ValueError\nexit 1\n"
    assert without_warnings(text) == (text, 0)
