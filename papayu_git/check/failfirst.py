"""The runs of one check, fail first (docs/DESIGN.md, "Fail first"): each tree the gate judges
(the plan's, or its regression tree and its own) runs the tests its change reaches first, then
the rest, in one pytest session that stops after the first part when a test there fails that
did not fail on the tip; failing tests run again on the tip, those alone; a run that stopped
runs its rest when nothing it found still rejects the plan. Every run is named with why it ran
and where its time went (`Runs`), as an event and in the check's record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.check import selection
from papayu_git.check.base import BaseRun, run_on
from papayu_git.check.judge_tree import changed_files
from papayu_git.check.results import TestResults
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.results.outcome import CaseResult, Collected, Outcome
from papayu_git.check.run import CheckResult
from papayu_git.check.selection import FirstPart
from papayu_git.check.verdict import FAILING, Run

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check.command import CheckCommand
    from papayu_git.check.sandbox import Sandbox

NO_TESTS_COLLECTED = 5  # pytest's exit code when every test was left out


@dataclass
class Runs:
    """Every run of the suite one check makes, in order, each with why it ran and its time."""

    said: list[dict[str, Any]] = field(default_factory=list)

    def stage(self, label: str) -> None:
        """The spinner says what the check waits for now."""
        output.stage(f"check: {label}")

    def add(self, run: str, why: str, result: CheckResult | None = None, **more: Any) -> None:
        entry: dict[str, Any] = {"run": run, "why": why, **more}
        if result is not None:
            tests = result.tests.outcomes if result.tests is not None else {}
            entry.update(seconds=result.duration_sec, tests=len(tests), timing=dict(result.timing), log=result.log)
        self.said.append(entry)
        fields = {k: v for k, v in entry.items() if k not in ("timing", "log")}
        output.event("CHECK_RUN", **fields, **{f"{k}_sec": v for k, v in entry.get("timing", {}).items()})


@dataclass
class Side:
    """One tree the gate runs the tip's tests on: the plan's (its own run, or its only run when
    it changes nothing but code) or its regression tree."""

    role: str  # "plan", "regression" or "own"
    commit: str
    log: str  # the log's file name under checks/
    extra: tuple[str, ...] = ()  # consented proposed commands, after the check (the plan's own tree only)
    whole: bool = False  # exactly a base run of its tree when it ran every test (kept as that tree's base)
    first: FirstPart = field(default_factory=FirstPart)
    result: CheckResult | None = None
    partial: bool = False  # it did not run every test, at papayu's ask (stopped, or its first part only)
    own_order: bool = False  # it ran again in the suite's own order (the fail-first order was suspect)
    order_checked: bool = False  # its failures were run alone on its tree (order_suspect), once

    def not_run(self, base: BaseRun) -> frozenset[str]:
        if not self.partial or self.result is None or self.result.tests is None:
            return frozenset()
        return frozenset(base.results.outcomes.keys() - self.result.tests.outcomes.keys())

    def as_run(self, base: BaseRun) -> Run:
        assert self.result is not None
        run = as_run(self.result.tests, None if self.result.timed_out else self.result.exit_code)
        return replace(run, not_run=self.not_run(base))


WHAT = {
    "plan": "the tip's tests on the plan's code",
    "regression": "the tip's tests on the plan's code (its tests and configs as on the tip)",
    "own": "the plan's tree as is (it changes tests or what runs them)",
}


@dataclass
class Context:
    """What every run of one check shares."""

    repo: pygit2.Repository
    pdir: Path
    root: Path
    plan_id: str
    tip: str
    command: CheckCommand
    sandbox: Sandbox
    timeout_sec: float
    base: BaseRun
    runs: Runs
    logs: Callable[[str], Path]  # a log's file name -> a path no run of this plan wrote yet
    plan_commit: str = ""  # the plan's own commit: the bytes its check ran are kept (checked_bytes)
    # The bytes the check ran of each file the plan changed, as its checkout had them: what the
    # landing must leave in the work tree (landing.py; docs/DESIGN.md, "Landing").
    checked_bytes: dict[str, bytes] = field(default_factory=dict)

    def run(self, commit: str, log: str, ask: PluginAsk, extra: tuple[str, ...] = ()) -> CheckResult:
        # The runtime shield (docs/DESIGN.md, "The runtime shield") refuses reaching code in what
        # the run's tree changes against the tip, and allows it where the tip's own run reached.
        changed: list[str] = []
        code: list[str] = []
        if commit != self.tip:
            support = self.base.results.support
            changed, code = changed_files(self.repo, self.tip, commit, self.root, self.command.command, support)
        sites = frozenset(self.base.results.reaching)
        ask = replace(ask, changed=frozenset(changed), code=frozenset(code), tip_sites=sites)
        keep = None
        if commit == self.plan_commit:

            def keep(work: Path) -> None:
                self.checked_bytes.update(checked_bytes(work, changed))

        return run_on(
            self.repo,
            self.pdir,
            commit,
            self.command,
            self.sandbox,
            self.root,
            self.logs(log),
            self.timeout_sec,
            ask,
            self.plan_id,
            extra=extra,
            before=keep,
        )


def first_session(context: Context, side: Side, *, first_only: bool = False) -> None:
    """The side's first run: its first part then the rest in one session (``first_only``: the
    first part alone, a best-of candidate's before the ranking)."""
    first = side.first
    if first_only:
        ask = selection.first_only_ask(first)
    elif first:
        ask = selection.first_ask(first, context.base)
    else:
        ask = PluginAsk()
    label = f"{WHAT[side.role]}" + (f", {_count(first)} first" if first else "")
    context.runs.stage(label)
    side.result = context.run(side.commit, side.log, ask, side.extra)
    order = side.result.tests.order if side.result.tests is not None else {}
    side.partial = first_only or (bool(first) and bool(order.get("stopped")))
    why = WHAT[side.role] + _why_first(first, first_only, order)
    context.runs.add(
        side.role, why, side.result, first=int(order.get("first") or 0), stopped=str(order.get("stopped") or "")
    )


def complete(context: Context, side: Side) -> None:
    """The rest of a run that stopped after its first part (or ran its first part alone): every
    test it did not run, then one result of the two."""
    assert side.result is not None
    ran = side.result.tests.outcomes.keys() if side.result.tests is not None else set()
    context.runs.stage(f"the rest of {WHAT[side.role]}")
    stem = side.log.removesuffix(".log")
    rest = context.run(side.commit, f"{stem}.rest.log", selection.rest_ask(ran, context.base))
    why = "the rest of the suite: nothing the first part found rejects the plan"
    context.runs.add("rest", why, rest, of=side.role)
    side.result = merged(side.result, rest)
    side.partial = False


STOPPED_BY_PAPAYU = 2  # pytest's exit code when a session stops (papayu's early stop among them)


def order_suspect(context: Context, side: Side, flaky: frozenset[str]) -> str:
    """Why this reordered run's failures may be the order's rather than the plan's ("" when they
    are the plan's): its session crashed or lost tests the tip ran (a test run first may damage
    the process for every test after it), or tests that failed in its rest and alone on the tip
    passed pass alone on the plan's tree too (a failure in the first part is never the order's). Then the suite runs again in its own order, and that run is
    judged (docs/DESIGN.md, "Fail first"). Flakes never help the plan: a test failing there too is
    the plan's."""
    result, base = side.result, context.base
    if side.own_order or side.order_checked or not side.first or result is None or result.tests is None:
        return ""
    if result.timed_out:
        return ""
    outcomes = result.tests.outcomes
    stopped = bool(result.tests.order.get("stopped")) and result.exit_code == STOPPED_BY_PAPAYU
    if result.exit_code not in (0, 1, NO_TESTS_COLLECTED) and not stopped:
        return f"its session ended with exit {result.exit_code} before the end of the suite"
    gone = [t for t, o in base.results.outcomes.items() if o == Outcome.PASSED and t not in outcomes]
    if gone and not side.partial:
        return f"{len(gone)} tests the tip ran did not run"
    failing = sorted(
        t
        for t, o in outcomes.items()
        if o in FAILING
        and base.results.outcomes.get(t) == Outcome.PASSED
        and t not in flaky
        and not _first(side.first, t)
    )
    side.order_checked = True
    if not failing:
        return ""
    context.runs.stage(f"{len(failing)} failing tests alone on the plan's tree: broken, or the order?")
    stem = side.log.removesuffix(".log")
    alone = context.run(side.commit, f"{stem}.alone.log", selection.only_ask(failing))
    passing = [t for t in failing if (alone.tests.outcomes if alone.tests else {}).get(t) == Outcome.PASSED]
    why = f"{len(failing)} tests that failed on the plan and passed alone on the tip, alone on the plan"
    context.runs.add("plan again", why, alone, passed=len(passing))
    return f"{len(passing)} tests that failed in it pass alone on the plan's tree" if passing else ""


def _first(first: FirstPart, test: str) -> bool:
    """Whether ``test`` ran in the first part: only tests before it in the suite's own order ran
    before it there (each part keeps that order), so nothing the order moved can have left
    something behind for it."""
    return test in first.tests or test.split("::", 1)[0] in first.files


def own_order(context: Context, side: Side, why: str) -> None:
    """The side's tree again, the whole suite in its own order: the run the verdict judges now."""
    context.runs.stage(f"{WHAT[side.role]} in the suite's own order ({why})")
    stem = side.log.removesuffix(".log")
    result = context.run(side.commit, f"{stem}.own-order.log", PluginAsk(), side.extra)
    context.runs.add(side.role, f"{WHAT[side.role]}, in the suite's own order: in the fail-first order {why}", result)
    side.result, side.partial, side.own_order = result, False, True


class TipAgain:
    """Tests that failed on the plan, run again on the tip, those alone (all of the suite where
    the runner cannot run single tests); each test once per check."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.outcomes: dict[str, Outcome] = {}
        self.exit_code: int | None = 0

    def __call__(self, tests: list[str]) -> Run:
        wanted = [t for t in tests if t not in self.outcomes]
        if wanted:
            self._run(wanted)
        results = TestResults("rerun", {t: o for t, o in self.outcomes.items() if t in tests})
        return Run(results, self.exit_code)

    def _run(self, tests: list[str]) -> None:
        context = self.context
        single = bool(selection.orderable(context.base))
        ask = PluginAsk() if single else selection.only_ask(tests)
        what = "the tip's whole suite" if single else f"{len(tests)} test{'s' if len(tests) != 1 else ''}"
        context.runs.stage(f"{what} again on the tip: flaky, or broken by the plan?")
        log = f"{context.plan_id}.tip-again.log"
        again = context.run(context.tip, log, ask)
        failed = f"{len(tests)} test{'s' if len(tests) != 1 else ''}"
        why = f"{failed} failed on the plan: a test failing on the tip again is flaky, else broken"
        if single:
            why += " (this runner runs the whole suite)"
        context.runs.add("tip again", why, again)
        outcomes = again.tests.outcomes if again.tests is not None else {}
        for test in tests:  # not reported: not failing there
            self.outcomes[test] = outcomes.get(test, Outcome.SKIPPED)
        self.exit_code = None if again.timed_out else again.exit_code


MAX_CHECKED_BYTES = 64 * 1024 * 1024  # kept of a plan's files to compare after landing; larger ones are not


def checked_bytes(work: Path, paths: list[str]) -> dict[str, bytes]:
    """The bytes of each regular file of ``paths`` in a checkout, before its check ran."""
    out: dict[str, bytes] = {}
    total = 0
    for path in paths:
        try:
            target = work / path
            if target.is_symlink() or not target.is_file():
                continue
            data = target.read_bytes()
        except OSError:
            continue
        total += len(data)
        if total > MAX_CHECKED_BYTES:
            break
        out[path] = data
    return out


def as_run(results: TestResults | None, exit_code: int | None) -> Run:
    results = results if results is not None else TestResults("exit code only")
    if exit_code == NO_TESTS_COLLECTED and not results.exit_code_only and not results.outcomes:
        exit_code = 0
    return Run(results, exit_code)


def merged(first: CheckResult, rest: CheckResult) -> CheckResult:
    """One result of a run and the run of its rest: each test once (a test both report is a
    collision, one group: its worst outcome, its count), the sources both were read from (a
    source one lacks is said)."""
    a, b = first.tests, rest.tests
    if a is None or b is None:
        return rest if a is None else first
    collected = Collected()
    for results, name in ((a, "the first part"), (b, "the rest")):
        for test, outcome in results.outcomes.items():
            collected.add(CaseResult(test, outcome, results.failures.get(test, "")), name, results.count(test))
    errors = [*a.errors, *b.errors]
    if a.read_from != b.read_from:
        errors.append(f"the rest of the run was read from {', '.join(b.read_from) or 'nothing'}, not as its first part")
    sources = list(a.read_from)
    tests = collected.results(sources, [*a.unreadable, *b.unreadable], errors)
    reaching = tuple(dict.fromkeys([*a.reaching, *b.reaching]))  # the tip's own reaches, from both (shield.py)
    support = tuple(dict.fromkeys([*a.support, *b.support]))
    order = {k: v for k, v in a.order.items() if k != "stopped"}
    tests = replace(tests, order=order, reaching=reaching, support=support)
    failing = any(o in FAILING for o in tests.outcomes.values())
    if rest.timed_out:
        code: int | None = None
    elif rest.exit_code in (0, NO_TESTS_COLLECTED):
        code = 1 if failing else 0
    else:
        code = rest.exit_code
    timing = {k: round(first.timing.get(k, 0.0) + rest.timing.get(k, 0.0), 3) for k in first.timing | rest.timing}
    tail = rest.tail if rest.exit_code not in (0, NO_TESTS_COLLECTED) else first.tail
    return replace(
        first,
        exit_code=code,
        timed_out=rest.timed_out,
        duration_sec=round(first.duration_sec + rest.duration_sec, 3),
        tail=tail,
        tests=tests,
        environment=first.environment or rest.environment,
        timing=timing,
    )


def _count(first: FirstPart) -> str:
    files = f" and {len(first.files)} changed test files" if first.files else ""
    return f"{len(first.tests)} tests{files}"


def _why_first(first: FirstPart, first_only: bool, order: dict[str, Any]) -> str:
    if not first and first_only:
        return ": nothing it changes reaches a test first; the whole suite once the candidates are ranked"
    if not first:
        return ", in the suite's own order" + (f" ({first.notes[0]})" if first.notes else "")
    reasons = "; ".join(f"{n} {reason}" for reason, n in first.why.items())
    said = f": {reasons or 'tests first'} (ordered by {first.by})"
    if first_only:
        return said + "; the first part alone, the rest once the candidates are ranked"
    if order.get("stopped"):
        return said + f"; stopped after them: {order['stopped']}"
    return said + ", then the rest in the same session"
