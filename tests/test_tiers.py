"""The test tiers (tests/tiers.py, docs/CONTRIBUTING.md "Test tiers"): a test's markers come from
what its code reaches, and `--fast` (make check) leaves the marked ones and the costly ones out."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tiers
import toolchains
from helpers import ROOT
from tiers import LOCAL_LLM, PACKAGING, PRECOMMIT, TOOLCHAIN, beyond_budget, kinds_of, uses


def _runs_cargo() -> str | None:
    return toolchains.which("cargo")


def _through_a_helper() -> object:
    return [_runs_cargo() for _ in range(1)]


def _names_the_modules_exception_only() -> type[Exception]:
    return toolchains.Unavailable


@uses(PACKAGING)
def _builds_a_wheel() -> None:
    """Its code names no tool: it says what it uses."""


def _in_a_lambda() -> object:
    return lambda: _builds_a_wheel()


class _Project:
    def prepare(self) -> None:
        toolchains.pnpm_install(Path("."))


def _sample(name: str) -> object:
    """A sample above, by name: a test naming one itself would reach it and be marked as it is."""
    return globals()[name]


def test_what_a_test_reaches_decides_its_kinds() -> None:
    assert kinds_of([_sample("_runs_cargo")]) == {TOOLCHAIN}
    assert kinds_of([_sample("_through_a_helper")]) == {TOOLCHAIN}  # transitively, inside a comprehension
    assert kinds_of([functools.partial(_sample("_through_a_helper"))]) == {TOOLCHAIN}
    assert kinds_of([_sample("_in_a_lambda")]) == {PACKAGING}
    assert kinds_of([{"maker": (_sample("_Project"),)}]) == {TOOLCHAIN}  # a parameter: a class in a container
    assert kinds_of([_sample("_names_the_modules_exception_only")]) == set()
    assert kinds_of([test_the_budget_keeps_each_modules_cheapest_then_the_cheapest_share]) == set()


def test_the_budget_keeps_each_modules_cheapest_then_the_cheapest_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tiers, "FAST_SHARE", 0.2)
    seconds = {"a::1": 1.0, "a::2": 2.0, "a::3": 3.0, "a::4": 15.0, "b::1": 79.0}  # 100 in all: 20 to spend
    assert beyond_budget(["a::1", "a::2", "a::3", "a::4", "a::new"], seconds) == {"a::4"}  # 6, then 21 is over
    assert beyond_budget(["b::1", "a::2", "a::4"], seconds) == {"a::4"}  # b's only test stays, whatever it costs
    assert beyond_budget(["a::3", "a::4"], seconds) == set()  # 18: the budget is of all recorded time
    assert beyond_budget(["a::1"], {}) == set()  # nothing recorded: nothing is costly
    assert tiers.test_id("tests/test_x.py::test_y[a@b]@wheel") == "tests/test_x.py::test_y[a@b]"
    long = "tests/test_x.py::test_y[" + "{" * 5000 + "]"
    assert len(tiers.test_id(long)) < 160 and tiers.test_id(long) != tiers.test_id(long + " ")


def test_durations_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    tiers.record(path, {"tests/test_a.py::test_b[1]": 1.234, "tests/test_a.py::test_c": 0.5}, "2 cores")
    assert tiers.recorded(path) == {"tests/test_a.py::test_b[1]": 1.23, "tests/test_a.py::test_c": 0.5}
    assert json.loads(path.read_text())["machine"] == "2 cores"
    assert tiers.recorded(tmp_path / "none.json") == {}


# Collects in a fresh pytest and prints each test's tier markers.
MARKED = """
import json, sys, pytest

class Report:
    def pytest_collection_finish(self, session):
        kinds = ("toolchain", "packaging", "precommit", "local_llm", "slow")
        marked = {i.nodeid: [k for k in kinds if i.get_closest_marker(k)] for i in session.items}
        print("MARKED " + json.dumps(marked))

pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[Report()])
"""


def _marked(*args: str) -> dict[str, list[str]]:
    proc = subprocess.run([sys.executable, "-c", MARKED, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MARKED ")), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {tiers.test_id(k): v for k, v in json.loads(line.removeprefix("MARKED ")).items()}


def test_the_suite_is_marked_from_what_each_test_uses() -> None:
    """Real modules of the suite: a toolchain per parameter, fixtures, a module's declaration."""
    files = [
        "tests/test_check_verdict_runs.py",
        "tests/test_check_cargo.py",
        "tests/test_packaging.py",
        "tests/test_precommit_tool.py",
        "tests/test_llm_local.py",
    ]
    marked = _marked(*files)
    runner = "tests/test_check_verdict_runs.py::test_the_verdict_per_test_with_each_runner"
    assert TOOLCHAIN in marked[f"{runner}[cargo]"] and TOOLCHAIN in marked[f"{runner}[node --test]"]
    assert TOOLCHAIN not in marked[f"{runner}[pytest]"]  # the same test, a parameter without a toolchain
    assert TOOLCHAIN in marked["tests/test_check_cargo.py::test_tests_after_a_failing_test_binary_are_read_not_missing"]
    doctest_ids = "tests/test_check_cargo.py::test_doctest_ids_name_the_file_the_item_and_the_place_among_its_doctests"
    assert marked[doctest_ids] == []  # reads cargo's output, runs no cargo: cheap, in the fast tier
    assert PACKAGING in marked["tests/test_packaging.py::test_wheel_contains_the_schemas_man_page_and_entry_points"]
    assert PACKAGING in marked["tests/test_packaging.py::test_clean_install_runs_doctor"]  # the venv needs the wheel
    assert marked["tests/test_packaging.py::test_every_library_the_package_imports_is_a_declared_dependency"] == []
    for file, kind in (("test_precommit_tool", PRECOMMIT), ("test_llm_local", LOCAL_LLM)):
        tests = [k for k in marked if k.startswith(f"tests/{file}.py::")]
        assert tests and all(kind in marked[t] for t in tests), file
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--fast", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    fast = {tiers.test_id(line) for line in proc.stdout.splitlines() if "::" in line}
    assert fast == {t for t, kinds in marked.items() if not kinds}, proc.stdout[-2000:]
