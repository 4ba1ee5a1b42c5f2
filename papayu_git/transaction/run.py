"""One apply, in order: validate, commit, check, then land, stop at review or roll back
(docs/ARCHITECTURE.md, "transaction/"). ``Run`` owns the stopwatch, the generated branch and the
outcome record; held.py says why a checked plan does not land."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import locks, output, settings, stale
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir, run_git
from papayu_git.housekeeping import clear_stale
from papayu_git.landing import Target, checked_out_in, land, resolve_target, stash_around
from papayu_git.objects import (
    GitTree,
    branch_name,
    build_tree,
    changed_paths,
    commit_message,
    commit_of,
    create_commit,
    delete_branch,
    set_branch,
)
from papayu_git.outcomes import TREE_UNCHANGED, ApplyState
from papayu_git.plans import StoredPlan
from papayu_git.protocol import DELETING_KINDS, Response
from papayu_git.repository import open_repo
from papayu_git.secrets import safe_text
from papayu_git.stages import Stopwatch, pause_point
from papayu_git.testfiles import compile_patterns, configured_test_patterns
from papayu_git.traces import trace_id_for_apply
from papayu_git.transaction.held import (
    check_error,
    held_for_no_check,
    held_for_runner_reach,
    held_for_test_edits,
    held_for_user_tree_links,
    held_for_verdict,
)
from papayu_git.transaction.prepare import Prepared, prepare
from papayu_git.transaction.record import record_outcome, record_refusal
from papayu_git.transaction.values import ApplyOptions, ApplyResult, LandingPreview

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check import CheckCommand, CheckResult
    from papayu_git.check.gate import Gate
    from papayu_git.check.sandbox import Sandbox


MAX_REBASE_ATTEMPTS = 20
STAGE_NAMES = {"build_commit": "commit", "land": "landing"}  # the stopwatch's stages, as said


def apply_plan(repo_root: Path, plan: StoredPlan, response: Response, options: ApplyOptions) -> ApplyResult:
    repo = open_repo(repo_root)
    pdir = papayu_dir(repo)
    clear_stale(repo, pdir)
    run = Run(repo, Path(repo.workdir or repo_root), pdir, plan, options, trace_id_for_apply(pdir, plan.trace_id))
    try:
        with run.watch.stage("validate"):
            target = resolve_target(repo, options.onto)
            target = target._replace(tip=options.tip) if options.tip else target
            prepared = prepare(repo, plan, response, target)
        if any(a.kind in DELETING_KINDS for a in prepared.response.actions) and not options.yes:
            raise PapayuError(
                "ERR_DELETE_NOT_CONFIRMED",
                "the plan deletes: " + ", ".join(a.path for a in prepared.response.actions if a.kind in DELETING_KINDS),
            )
    except PapayuError as exc:
        record_refusal(pdir, plan, run.trace_id, exc)
        raise
    if not prepared.response.actions:
        return run.finish(ApplyState.NO_CHANGES, prepared.target, None)
    lock = locks.locks_dir(pdir) / f"apply-{plan.id}.lock"
    with locks.held(lock, wait_sec=0, what=f"plan {plan.id}", kind="apply", plan=plan.id):
        return run.transaction(prepared)


class Run:
    """One apply: owns the stopwatch, the generated branch and the outcome record."""

    def __init__(
        self, repo: pygit2.Repository, root: Path, pdir: Path, plan: StoredPlan, options: ApplyOptions, trace_id: str
    ) -> None:
        self.repo, self.root, self.pdir, self.plan, self.options = repo, root, pdir, plan, options
        self.trace_id = trace_id
        self.key = options.branch or plan.id  # the branch is papayu/<key>
        self.watch = Stopwatch()
        self.check: CheckResult | None = None
        self.gate: Gate | None = None
        self.warnings: list[str] = []
        self.proposed: tuple[str, ...] = ()
        self.test_edits: tuple[str, ...] = ()
        self.rebased_from: tuple[stale.Base, ...] = ()
        self.command: CheckCommand | None = None
        self.sandbox: Sandbox | None = None
        self.tip = ""
        self.reach: tuple[str, ...] = ()  # lines of the plan that reach for the test runner (check/reach.py)

    @property
    def branch(self) -> str:
        return branch_name(self.key)

    def transaction(self, prepared: Prepared) -> ApplyResult:
        self.proposed = prepared.response.commands_to_run
        self.resolve_check(prepared.base)
        commit = self.commit(prepared)
        if commit is None:
            return self.finish(ApplyState.NO_CHANGES, prepared.target, None)
        asked = False
        try:
            pause_point("after_commit")
            dirty = self.dirty_paths(prepared, commit)
            if dirty is not None:
                return self.rollback(prepared.target, commit, dirty, state=ApplyState.REFUSED, stage="preflight")
            for attempt in range(MAX_REBASE_ATTEMPTS + 1):
                self.scan_reach(prepared)
                checked = self.run_check(commit)
                commit = self.with_verdict(commit)
                if not checked:
                    return self.rollback(prepared.target, commit, check_error(self), stage="check")
                held = (
                    held_for_no_check(self)
                    or held_for_verdict(self)
                    or held_for_user_tree_links(self)
                    or held_for_test_edits(self)
                    or held_for_runner_reach(self)
                )
                if self.options.review or held:
                    output.event("PREVIEW_READY", plan_id=self.plan.id, branch=self.branch, commit=commit)
                    return self.finish(ApplyState.REVIEW, prepared.target, commit, error=held, stage="check")
                if not asked and self.options.confirm_landing is not None:
                    asked = True
                    preview = LandingPreview(
                        self.plan.id, self.branch, commit, prepared.target.branch, self.check_record()
                    )
                    if not self.options.confirm_landing(preview):
                        output.event("LANDING_DECLINED", plan_id=self.plan.id, branch=self.branch, commit=commit)
                        return self.finish(ApplyState.REVIEW, prepared.target, commit, declined=True)
                try:
                    with self.watch.stage("land"):
                        ran = self.gate.checked_bytes if self.gate is not None else None
                        how = land(self.repo, self.pdir, prepared.target, commit, self.plan.id, ran)
                    break
                except PapayuError as exc:
                    if exc.code != "ERR_BRANCH_MOVED" or not self.options.rebase or attempt == MAX_REBASE_ATTEMPTS:
                        raise
                prepared = self.reprepare(prepared)
                self.resolve_check(prepared.base)
                rebased = self.commit(prepared)
                if rebased is None:  # the new tip already has the plan's result
                    self.delete_branch()
                    return self.finish(ApplyState.NO_CHANGES, prepared.target, None)
                commit = rebased
        except PapayuError as exc:
            # Their hints: stash / finish the merge, then `land ID` the checked commit.
            keep = exc.code in ("ERR_DIRTY_WORKTREE", "ERR_OPERATION_IN_PROGRESS", "ERR_WORKTREE_MISSING")
            if keep and "'git papayu land ID'" in exc.hint:  # the real id, ready to paste
                exc.hint = exc.hint.replace("'git papayu land ID'", f"'git papayu land {self.plan.id}'")
            moved = exc.code == "ERR_BRANCH_MOVED"
            state = ApplyState.REFUSED_BRANCH_MOVED if moved else ApplyState.ROLLED_BACK
            self.rollback(prepared.target, commit, exc, keep=keep, state=state, stage=self.watch.failed_in)
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (error_handler.Terminated)
            during = self.watch.failed_in or "apply"
            interrupted = PapayuError("ERR_INTERRUPTED", f"interrupted during the {during}")
            self.rollback(
                prepared.target, commit, interrupted, state=ApplyState.INTERRUPTED, stage=self.watch.failed_in
            )
            # What the interruption left, said by the error handler in place of a bare "interrupted".
            exc.add_note(
                f"during the {STAGE_NAMES.get(during, during)} of plan {self.plan.id}: rolled back, "
                f"{prepared.target.branch} unchanged"
            )
            exc.add_note(f"apply it again: git papayu apply {self.plan.id}")
            raise
        except BaseException:
            self.rollback(prepared.target, commit, PapayuError("ERR_INTERNAL"), stage=self.watch.failed_in)
            raise
        self.delete_branch()
        output.event("APPLY_SUCCESS", plan_id=self.plan.id, branch=prepared.target.branch, commit=commit, landed_by=how)
        return self.finish(ApplyState.LANDED, prepared.target, commit, landed_by=how, stage="land")

    def dirty_paths(self, prepared: Prepared, commit: str) -> PapayuError | None:
        """Before the check: uncommitted changes (staged, unstaged or untracked) in the files the
        plan touches, in the work tree where the target branch is checked out, would stop the
        landing after the check; say so now, with the commands that get past it. Only when a
        check will run and the plan is meant to land (without a check the landing comes next)."""
        if self.command is None or self.options.review:
            return None
        workdir = checked_out_in(self.repo, prepared.target.ref)
        if workdir is None:
            return None
        tree = commit_of(self.repo, commit).tree
        paths = changed_paths(self.repo, prepared.base.tree, tree)
        if paths is None:  # a submodule or a file turned directory: landing's own check decides
            return None
        if not paths:
            return None
        args = ["--no-optional-locks", "--literal-pathspecs", "status", "--porcelain=v1", "-z", "--no-renames"]
        out = run_git([*args, "--untracked-files=all", "--", *paths], cwd=workdir, check=False).stdout
        dirty = sorted({record[3:] for record in out.split("\0") if len(record) > 3})
        if not dirty:
            return None
        return PapayuError(
            "ERR_DIRTY_WORKTREE",
            f"uncommitted changes in files the plan touches: {', '.join(dirty)}; stopped before the check",
            path=str(workdir),
            # The pop runs whatever the apply ends in: a red check must not leave the edits stashed.
            hint="commit them, or stash them around a new apply: "
            + stash_around(dirty, f"git papayu apply {self.plan.id}", untracked=True),
        )

    def commit(self, prepared: Prepared) -> str | None:
        self.test_edits = prepared.test_edits
        self.say_rebased(prepared)
        with self.watch.stage("build_commit"):
            tree_id = build_tree(prepared.base, prepared.changes)
            if tree_id == prepared.base.tree.id:
                self.warnings.append(TREE_UNCHANGED)
                return None
            self.tip = prepared.target.tip
            trailers = self.check_trailers()
            if self.test_edits:
                trailers.append(("Papayu-Test-Edits", ", ".join(self.test_edits)))
            trailers += [("Papayu-Rebased-From", f"{b.path} {b.commit[:12]}") for b in self.rebased_from]
            message = commit_message(
                prepared.response.summary or self.plan.goal, self.plan.id, self.trace_id, trailers=trailers
            )
            commit = create_commit(self.repo, tree_id, prepared.target.tip, message)
            set_branch(self.repo, self.key, commit)
        return commit

    def say_rebased(self, prepared: Prepared) -> None:
        """A stale edit merged onto the tip is said, in the output, the commit, the trace and the
        plan's outcome (docs/DESIGN.md, "The transaction and its guarantees")."""
        self.rebased_from = prepared.rebased_from
        for old in self.rebased_from:
            output.info(
                f"{safe_text(old.path)}: the plan was written against the version at {old.commit[:12]}, which "
                f"{prepared.target.branch} changed since; rebased from {old.commit[:12]} (blob {old.blob[:12]}) "
                "by a 3-way merge"
            )

    def scan_reach(self, prepared: Prepared) -> None:
        """Read what the plan adds to its code (and its new test modules do at import) for
        routes to the test runner, before its verdict is trusted (check/reach.py)."""
        self.reach = ()
        if self.command is None:
            return
        from papayu_git.check.reach import runner_reach  # see resolve_check
        from papayu_git.judges import command_files

        tests = compile_patterns(configured_test_patterns(str(self.root))[0])
        files = command_files(self.command.command, prepared.base)
        found = runner_reach(prepared.base, prepared.changes.writes, tests=tests, command_files=files)
        self.reach = tuple(safe_text(str(r)) for r in found)  # the plan's lines

    def reprepare(self, prepared: Prepared) -> Prepared:
        """--rebase: the same plan on the branch's new tip; bases must still match there."""
        target = resolve_target(self.repo, prepared.target.branch)
        output.info(f"{target.branch} moved to {target.tip[:12]}; re-applying the plan there (--rebase)")
        return prepare(self.repo, self.plan, prepared.response, target)

    def resolve_check(self, base: GitTree) -> None:
        """The check comes from the user and the tip the plan is built on, never from the plan's
        result (docs/DESIGN.md, "The check's trust boundary"); said before anything runs."""
        self.command = self.sandbox = None
        if self.options.no_check:
            return
        # The check package is imported where a check is resolved: `land`, `drop`, `show` and
        # `apply --no-check` never pay for it (docs/DESIGN.md, "Start-up and cost").
        from papayu_git.check import resolve_command
        from papayu_git.check.sandbox import resolve as resolve_sandbox

        self.command = resolve_command(self.root, base, self.options.check)
        if self.command is None:
            return
        self.sandbox = resolve_sandbox(str(self.root))

    def say_check(self) -> None:
        """What is about to run and where, said as it starts (not before a refusal that comes first)."""
        assert self.command is not None and self.sandbox is not None
        output.info(
            f"check: {safe_text(self.command.command)}   (from {self.command.source}; sandbox: {self.sandbox.level})"
        )
        if not self.sandbox.sandboxed and self.sandbox.reason != "papayu.check.sandbox=off":
            self.warn(
                f"the check runs WITHOUT a sandbox: {self.sandbox.reason}. It can read your files and "
                "reach the network; see `git papayu doctor` (papayu.check.sandbox=required refuses instead)"
            )

    def check_trailers(self) -> list[tuple[str, str]]:
        """Trailers for commit_message, which masks and escapes them."""
        if self.options.no_check:
            return [("Papayu-Check", "none (--no-check)")]
        if self.command is None or self.sandbox is None:
            return [("Papayu-Check", "none found")]
        return [
            ("Papayu-Check-Command", self.command.command),
            ("Papayu-Check-Source", self.command.source),
            ("Papayu-Sandbox", self.sandbox.level),
        ]

    def run_check(self, commit: str) -> bool:
        """The gate's runs and verdict (check/gate.py); True when the plan may land or waits for
        review (a red tip the plan neither fixes nor breaks)."""
        if self.command is None or self.sandbox is None:
            return True
        from papayu_git.check.gate import GateRequest, run_gate  # see resolve_check

        request = GateRequest(
            self.repo,
            self.pdir,
            self.root,
            self.plan.id,
            self.tip,
            commit,
            self.command,
            self.sandbox,
            settings.get_int("check_timeout_sec", str(self.root)),
            self.plan_commands() if self.options.run_proposed else (),
            self.approved_test_edits(commit),
            approve_judges=self.options.allow_test_edits,
            pause=self.paused(),
            called=self.options.branch.replace("/", ":", 1) if self.options.branch else "",
        )
        with self.watch.stage("check"):
            self.say_check()  # inside the stage: a Ctrl-C the moment it is said is one during the check
            with output.progress(f"check: {self.command.command}"):  # masked by progress
                self.gate = run_gate(request)
        self.check = self.gate.check
        # Passed (check/verdict.py, plan_lands), or held at review: held_for_verdict /
        # held_for_test_edits say why.
        return self.check.passed or self.gate.review

    def paused(self) -> Callable[[dict[str, Any]], str] | None:
        """A best-of candidate's pause after its check's first part, told besides what the check
        found what holds the plan whatever the check says (its test edits, its reach)."""
        pause = self.options.check_pause
        if pause is None:
            return None
        held = "ERR_TEST_EDITS_HELD" if self.test_edits and not self.options.allow_test_edits else ""
        held = held or ("ERR_RUNNER_REACH_HELD" if self.reach else "")

        def told(found: dict[str, Any]) -> str:
            return pause({**found, "held": found.get("held") or held or None})

        return told

    def approved_test_edits(self, commit: str) -> tuple[str, ...]:
        """Test files the user let the plan edit (--allow-test-edits): judged by the plan's own
        run only. A deleted test file is never among them: its tests still judge the plan's code."""
        if not self.options.allow_test_edits:
            return ()
        tree = GitTree(self.repo, commit_of(self.repo, commit).tree)
        return tuple(p for p in self.test_edits if tree.entry_kind(p) == "file")

    def with_verdict(self, commit: str) -> str:
        """The checked commit with the verdict as its `Papayu-Check` trailer: the same tree and
        parent (what was checked), the branch moved to it, the record naming it."""
        verdict = self.gate.verdict if self.gate else None
        if verdict is None or self.check is None:
            return commit
        old = commit_of(self.repo, commit)
        trailer = commit_message("", self.plan.id, "", trailers=[("Papayu-Check", verdict.trailer())]).splitlines()[-1]
        amended = create_commit(
            self.repo, old.tree_id, old.parent_ids[0], old.message.rstrip("\n") + "\n" + trailer + "\n"
        )
        set_branch(self.repo, self.key, amended)
        self.check = replace(self.check, commit=amended)
        return amended

    def plan_commands(self) -> tuple[str, ...]:
        return tuple(c for c in self.proposed if isinstance(c, str))

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        output.warn(text)

    def delete_branch(self) -> None:
        delete_branch(self.repo, self.key)

    def check_record(self) -> dict[str, Any] | None:
        return self.check.to_dict() if self.check else None

    def rollback(
        self,
        target: Target,
        commit: str | None,
        error: PapayuError,
        *,
        keep: bool = False,
        state: ApplyState = ApplyState.ROLLED_BACK,
        stage: str = "",
    ) -> ApplyResult:
        keep = keep or self.options.keep_failed
        if self.options.keep_failed and commit and "--keep-failed" in error.hint:  # say where it is instead
            kept = f"{self.branch} is kept: git papayu show {self.plan.id}; git papayu drop {self.plan.id} removes it"
            error = PapayuError(error.code, error.reason, path=error.path, hint=kept)
        if not keep:
            self.delete_branch()
        output.event("APPLY_ROLLBACK", plan_id=self.plan.id, reason=error.code, branch_kept=keep, stage=stage)
        return self.finish(state, target, commit, error=error, branch_kept=keep, stage=stage)

    def finish(
        self,
        state: ApplyState,
        target: Target,
        commit: str | None,
        *,
        landed_by: str = "",
        error: PapayuError | None = None,
        branch_kept: bool = False,
        stage: str = "",
        declined: bool = False,
    ) -> ApplyResult:
        result = ApplyResult(
            plan_id=self.plan.id,
            state=state,
            branch=self.branch,
            commit=commit,
            target=target.branch,
            check=self.check_record(),
            timings=dict(self.watch.timings),
            error=error.to_dict() if error else None,
            landed_by=landed_by,
            trace_id=self.trace_id,
            branch_kept=branch_kept,
            check_skipped=self.options.no_check and not self.options.review,
            warnings=tuple(self.warnings),
            test_edits=self.test_edits,
            rebased_from=tuple(b.record() for b in self.rebased_from),
            stage=stage,
            declined=declined,
        )
        record_outcome(self.pdir, self.plan, result)
        return result
