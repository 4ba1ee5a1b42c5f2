"""The gate: the runs a plan's verdict needs, and the verdict (docs/DESIGN.md, "A verdict per
test" and "Fail first").

The regression run checks the tip's tests on the plan's code (judge_tree.py: the plan's tree with
its test files and runner configs as on the tip), so the plan cannot write its own judge; the
plan's own run (its tree as is) happens only when the plan changes what judges it; the base run
(base.py: the tip, cached) is what both are compared with, per test (verdict.py). Each run puts
first the tests the plan's change reaches and those red on the tip, and stops after them when
one fails there (failfirst.py); the plan lands only on the whole suite's verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git.check import selection
from papayu_git.check.base import BaseRun, base_run, remember
from papayu_git.check.failfirst import (
    Context,
    Runs,
    Side,
    TipAgain,
    as_run,
    complete,
    first_session,
    order_suspect,
    own_order,
)
from papayu_git.check.judge_tree import tip_tests_commit
from papayu_git.check.run import CheckResult
from papayu_git.check.verdict import FAILING, Run, Verdict, judge

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check.command import CheckCommand
    from papayu_git.check.sandbox import Sandbox

# A best-of candidate's answer after its first part (GateRequest.pause): go on, or end as it is.
GO, DONE = "go", "done"


@dataclass(frozen=True)
class Gate:
    check: CheckResult  # the regression run (the only run when the plan changes no test), verdict inside
    own: CheckResult | None  # the plan's own run
    base: BaseRun | None
    verdict: Verdict | None  # None: no per-test results anywhere (the exit code decided)
    judged_by_tip: tuple[str, ...] = ()  # what the plan changes besides its code (judges.py)
    # The bytes the check ran of each file the plan changed, as its checkout had them: what the
    # landing must leave in the work tree (landing.py; docs/DESIGN.md, "Landing").
    checked_bytes: dict[str, bytes] = field(default_factory=dict)

    @property
    def review(self) -> bool:
        return self.verdict is not None and self.verdict.review


@dataclass(frozen=True)
class GateRequest:
    repo: pygit2.Repository
    pdir: Path
    root: Path
    plan_id: str
    tip: str  # the commit the plan is built on
    commit: str  # the plan's commit
    command: CheckCommand
    sandbox: Sandbox
    timeout_sec: float
    extra_commands: tuple[str, ...] = ()  # consented proposed commands: after the plan's own tree's check
    approved_edits: tuple[str, ...] = ()  # test files the user approved the plan to edit
    approve_judges: bool = False  # --allow-test-edits: the own run judges what the plan changes besides code
    # Best of N (bestof/): after each tree's first part alone, told what it found, answers GO (the
    # flaky re-run and the rest) or DONE (it ends as it is: a red candidate that can no longer win).
    pause: Callable[[dict[str, Any]], str] | None = field(default=None, compare=False)
    called: str = ""  # how the user names this plan when not by its id (a best-of candidate's `<run>:<i>`)


def run_gate(request: GateRequest) -> Gate:
    runs = Runs()
    base = _tip(request, runs)
    judge_commit, judged = tip_tests_commit(
        request.repo, request.tip, request.commit, request.root, request.command.command, base.results.support
    )
    context = Context(
        request.repo,
        request.pdir,
        request.root,
        request.plan_id,
        request.tip,
        request.command,
        request.sandbox,
        request.timeout_sec,
        base,
        runs,
        lambda name: unused_log(request.pdir / "checks" / name),
        plan_commit=request.commit,
    )
    plain = not request.extra_commands
    if judge_commit is None:
        sides = [Side("plan", request.commit, f"{request.plan_id}.log", request.extra_commands, whole=plain)]
    else:
        sides = [
            Side("regression", judge_commit, f"{request.plan_id}.log"),
            Side("own", request.commit, f"{request.plan_id}.own.log", request.extra_commands, whole=plain),
        ]
    why_not = _unordered(request, base)
    paused = request.pause is not None and not why_not
    for side in sides:
        if not why_not:
            side.first = selection.order_for(request.repo, request.pdir, base, request.tip, side.commit, judged)
        first_session(context, side, first_only=paused)
    again = TipAgain(context)
    shared = shared_services(request.root, request.sandbox)
    verdict = _judged(request, base, sides, None if paused else again, judged, shared)
    if paused and request.pause is not None:
        if request.pause(provisional(verdict, sides)) == DONE:  # it can no longer win: no re-run on the tip
            why = "the rest of the suite did not run: another candidate ranks above this one whatever it says"
            return _gate(request, base, sides, verdict.ended_after_first_part(why), judged, context, why_not)
        verdict = _judged(request, base, sides, again, judged, shared)
    verdict = _settled(context, request, sides, verdict, again, judged, shared)
    for side in sides:
        if side.whole and not side.partial and side.result is not None:
            origin = _origin(request)
            remember(
                request.repo,
                request.pdir,
                side.commit,
                request.command,
                request.sandbox,
                request.root,
                side.result,
                origin,
            )
    return _gate(request, base, sides, verdict, judged, context, why_not)


def _settled(
    context: Context,
    request: GateRequest,
    sides: list[Side],
    verdict: Verdict,
    again: TipAgain,
    judged: list[str],
    shared: str,
) -> Verdict:
    """The verdict once nothing in it is the order's doing: a run that stopped with nothing to
    show for it runs its rest; a reordered run whose failures may be the order's runs again in the
    suite's own order (failfirst.order_suspect). Each at most once per side. Not when the runs
    share a live service: the plan's run may have changed it, so a run of its failing tests alone
    would prove nothing (as for flakes, verdict.py)."""
    for _ in range(2 * len(sides) + 1):
        if verdict.incomplete and any(side.partial for side in sides):
            for side in sides:
                if side.partial:
                    complete(context, side)
        elif shared:
            return verdict
        else:
            suspect = next(
                ((side, why) for side in sides if (why := order_suspect(context, side, frozenset(verdict.flaky)))), None
            )
            if suspect is None:
                return verdict
            own_order(context, *suspect)
        verdict = _judged(request, context.base, sides, again, judged, shared)
    return verdict


def _tip(request: GateRequest, runs: Runs) -> BaseRun:
    """The base first: usually cached (the prewarm's, `doctor --check`'s, the landed plan's that
    is this tip), or being computed by the prewarm (waited for); then its checkout is free for
    the plan's runs."""
    runs.stage("the tip's tests (no run of this tip is kept yet)")
    base = base_run(
        request.repo,
        request.pdir,
        request.tip,
        request.command,
        request.sandbox,
        request.root,
        timeout_sec=request.timeout_sec,
        origin=_origin(request),
    )
    tests = len(base.results.outcomes)
    if base.cached:
        said = f"kept from {base.origin or 'an earlier check'} (its {base.duration_sec:.1f} s are not spent again)"
        runs.add("tip", said, tests=tests, seconds=0.0, log=base.log)
    else:
        runs.add("tip", "no run of this tip was kept: ran now", tests=tests, seconds=base.duration_sec, log=base.log)
    return base


def _origin(request: GateRequest) -> str:
    """What a later check calls a run of this one it reuses: by the name the user knows the plan by."""
    return f"candidate {request.called}'s check" if request.called else f"plan {request.plan_id}'s check"


def _unordered(request: GateRequest, base: BaseRun) -> str:
    if selection.mode(request.root) == "off":
        return "papayu.check.select=off"
    return selection.orderable(base)


def _judged(
    request: GateRequest,
    base: BaseRun,
    sides: list[Side],
    again: TipAgain | None,
    judged: list[str],
    shared: str,
) -> Verdict:
    regression, own = sides[0], sides[1] if len(sides) > 1 else None
    return judge(
        _base_run(base),
        regression.as_run(base),
        own.as_run(base) if own is not None else None,
        approved_edits=request.approved_edits,
        rerun_base=again,
        restored=judged,
        approve_restored=request.approve_judges,
        shared=shared,
    )


def _base_run(base: BaseRun) -> Run:
    return as_run(base.results, None if base.timed_out else base.exit_code)


def provisional(verdict: Verdict, sides: list[Side]) -> dict[str, Any]:
    """What a best-of run ranks a candidate by after its first part: what it fixed, what failed
    there (each maybe flaky: not yet run again on the tip), and what rejects or holds it whatever
    the rest says."""
    flaky_maybe = verdict.code == "ERR_CHECK_REGRESSION" and bool(verdict.broken) and not verdict.missing
    soft = verdict.code is None or verdict.incomplete or verdict.review or (flaky_maybe and not verdict.new_failing)
    held = verdict.pending if verdict.incomplete else verdict.code if verdict.review else ""
    return {
        "fixed": list(verdict.fixed),
        "suspects": list(verdict.broken),
        "rejected": None if soft else verdict.code,
        "held": held or None,
        "first": sum(len(side.first.tests) for side in sides),
    }


def _gate(
    request: GateRequest,
    base: BaseRun,
    sides: list[Side],
    verdict: Verdict,
    judged: list[str],
    context: Context,
    why_not: str,
) -> Gate:
    regression, own = sides[0], sides[1] if len(sides) > 1 else None
    assert regression.result is not None
    failing = {
        test
        for side in sides
        if side.result is not None and side.result.tests is not None
        for test, outcome in side.result.tests.outcomes.items()
        if outcome in FAILING
    }
    selection.remember_failures(request.pdir, sorted(failing - set(verdict.already_failing)))
    chosen: dict[str, Any] = {"mode": "off" if why_not.startswith("papayu.check.select") else "on"}
    if why_not:
        chosen["unordered"] = why_not
    for side in sides:
        chosen[side.role] = side.first.to_dict()
    own_result = own.result if own is not None else None
    # Where the plan's own run failed on something of the environment (a crate its manifest adds
    # that the offline cache lacks), that run's diagnosis is the one to show.
    causes = regression.result.environment or (own_result.environment if own_result is not None else ())
    checked = replace(
        regression.result,
        environment=causes,
        commit=request.commit,
        verdict=verdict,
        own_log=own_result.log if own_result is not None else "",
        selection=chosen,
        runs=tuple(context.runs.said),
        timing=_timing(context.runs.said),
        duration_sec=round(sum(float(r.get("seconds") or 0.0) for r in context.runs.said), 3),
    )
    return Gate(checked, own_result, base, verdict, tuple(judged), dict(context.checked_bytes))


def _timing(said: list[dict[str, Any]]) -> dict[str, float]:
    """The check's time by part, every run together."""
    out: dict[str, float] = {}
    for entry in said:
        for part, seconds in (entry.get("timing") or {}).items():
            out[part] = round(out.get(part, 0.0) + float(seconds), 3)
    return out


def shared_services(root: Path, sandbox: Sandbox) -> str:
    """The live services every run of the check reaches alike, which a plan's run can change
    (docs/DESIGN.md, "A verdict per test"): relayed loopback ports, or the network. "" for none."""
    from papayu_git.check.relay import configured_ports  # sockets and threads: as view.py, lazily

    ports = configured_ports(root)
    if sandbox.network:
        return "papayu.check.network"
    return f"papayu.check.localPorts {','.join(map(str, ports))}" if ports else ""


def unused_log(path: Path) -> Path:
    """``path``, or `<stem>.2.log`, `.3.log`… when a run of the same plan wrote it already (a
    rebase checks again, `apply ID` runs again): every run's log stays readable."""
    if not path.exists():
        return path
    stem = path.name.removesuffix(".log")
    n = 2
    while (path.parent / f"{stem}.{n}.log").exists():
        n += 1
    return path.parent / f"{stem}.{n}.log"
