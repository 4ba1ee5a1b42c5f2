"""Whether a plan lands, from the per-test results of up to three runs of the check.

The base run is the check on the tip the plan is built on. The regression run is the tip's tests
on the plan's code (the plan's tree with the test files restored to the tip's): it decides
regressions, so the plan cannot write its judge. The plan's own run (its tree as is) happens only
when the plan adds or changes test files: its new tests, and the tests in files approved with
--allow-test-edits, are judged by it alone. Pure: the runs come in as values, and the one
further run it may need, the base again for the tests that failed on the plan, through
``rerun_base``.

Rules beyond the issue's text, each decided here once:
- SKIPPED is neither a pass nor a failure. A test that passed on the base and is skipped or
  absent in the regression run is missing; one that failed on the base and did not pass is
  already failing (skipping it fixes nothing).
- A test that fails in the regression run and did not run to a failure on the base (absent or
  skipped there) is newly failing: it did not fail on the tip, it fails on the plan's code. That
  holds on a red base whose run stopped early too (pytest stops at a collection error): what the
  tip did not show failing is not excused.
- A test that failed on the base and is absent from a green regression run (exit 0, readable, no
  test failing) is fixed: a collection error's test is gone once the module imports.
- A run that exits nonzero with no test failing crashed or stopped early; in the regression run
  that holds the plan back unless the base run did the same. A base like that is red with no
  failing test, and a plan whose regression run then exits 0 fixes it.
- A readable base with an unreadable regression or own run (no per-test results: an os._exit,
  a report the plan's code garbled) does not land; only an unreadable base falls back to the
  exit code, as the check did before per-test results.
- A timed-out regression or own run is ERR_CHECK_TIMEOUT: its results are partial.
- The own run also judges the tip's tests that pass in the regression run and fail in the plan's
  tree as is: the plan's test changes (a conftest, a new file patching at import) broke them,
  and the landed tip would be red.
- What the plan changes besides its code (``restored``: its tests, data, configs, scripts; taken
  from the tip for the regression run) is held for a human where the plan's own run then differs
  (docs/DESIGN.md, "What judges a plan"): tests that fail in the regression run and pass in the
  own run are explained by those changes, not fixed by the code (a Makefile recipe repairing the
  code, a golden file rewritten with it): held, named, never landed and never rolled back unless
  one of them also fails in the own run. Tests that passed on the tip and are gone from the own
  run (a deleted or renamed test file) are a judge removed: held, named, whatever else passes.
- No flake excuse when the runs share live services (papayu.check.localPorts, the network): a
  re-run on the tip reads what the plan's run left there, so failing again proves nothing.
- A regression or own run whose results cannot be trusted next to the base's (results/
  provenance.py: a report rewritten after the runner ended, ids reported twice, a source the
  base had missing or a new one, tests failing under exit 0) does not land: its reasons lead the
  notes, and ERR_CHECK_RESULTS_UNTRUSTED is the code unless the runs already failed on their
  own. A base whose own results cannot be trusted is read by its exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from papayu_git.check.results import ids, provenance, runners
from papayu_git.check.results.outcome import SHIELD_ERROR, Outcome, TestResults

FAILING = frozenset({Outcome.FAILED, Outcome.ERROR})
MAX_NAMES = 20  # names per line of the report; the rest are counted
# How runners join a file to the test inside it: pytest "path::name", node/vitest "path > name".
FILE_SEPARATORS = ("::", " > ")
REGRESSION = "the regression run (the tip's tests on the plan's code)"
OWN = "the plan's own run (its tree as is)"


@dataclass(frozen=True)
class Run:
    """One run of the check."""

    results: TestResults
    exit_code: int | None  # None: timed out
    # Tests it left out because it stopped after its first part (docs/DESIGN.md, "Fail first"):
    # not missing while a failure rejects the plan anyway, missing otherwise.
    not_run: frozenset[str] = frozenset()

    @property
    def passed_all(self) -> bool:
        return self.exit_code == 0

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None

    @property
    def failing(self) -> frozenset[str]:
        return frozenset(t for t, o in self.results.outcomes.items() if o in FAILING)

    @property
    def crashed(self) -> bool:
        """Red with no test failing: a crash, an early exit, an error outside any test."""
        return not self.passed_all and not self.failing

    def how_it_ended(self) -> str:
        return "timed out" if self.exit_code is None else f"exited {self.exit_code}"


# Verdicts held for a human whose landing (`land ID`) is the approval: the check passed but for
# what the plan changes besides its code.
HELD_FOR_A_HUMAN = frozenset({"ERR_JUDGE_EDITS_HELD", "ERR_TESTS_REMOVED_HELD"})


@dataclass(frozen=True)
class Verdict:
    lands: bool
    review: bool  # stop at review (kept for a human) instead of rolling back
    code: str | None  # None when it lands
    exit_code_only: bool
    passed: int = 0  # passing in the regression run (approved test files: in the own run)
    fixed: tuple[str, ...] = ()  # failed on the base, pass on the plan (or are gone from its green run)
    broken: tuple[str, ...] = ()  # did not fail on the base, fail in the regression run, not flaky
    missing: tuple[str, ...] = ()  # passed on the base, absent or skipped in the regression run
    already_failing: tuple[str, ...] = ()  # failed on the base, do not pass on the plan
    flaky: tuple[str, ...] = ()  # failed on the plan, passed on the base, failed when the base ran again
    new_failing: tuple[str, ...] = ()  # fail in the own run and not on the base, not judged by the regression run
    new_passing: int = 0  # only in the own run (new tests, new ones in approved files), passing
    notes: tuple[str, ...] = ()  # what the runs as a whole said: crashes, timeouts, unreadable results
    explained: tuple[str, ...] = ()  # do not pass in the regression run, pass in the own run
    removed: tuple[str, ...] = ()  # passed on the base, gone (absent or skipped) from the own run
    restored: tuple[str, ...] = ()  # what the plan changes besides its code, taken from the tip
    first: int = 0  # tests the regression run ran first (check/selection/), as its runner said
    not_run: tuple[str, ...] = ()  # the tip's tests not run: the run stopped after a failing first part
    incomplete: bool = False  # rejected only because tests did not run (the gate runs them, then judges again)
    pending: str = ""  # incomplete: the code it would have if they all passed ("" : it would land)

    def trailer(self) -> str:
        """The commit trailer's value: "passed 41, fixed 1, already failing 2", then what else is not 0."""
        if self.exit_code_only:
            return "exit code only"
        passed = f"passed {self.passed}" + (f" ({self.first} first)" if self.first else "")
        parts = [passed, f"fixed {len(self.fixed)}", f"already failing {len(self.already_failing)}"]
        optional = (
            ("new", self.new_passing),
            ("flaky", len(self.flaky)),
            ("newly failing", len(self.broken)),
            ("missing", len(self.missing)),
            ("new failing", len(self.new_failing)),
            ("passing only with the plan's judges", len(self.explained)),
            ("removed", len(self.removed)),
            ("not run", len(self.not_run)),
        )
        return ", ".join(parts + [f"{name} {n}" for name, n in optional if n])

    def named(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every test the verdict turned on, by label, those that keep the plan off first."""
        named = (
            ("newly failing", self.broken),
            ("missing", self.missing),
            ("failing in the plan's own run", self.new_failing),
            ("fixed", self.fixed),
            ("already failing on the tip", self.already_failing),
            ("flaky (failed on the tip too when re-run)", self.flaky),
            ("passing only with the plan's own versions of " + _names(self.restored, 5), self.explained),
            ("removed by the plan (passed on the tip)", self.removed),
        )
        return [(label, ids) for label, ids in named if ids]

    def lines(self) -> list[str]:
        """Every test the verdict turned on, by name, for a human."""
        lines = [*self.notes, *(f"{label}: {_names(ids)}" for label, ids in self.named())]
        if self.not_run and not self.incomplete:
            lines.append(
                f"not run: {_tests(len(self.not_run))}: the check stopped after the {self.first} it ran first, "
                "where the failures above reject the plan"
            )
        return lines

    def ended_after_first_part(self, why: str) -> Verdict:
        """An incomplete verdict that stays so (best of N: the candidate can no longer win): one
        that would fix nothing is held as such, anything else is rejected with its tests not run."""
        if not self.incomplete:
            return self
        notes = (*(n for n in self.notes if "count as missing" not in n), why)
        if self.pending == "ERR_CHECK_FIXES_NOTHING":
            return replace(self, review=True, code=self.pending, incomplete=False, notes=notes)
        return replace(self, notes=notes)

    @property
    def held_for_a_human(self) -> bool:
        """Held at review only for what the plan changes besides its code (its tests, their data,
        scripts): the check passed, and a human's landing (`land ID`) is the approval."""
        return self.review and self.code in HELD_FOR_A_HUMAN

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update({k: list(v) for k, v in data.items() if isinstance(v, tuple)})
        named = [[label, list(ids)] for label, ids in self.named()]
        return {**data, "trailer": self.trailer(), "lines": self.lines(), "named": named}


def plan_lands(verdict: Verdict | None, exit_code: int | None, timed_out: bool) -> bool:
    """Whether a check lets its plan land: the one rule, which every reader asks
    (``CheckResult.passed``, the recorded check's `passed` that checked.py and best-of read back).
    With the gate's verdict, the verdict: it lands, or it is held only for a human whose landing
    is the approval. Without one (a run the gate did not judge: `doctor --check`'s, agent mode's
    run_tests), the exit code: 0, within the timeout."""
    if verdict is not None:
        return verdict.lands or verdict.held_for_a_human
    return exit_code == 0 and not timed_out


def _names(ids: Iterable[str], limit: int = MAX_NAMES) -> str:
    ids = list(ids)
    more = f" ... and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def judge(
    base: Run,
    regression: Run,
    own: Run | None,
    *,
    approved_edits: Collection[str] = (),
    rerun_base: Callable[[list[str]], Run] | None = None,
    restored: Collection[str] = (),
    approve_restored: bool = False,
    shared: str = "",
) -> Verdict:
    """Land iff no test that passed on the base fails or is missing in the regression run, the
    plan's new tests pass, and the base was green or the plan fixes a test that failed on it.
    ``approved_edits``: files (or test ids) approved with --allow-test-edits; their tests are
    judged by ``own``. ``rerun_base`` runs the base again for the given ids; called at most once.
    ``restored``: what the plan changes besides its code (taken from the tip for the regression
    run); where the own run differs because of it the plan is held, unless ``approve_restored``
    (--allow-test-edits: the own run judges). ``shared``: the live services every run reaches alike
    (say which), "" for none."""
    untrusted = [
        f"{name}: {problem}"
        for name, run in ((REGRESSION, regression), (OWN, own))
        if run is not None
        for problem in provenance.problems(base.results, base.exit_code, run.results, run.exit_code)
    ]
    said = [*untrusted, *provenance.base_notes(base.results)]
    base = Run(provenance.readable_base(base.results), base.exit_code)
    if not base.results.exit_code_only:
        base, regression, own, changed = _under_base_ids(base, regression, own)
        if changed:
            said.append(
                f"{changed} test ids change from run to run (a temporary path, a time, a port, an address, a "
                "parameter named after a value of the run): those tests are judged under the tip's ids"
            )
    verdict = _judge(
        base,
        regression,
        own,
        approved_edits,
        None if untrusted else rerun_base,
        restored=restored,
        approve_restored=approve_restored,
        shared=shared,
    )
    # What the shield refused made the run fail or pass: that, not the outcome, is the verdict's code.
    shielded = any(SHIELD_ERROR in problem for problem in untrusted)
    if untrusted and (verdict.lands or verdict.review or shielded):
        verdict = replace(verdict, lands=False, review=False, code="ERR_CHECK_RESULTS_UNTRUSTED")
    return replace(verdict, notes=(*said, *verdict.notes)) if said else verdict


def _judge(
    base: Run,
    regression: Run,
    own: Run | None,
    approved_edits: Collection[str],
    rerun_base: Callable[[list[str]], Run] | None,
    *,
    restored: Collection[str] = (),
    approve_restored: bool = False,
    shared: str = "",
) -> Verdict:
    if base.results.exit_code_only:
        return _by_exit_code(
            regression, own, runners.why_exit_code_only(base.results), tuple(sorted(restored)), approve_restored
        )
    approved = _approved(approved_edits, base, regression, own) if own is not None else frozenset()
    tally = _Tally(restored=tuple(sorted(restored)), approve_restored=approve_restored)
    tally.compare(base, regression, approved)
    tally.rerun(rerun_base, shared)
    if own is not None:
        tally.judge_own(base, regression, own, approved)
        if restored:
            tally.differences(base, regression, own, approved)
    tally.notes += _run_notes(base, regression, own)
    return tally.verdict(base, regression, own)


@dataclass
class _Tally:
    passed: int = 0
    fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)  # passed on the base, failed on the plan
    missing: list[str] = field(default_factory=list)
    already_failing: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    new_failing: list[str] = field(default_factory=list)
    new_passing: int = 0
    notes: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    restored: tuple[str, ...] = ()
    approve_restored: bool = False

    def compare(self, base: Run, regression: Run, approved: frozenset[str]) -> None:
        """Each id once; an id reported more than once is a group (results/outcome.py): its worst
        outcome judges it, and one reported fewer times than on the base has lost a test."""
        before, after = base.results.outcomes, regression.results.outcomes
        green = _green(regression)
        for test in sorted((before.keys() | after.keys()) - approved):
            was, now = before.get(test), after.get(test)
            fewer = 0 < regression.results.count(test) < base.results.count(test)
            if fewer and was == Outcome.PASSED and now not in FAILING:
                self.missing.append(test)  # the group passes, one test of it is gone
            elif now == Outcome.PASSED:
                self.passed += regression.results.count(test)
                if was in FAILING:
                    self.fixed.append(test)
            elif now in FAILING:
                if was in FAILING:
                    self.already_failing.append(test)
                else:
                    (self.suspects if was == Outcome.PASSED else self.broken).append(test)
            elif now is None and test in regression.not_run:
                self.not_run.append(test)
            elif was == Outcome.PASSED:
                self.missing.append(test)
            elif was in FAILING:
                (self.fixed if green and now is None else self.already_failing).append(test)

    def rerun(self, rerun_base: Callable[[list[str]], Run] | None, shared: str = "") -> None:
        """Flakes never help the plan: a test that failed on it is run again on the base, never on
        the plan, and is flaky only if it fails on the base too. Not when the runs share a live
        service: the plan's run may have changed it (a row, a flag) so that the base fails as well."""
        if not self.suspects:
            return
        if shared:
            self.notes.append(
                f"no test excused as flaky: every run reaches the same live services ({shared}), which the "
                "plan's run may have changed, so a failure on the plan is its own, whatever a re-run on the tip says"
            )
            rerun_base = None  # not asked: failing again there would prove nothing
        again = rerun_base(list(self.suspects)) if rerun_base is not None else None
        failing_again = again.failing if again is not None else frozenset()
        self.flaky = [t for t in self.suspects if t in failing_again]
        self.broken = sorted(self.broken + [t for t in self.suspects if t not in failing_again])

    def judge_own(self, base: Run, regression: Run, own: Run, approved: frozenset[str]) -> None:
        before, tips, plans = base.results.outcomes, regression.results.outcomes, own.results.outcomes
        for test in sorted(plans.keys() | (approved & before.keys())):
            was, now = before.get(test), plans.get(test)
            if test in approved or (was is None and test not in tips):
                self._judge_owned(test, was, now)
            elif now in FAILING and was not in FAILING and tips.get(test) not in FAILING:
                self.new_failing.append(test)  # the plan's test changes broke a tip test
        self.fixed.sort()
        self.already_failing.sort()

    def differences(self, base: Run, regression: Run, own: Run, approved: frozenset[str]) -> None:
        """Where the plan's tree as is differs from the regression run on the tip's tests: the
        ones passing only there (explained by what the plan changed besides its code), and the
        base's passing tests the own run no longer has (removed)."""
        before, tips, plans = base.results.outcomes, regression.results.outcomes, own.results.outcomes
        for test in sorted(before.keys() - approved):
            now = plans.get(test)
            if now == Outcome.PASSED and tips.get(test) != Outcome.PASSED:
                self.explained.append(test)
            elif now is None and test in own.not_run:
                self.not_run.append(test)
            elif before[test] == Outcome.PASSED and now in (None, Outcome.SKIPPED):
                self.removed.append(test)
            elif before[test] == Outcome.PASSED and own.results.count(test) < base.results.count(test):
                self.removed.append(test)  # a group of the tip's with one test fewer
        # A failure the tip never had that only the regression tree shows (a module that reads a
        # data file the plan adds fails to import without it: a collection error of its test
        # file): explained the same way when the plan's own run has no such failure.
        self.explained += [t for t in self.broken if t not in before and plans.get(t) not in FAILING]

    def _judge_owned(self, test: str, was: Outcome | None, now: Outcome | None) -> None:
        """A new test, or one in a file approved for editing: the plan's own run is its judge."""
        if now == Outcome.PASSED:
            if was is None:
                self.new_passing += 1
            else:
                self.passed += 1
                if was in FAILING:
                    self.fixed.append(test)
        elif was in FAILING:
            self.already_failing.append(test)
        elif now in FAILING:
            self.new_failing.append(test)

    def verdict(self, base: Run, regression: Run, own: Run | None) -> Verdict:
        base_red = not base.passed_all or bool(base.failing)
        # A base red with no test failing (a crash, an error outside the tests) is fixed by a green run.
        run_fixed = base_red and not base.failing and _green(regression)
        review, code = False, None
        held = bool(self.restored) and not self.approve_restored
        explained = held and bool(self.explained)
        # Failing only with the tip's judges: the plan's own versions explain them (a human
        # decides, or --allow-test-edits let the own run judge).
        excused = bool(self.restored and self.explained) and set(self.broken + self.missing) <= set(self.explained)
        regressed = self.broken or self.missing or _regression_failed(base, regression, self.not_run)
        if regression.timed_out or (own is not None and own.timed_out):
            code = "ERR_CHECK_TIMEOUT"
        elif regressed and not excused:
            code = "ERR_CHECK_REGRESSION"
        elif self.new_failing or (own is not None and _own_failed(base, own)):
            code = "ERR_CHECK_NEW_TESTS_FAIL"
        elif held and self.removed:
            review, code = True, "ERR_TESTS_REMOVED_HELD"
            self.notes.append("the plan removes tests that pass on the tip: a human decides")
        elif explained:
            review, code = True, "ERR_JUDGE_EDITS_HELD"
            self.notes.append(
                "tests pass only with the plan's own versions of files that judge it, not with the tip's: a human decides"
            )
        elif base_red and not self.fixed and not run_fixed:
            review, code = True, "ERR_CHECK_FIXES_NOTHING"
            self.notes.append("the tip was already red and the plan fixes none of its failing tests")
        not_run = tuple(sorted(set(self.not_run)))
        incomplete = bool(not_run) and (code is None or review)
        pending = (code or "") if incomplete else ""
        if incomplete:  # a stop with no failure to show for it: what did not run is missing
            review, code = False, "ERR_CHECK_REGRESSION"
            self.notes.append(
                f"{_tests(len(not_run))} of the tip's did not run (the run stopped after its first part) "
                "and no failure there rejects the plan: they count as missing"
            )
        return Verdict(
            lands=code is None,
            review=review,
            code=code,
            exit_code_only=False,
            passed=self.passed,
            fixed=tuple(self.fixed),
            broken=tuple(self.broken),
            missing=tuple(self.missing),
            already_failing=tuple(self.already_failing),
            flaky=tuple(self.flaky),
            new_failing=tuple(self.new_failing),
            new_passing=self.new_passing,
            notes=tuple(self.notes),
            explained=tuple(self.explained),
            removed=tuple(self.removed),
            restored=self.restored,
            first=_first(regression.results.order),
            not_run=not_run,
            incomplete=incomplete,
            pending=pending,
        )


def _tests(n: int) -> str:
    return f"{n} test{'' if n == 1 else 's'}"


def _first(order: dict[str, Any]) -> int:
    """How many tests the run ran first (docs/DESIGN.md, "Fail first"), where not all of them."""
    first, total = int(order.get("first") or 0), int(order.get("total") or 0)
    return first if first < total else 0


def _under_base_ids(base: Run, regression: Run, own: Run | None) -> tuple[Run, Run, Run | None, int]:
    """The runs with each test under the base's id of it where its id names a value of the run
    (results/ids.py). A base test left unmatched whose stable part a run has under other ids is
    judged there, by those ids: it leaves the comparison, never "missing". Returns the base, the
    runs, and how many ids changed."""
    left_out: set[str] = set()
    changed = 0
    runs: list[Run | None] = []
    for run in (regression, own):
        if run is None:
            runs.append(None)
            continue
        found = ids.match(base.results.outcomes, run.results.outcomes)
        left_out |= found.by_stable_part
        changed = max(changed, found.changed)
        results = run.results
        if found.renamed:
            outcomes = {found.renamed.get(t, t): o for t, o in results.outcomes.items()}
            failures = {found.renamed.get(t, t): m for t, m in results.failures.items()}
            counts = {found.renamed.get(t, t): n for t, n in results.counts.items()}
            results = replace(results, outcomes=outcomes, failures=failures, counts=counts)
        runs.append(Run(results, run.exit_code, run.not_run))
    if left_out:
        kept = {t: o for t, o in base.results.outcomes.items() if t not in left_out}
        base = Run(replace(base.results, outcomes=kept), base.exit_code)
    assert runs[0] is not None
    return base, runs[0], runs[1], changed


def _approved(edits: Collection[str], *runs: Run | None) -> frozenset[str]:
    """The test ids of every run that are, or sit in, a file approved for editing."""
    ids = {t for run in runs if run is not None for t in run.results.outcomes}
    prefixes = tuple(e + sep for e in edits for sep in FILE_SEPARATORS)
    return frozenset(t for t in ids if t in edits or (prefixes and t.startswith(prefixes)))


def _green(run: Run) -> bool:
    return run.passed_all and not run.failing and not run.results.exit_code_only


def _regression_failed(base: Run, regression: Run, not_run: Collection[str] = ()) -> bool:
    """No per-test results, or red with no test failing where the tip was not (a run papayu
    stopped after its first part is red by that stop, not crashed)."""
    stopped = bool(not_run) and bool(regression.failing)
    return regression.results.exit_code_only or (regression.crashed and not base.crashed and not stopped)


def _own_failed(base: Run, own: Run) -> bool:
    return own.results.exit_code_only or (own.crashed and not base.crashed)


def _run_notes(base: Run, regression: Run, own: Run | None) -> list[str]:
    notes = []
    if base.crashed:
        notes.append(f"the run on the tip {base.how_it_ended()} with no test failing")
    for name, run in ((REGRESSION, regression), (OWN, own)):
        if run is None:
            continue
        if run.timed_out:
            notes.append(f"{name} timed out")
        elif run.results.exit_code_only:
            notes.append(f"{name} {run.how_it_ended()} and left no readable per-test results: crashed or stopped early")
        elif run.crashed:
            notes.append(f"{name} {run.how_it_ended()} with no test failing: crashed or stopped early")
    return notes


UNREADABLE = "the check's per-test results could not be read"


def _by_exit_code(
    regression: Run, own: Run | None, why: str = "", restored: tuple[str, ...] = (), approve_restored: bool = False
) -> Verdict:
    """The base's results are unreadable: the check's exit code decides, as before per-test
    results. ``why``: what papayu could not read, and what to set (results/runners.py). A
    regression run that fails where the plan's own run passes is explained by what the plan changes
    besides its code: held for a human, as per test (or judged by the own run when
    --allow-test-edits approved those changes)."""
    runs = [(REGRESSION, regression)] + ([(OWN, own)] if own is not None else [])
    notes = [f"the verdict is exit-code only: {why or UNREADABLE}"]
    notes += [f"{name} {run.how_it_ended()}" for name, run in runs]
    explained = bool(restored) and own is not None and own.passed_all and not regression.passed_all
    if explained and not regression.timed_out and approve_restored:
        return Verdict(lands=True, review=False, code=None, exit_code_only=True, notes=tuple(notes), restored=restored)
    if explained and not regression.timed_out:
        notes.append(f"it passes only with the plan's own versions of {_names(restored, 5)}: a human decides")
        return Verdict(False, True, "ERR_JUDGE_EDITS_HELD", exit_code_only=True, notes=tuple(notes), restored=restored)
    failed = [run for _, run in runs if not run.passed_all]
    code: str | None = None
    if failed:
        code = "ERR_CHECK_TIMEOUT" if any(run.timed_out for run in failed) else "ERR_CHECK_FAILED"
    return Verdict(lands=not failed, review=False, code=code, exit_code_only=True, notes=tuple(notes))
