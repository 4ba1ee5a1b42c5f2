"""papayu's runtime shield in a real pytest process (check/results/shield.py, pytest_plugin.py):
the plugin loaded as the check loads it (its helpers directory on PYTHONPATH, its configuration
beside it), a project's suite run by a real pytest, what the shield wrote read back.

The sandboxed runs through the real CLI are tests/test_judge_shield.py; here each rule is seen
on its own, with the honest code around it that must keep working: importing asyncio (which
rewrites its own code objects), types.coroutine on the project's generator, warnings, logging,
dataclasses and namedtuple finding their caller, importlib.metadata walking sys.path (papayu's
plugin directory on it), gc.collect, the tip's own tests walking frames.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from papayu_git.check.results.channel import PLUGIN_DIR, PLUGIN_MODULE, write_helpers

HONEST = """import asyncio
import collections
import dataclasses
import gc
import importlib.metadata
import logging
import types
import warnings


def test_library_code_finding_its_caller():
    assert not list(importlib.metadata.entry_points(group="no.such.group"))  # lists papayu's plugin directory
    warnings.warn("fine")
    logging.getLogger("x").warning("fine")
    Point = collections.namedtuple("Point", "x y")
    assert Point(1, 2).x == 1

    @dataclasses.dataclass
    class Pair:
        a: int
    assert Pair(1).a == 1


def test_coroutines_and_gc():
    @types.coroutine
    def step():
        yield
    gc.collect()
    assert asyncio.iscoroutinefunction(step) is False


def test_the_tips_own_frames():
    import inspect
    assert inspect.currentframe().f_back is not None
"""
CODE = """import gc
import sys


def walk():
    return len(gc.get_objects())


def caller():
    return sys._getframe(1)


def swap(function):
    function.__code__ = (lambda: 0).__code__


def trace():
    sys.settrace(None)


def report(path):
    open(path, "w").close()


def replace_the_runner():
    import importlib
    runner = importlib.import_module("_py" "test.runner")
    runner.call_and_report = lambda *args, **kwargs: None
"""
ATTACKS = """import os

import pytest

import code_under_test as code


def test_walk():
    code.walk()


def test_caller():
    code.caller()


def test_swap():
    code.swap(code.walk)


def test_trace():
    code.trace()


def test_report():
    code.report(os.environ["REPORT"] + "/junit.xml")


def test_replace_the_runner_last():
    code.replace_the_runner()
"""


def _run(tmp_path: Path, files: dict[str, str], changed: list[str]) -> tuple[str, list[dict[str, str]]]:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    report = tmp_path / "report"
    report.mkdir()
    helpers = write_helpers(tmp_path / "slot")
    shield = {"root": str(repo), "report_dir": str(report), "changed": changed, "code": []}
    (helpers / PLUGIN_DIR / f"{PLUGIN_MODULE}.json").write_text(json.dumps({"root": str(repo), "shield": shield}))
    env = {**os.environ, "PYTHONPATH": str(helpers / PLUGIN_DIR), "REPORT": str(report)}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "tests"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    records = [
        json.loads(line)
        for sink in sorted((report / "shield").glob("*.jsonl"))
        for line in sink.read_text().splitlines()
    ]
    support = [r for r in records if r["kind"] == "support"]  # the tip's run: once, of what it loaded
    assert len(support) == (0 if changed else 1), records
    assert all("tests/conftest.py" not in r["files"] for r in support), records
    return proc.stdout + proc.stderr, [r for r in records if r["kind"] != "support"]


def test_honest_library_code_around_the_rules_runs_and_the_tips_reach_is_only_said(tmp_path: Path) -> None:
    out, records = _run(tmp_path, {"tests/test_honest.py": HONEST}, changed=[])
    assert "3 passed" in out, out
    assert [r["kind"] for r in records] == ["allowed"], records
    assert records[0]["where"] == "tests/test_honest.py:34" and records[0]["what"] == "sys._getframe"


def test_what_the_plans_code_asks_for_is_refused_with_its_line(tmp_path: Path) -> None:
    files = {"code_under_test.py": CODE, "tests/test_attacks.py": ATTACKS}
    out, records = _run(tmp_path, files, changed=["code_under_test.py"])
    refused = {(r["what"], r["where"]) for r in records if r["kind"] == "refused"}
    assert refused == {
        ("gc.get_objects", "code_under_test.py:6"),
        ("sys._getframe", "code_under_test.py:10"),
        ("assigns the checked code's function code_under_test.walk.__code__", "code_under_test.py:14"),
        ("sys.settrace", "code_under_test.py:18"),
        (f"opens papayu's {tmp_path / 'report' / 'junit.xml'}", "code_under_test.py:22"),
    }, records
    assert "5 failed, 1 passed" in out, out
    changed = [r for r in records if r["kind"] == "changed"]
    assert len(changed) == 1 and changed[0]["what"].startswith(
        "_pytest.runner.call_and_report (replaced, by code_under_test.py:28"
    )


def test_the_same_code_in_the_tips_files_may_reach_but_not_rewrite(tmp_path: Path) -> None:
    """Unchanged by the plan, the code is the tip's: walking gc or frames, or setting a trace
    function (doctest, cProfile), is said, not refused; rewriting a function's code never is
    allowed."""
    files = {"code_under_test.py": CODE, "tests/test_attacks.py": ATTACKS}
    _, records = _run(tmp_path, files, changed=[])
    kinds = {(r["kind"], r["what"].split(" (")[0]) for r in records}
    assert ("allowed", "gc.get_objects") in kinds and ("allowed", "sys._getframe") in kinds, records
    assert ("allowed", "sys.settrace") in kinds and ("refused", "sys.settrace") not in kinds, records
    assert ("refused", "assigns the checked code's function code_under_test.walk.__code__") in kinds
