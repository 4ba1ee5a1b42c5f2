"""Fail first in the gate (check/gate.py): the order a run of a plan's tree asks papayu's pytest
plugin for, the re-run of failing tests on the tip, the rest of a run that stopped after its
first part, and the tests that failed in recent checks (docs/DESIGN.md, "Fail first").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git import atomic, settings
from papayu_git.check.base import ORDER_DIR, BaseRun, inputs_path, newest_record
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.results.outcome import Outcome
from papayu_git.check.selection.inputs import Recorded, read_inputs
from papayu_git.check.selection.order import FirstPart, first_part, test_file
from papayu_git.errors import PapayuError
from papayu_git.objects import GitTree, changed_paths, commit_of

if TYPE_CHECKING:
    import pygit2

MODES = ("off", "on")
OLD_MODES = {"observe": "on"}  # what observe did (run every test) every run does now
RECENT_FILE = "recent-failures.json"
RECENT_KEPT = 200  # tests that failed in a check, newest first
PYTEST_STREAM = "pytest stream"


def mode(root: Path) -> str:
    """papayu.check.select: on (the default: fail first) or off (every run in the suite's own order)."""
    value = settings.get("check_select", str(root)).strip().lower() or "on"
    if value in OLD_MODES:
        settings.notice(
            f"papayu.check.select={value}",
            f"papayu.check.select={value} is deprecated: every check now runs the whole suite, failing tests "
            f"first; read as {OLD_MODES[value]} (set on or off)",
        )
        return OLD_MODES[value]
    if value not in MODES:
        raise PapayuError(
            "ERR_CONFIG_INVALID",
            f"papayu.check.select is {value!r}",
            path="papayu.check.select",
            hint="Use on (failing tests first, the default) or off (the suite's own order).",
        )
    return value


def orderable(base: BaseRun) -> str:
    """Why runs on ``base`` cannot be ordered ("" when they can): only pytest with papayu's plugin
    takes an order, and only a base read per test says what failed on the tip."""
    if base.results.exit_code_only or not base.results.trusted:
        return "the tip's run has no per-test results papayu trusts"
    if PYTEST_STREAM not in base.results.read_from:
        return "the check is not pytest with papayu's plugin: the suite runs in its own order"
    return ""


def order_for(
    repo: pygit2.Repository, pdir: Path, base: BaseRun, tip: str, commit: str, test_files: Iterable[str]
) -> FirstPart:
    """The first part of a run of ``commit`` (a plan's tree, or its regression tree) on ``base``.
    Whatever goes wrong here leaves the suite's own order, said in the notes: the order never
    decides a verdict."""
    try:
        tip_tree = GitTree(repo, commit_of(repo, tip).tree)
        changes = _changes(repo, tip_tree, commit)
        return first_part(
            _record(pdir, base),
            dict(base.results.outcomes),
            changes,
            tip_tree.read_blob,
            recent=recent_failures(pdir),
            test_files=[p for p in test_files if p in {path for path, _, _ in changes}],
        )
    except Exception as exc:  # an order that cannot be made is the suite's own
        return FirstPart(notes=(f"no fail-first order ({type(exc).__name__}: {exc}): the suite runs in its own order",))


def _changes(repo: pygit2.Repository, tip_tree: GitTree, commit: str) -> list[tuple[str, bytes | None, bytes | None]]:
    after = GitTree(repo, commit_of(repo, commit).tree)
    paths = changed_paths(repo, tip_tree.tree, after.tree) or []
    return [(path, tip_tree.read_blob(path), after.read_blob(path)) for path in paths]


def _record(pdir: Path, base: BaseRun) -> Recorded | None:
    """The tip's record of what each test reads, else the newest one kept (an older tip's: it
    only orders, so a record a few commits old is as good)."""
    for path in (inputs_path(pdir, base.key), newest_record(pdir)):
        if path is None:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        return read_inputs(data)
    return None


def first_ask(first: FirstPart, base: BaseRun) -> PluginAsk:
    """The first part, then the rest, in one session; it stops after the first part when one of
    them fails that did not fail on the tip."""
    return PluginAsk(
        first=first.tests, first_files=first.files, known_failing=_failing(base), stop=bool(first), only=None
    )


def first_only_ask(first: FirstPart) -> PluginAsk:
    """The first part alone (a best-of candidate's, before the candidates are ranked)."""
    return PluginAsk(only=first.tests, only_files=first.files)


def only_ask(tests: Iterable[str]) -> PluginAsk:
    """These tests alone (failing tests run again on the tip): their files only are collected."""
    wanted = frozenset(tests)
    return PluginAsk(only=wanted, only_files=frozenset(t for t in wanted if "::" not in t))


def rest_ask(ran: Iterable[str], base: BaseRun) -> PluginAsk:
    """Every test but those a first run ran; files all of whose tip tests ran are not collected."""
    done = frozenset(ran)
    files: dict[str, bool] = {}
    for test in base.results.outcomes:
        name = test_file(test)
        files[name] = files.get(name, True) and test in done
    return PluginAsk(skip=done, skip_files=frozenset(name for name, all_ran in files.items() if all_ran and name))


def _failing(base: BaseRun) -> frozenset[str]:
    return frozenset(t for t, o in base.results.outcomes.items() if o in (Outcome.FAILED, Outcome.ERROR))


def recent_failures(pdir: Path) -> set[str]:
    return set(_recent_list(pdir))


def remember_failures(pdir: Path, tests: Iterable[str]) -> None:
    """Tests that failed in a plan's run: the next checks run them first (a retry of the same
    goal most of all)."""
    new = list(dict.fromkeys(tests))
    if not new:
        return
    kept = [t for t in _recent_list(pdir) if t not in new]
    (pdir / ORDER_DIR).mkdir(parents=True, exist_ok=True)
    record = {"tests": (new + kept)[:RECENT_KEPT], "at": round(time.time())}
    atomic.write_json(pdir / ORDER_DIR / RECENT_FILE, record, indent=None)


def _recent_list(pdir: Path) -> list[str]:
    try:
        data = json.loads((pdir / ORDER_DIR / RECENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(t) for t in data.get("tests", [])] if isinstance(data, dict) else []
