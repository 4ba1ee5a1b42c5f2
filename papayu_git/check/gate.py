"""The gate: the runs a plan's verdict needs, and the verdict (docs/DESIGN.md, "A verdict per
test").

The regression run checks the tip's tests on the plan's code (judge_tree.py: the plan's tree with
its test files and runner configs as on the tip), so the plan cannot write its own judge; the
plan's own run (its tree as is) happens only when the plan changes what judges it; the base run
(base.py: the tip, cached) is what both are compared with, per test (verdict.py). A plan that
touches no test costs one run once the base is cached, two when it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git.check import selection
from papayu_git.check.base import BaseRun, base_run, inputs_path, remember
from papayu_git.check.judge_tree import changed_files, tip_tests_commit
from papayu_git.check.results import EXIT_CODE_ONLY, TestResults
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.run import CheckResult, run_check
from papayu_git.check.verdict import Run, Verdict, judge
from papayu_git.housekeeping import dead_check
from papayu_git.worktree import acquire_checkout, release_checkout

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check.command import CheckCommand
    from papayu_git.check.sandbox import Sandbox


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
    def lands(self) -> bool:
        return self.check.passed

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
    checked_bytes: dict[str, bytes] = field(default_factory=dict)  # filled by the run of the plan's own tree


def run_gate(request: GateRequest) -> Gate:
    # The base first: usually cached, or being computed by the prewarm (waited for), and then
    # its checkout is free for the plan's runs (a slot at the tip: only the plan's files move).
    def tip_run(fresh: bool = False) -> BaseRun:
        return base_run(
            request.repo,
            request.pdir,
            request.tip,
            request.command,
            request.sandbox,
            request.root,
            timeout_sec=request.timeout_sec,
            fresh=fresh,
        )

    base = tip_run()
    judge_commit, judged = tip_tests_commit(
        request.repo, request.tip, request.commit, request.root, request.command.command
    )
    own = None
    how = selection.mode(request.root)
    if judge_commit is None:
        # The tip's tests on this tree: the base of the tip it may become, recorded as one (a run
        # whose selection reused passes is no base).
        plain = not request.extra_commands
        regression = _judged(
            request, base, how, request.commit, f"{request.plan_id}.log", request.extra_commands, plain
        )
        if plain and regression.tests is not None and not regression.tests.reused:
            remember(
                request.repo, request.pdir, request.commit, request.command, request.sandbox, request.root, regression
            )
    else:
        regression = _judged(request, base, how, judge_commit, f"{request.plan_id}.log", ())
        own = _judged(request, base, how, request.commit, f"{request.plan_id}.own.log", request.extra_commands)

    def rerun_base(ids: list[str]) -> Run:
        again = tip_run(fresh=True)
        return _as_run(again.results, None if again.timed_out else again.exit_code)

    verdict = judge(
        _as_run(base.results, None if base.timed_out else base.exit_code),
        _as_run(regression.tests, None if regression.timed_out else regression.exit_code),
        _as_run(own.tests, None if own.timed_out else own.exit_code) if own is not None else None,
        approved_edits=request.approved_edits,
        rerun_base=rerun_base,
        restored=judged,
        approve_restored=request.approve_judges,
        shared=shared_services(request.root, request.sandbox),
    )
    # What is recorded as "the check" of the plan's commit: the regression run with the verdict.
    chosen = regression.selection
    if own is not None and own.selection is not None:  # the own run's selection is said beside it
        chosen = {**(chosen or {}), "own": own.selection}
    # Where the plan's own run failed on something of the environment (a crate its manifest adds
    # that the offline cache lacks), that run's diagnosis is the one to show.
    causes = regression.environment or (own.environment if own is not None else ())
    checked = replace(
        regression,
        environment=causes,
        commit=request.commit,
        verdict=verdict.to_dict(),
        lands=verdict.lands,
        own_log=own.log if own is not None else "",
        selection=chosen,
    )
    return Gate(checked, own, base, verdict, tuple(judged), dict(request.checked_bytes))


def shared_services(root: Path, sandbox: Sandbox) -> str:
    """The live services every run of the check reaches alike, which a plan's run can change
    (docs/DESIGN.md, "A verdict per test"): relayed loopback ports, or the network. "" for none."""
    from papayu_git.check.relay import configured_ports  # sockets and threads: as view.py, lazily

    ports = configured_ports(root)
    if sandbox.network:
        return "papayu.check.network"
    return f"papayu.check.localPorts {','.join(map(str, ports))}" if ports else ""


def _judged(
    request: GateRequest, base: BaseRun, how: str, commit: str, log: str, extra: tuple[str, ...], record: bool = False
) -> CheckResult:
    """One run of the plan's tree (or its regression tree) with the selective check as set
    (check/selection/): every test (off, observe: then what selection would have missed is
    recorded) or those whose inputs ``commit`` changed, the base's other passes reused (on); a
    sampled test that does not pass trips the wire: every test runs, the base's record is dropped."""
    ask = PluginAsk(record=record and how != "off")  # a run that may become a base records as one
    sites = frozenset(base.results.reaching) if base.results is not None else frozenset()

    def run(ask: PluginAsk) -> CheckResult:  # where the tip's code reached, the plan's may too (shield.py)
        return _run(request, commit, log, extra, replace(ask, tip_sites=sites))

    if how == "off" or extra:
        return run(ask)
    chosen = selection.plan(request.repo, request.pdir, base, request.tip, commit, seed=f"{request.plan_id}:{commit}")
    if how == "observe" or not chosen.selective:
        result = run(ask)
        said = {"missed": selection.missed(result, base, chosen)} if how == "observe" else {}
        return replace(result, selection=selection.record(chosen, how, **said))
    result = selection.with_reused(run(selection.ask(chosen)), base, chosen)
    wire = selection.tripped(result, chosen)
    if not wire:
        return replace(result, selection=selection.record(chosen, how))
    inputs_path(request.pdir, base.key).unlink(missing_ok=True)  # the record missed something: no more of it
    again = run(PluginAsk())
    return replace(again, selection=selection.record(chosen, how, tripwire=wire))


def _run(request: GateRequest, commit: str, log: str, extra: tuple[str, ...], ask: PluginAsk) -> CheckResult:
    # The shield refuses reaching code in what the run's tree changes, not in the tip's own files.
    changed, code = changed_files(request.repo, request.tip, commit, request.root, request.command.command)
    ask = replace(ask, changed=frozenset(changed), code=frozenset(code))
    checkout = acquire_checkout(request.repo, request.pdir, commit, plan_id=request.plan_id, on_stale=dead_check)
    if commit == request.commit:
        request.checked_bytes.update(checked_bytes(checkout.path, changed))
    try:
        return run_check(
            request.command,
            checkout,
            unused_log(request.pdir / "checks" / log),
            timeout_sec=request.timeout_sec,
            sandbox=request.sandbox,
            repo_root=request.root,
            commit=commit,
            extra_commands=extra,
            ask=ask,
        )
    finally:
        release_checkout(checkout)


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


# pytest's "no tests were collected": a tree without tests is not a red one (a plan may add the first).
NO_TESTS_COLLECTED = 5


def _as_run(results: TestResults | None, exit_code: int | None) -> Run:
    results = results if results is not None else TestResults(EXIT_CODE_ONLY)
    if exit_code == NO_TESTS_COLLECTED and not results.exit_code_only and not results.outcomes:
        exit_code = 0
    return Run(results, exit_code)
