"""The transaction: validate → preflight → commit → check → land or roll back.

Nothing here touches the user's index or working tree: the commit is built in
memory (objects.build_tree), the check runs in an isolated, sandboxed checkout
(docs/DESIGN.md, "The check's trust boundary"), and the only
write to the user's side is the final fast-forward / compare-and-swap (landing.py).
Any failure after the commit exists deletes `papayu/<id>` (unless --keep-failed).
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import locks, output, plans, settings, stale, traces
from papayu_git.apply import new_file_contents, sha256_hex
from papayu_git.errors import PapayuError, ValidationFailed, hint_for
from papayu_git.git import open_repo, papayu_dir, run_git
from papayu_git.housekeeping import clear_stale
from papayu_git.landing import Target, land, resolve_target
from papayu_git.objects import (
    GitTree,
    TreeChanges,
    branch_name,
    build_tree,
    changed_paths,
    commit_message,
    commit_of,
    create_commit,
    delete_branch,
    generated_branches,
    set_branch,
)
from papayu_git.outcomes import ApplyState, CheckState
from papayu_git.paths import configured_protected
from papayu_git.plans import StoredPlan
from papayu_git.protocol import DELETING_KINDS, ActionKind, Mode, Response
from papayu_git.secrets import safe_text
from papayu_git.stages import Stopwatch, pause_point
from papayu_git.testfiles import configured_test_patterns, edited_tests
from papayu_git.traces import trace_id_for_apply
from papayu_git.validate import validate_response

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check import CheckCommand, CheckResult
    from papayu_git.check.gate import Gate
    from papayu_git.check.sandbox import Sandbox

MAX_REBASE_ATTEMPTS = 20
# Verdicts held for a human whose landing (`land ID`) is the approval: the check passed but for
# what the plan changes besides its code (check/verdict.py).
HELD_FOR_A_HUMAN = frozenset({"ERR_JUDGE_EDITS_HELD", "ERR_TESTS_REMOVED_HELD"})


@dataclass(frozen=True)
class ApplyOptions:
    check: str | None = None
    no_check: bool = False
    review: bool = False
    keep_failed: bool = False
    onto: str | None = None
    rebase: bool = False
    yes: bool = False
    run_proposed: bool = False
    allow_test_edits: bool = False  # land plans that modify or delete existing tests (testfiles.py)
    # Asked once, after a check that lets the plan land and before the landing: False keeps the
    # commit on papayu/<id> for review (`fix` shows the diff and the verdict, then asks).
    confirm_landing: Callable[[LandingPreview], bool] | None = field(default=None, compare=False)
    # A best-of candidate (docs/DESIGN.md, "Best of N"): built on this pinned tip, not the branch's
    # tip now, and kept on papayu/<branch> (`<run>/<i>`) instead of papayu/<plan id>.
    tip: str = ""
    branch: str = ""


@dataclass(frozen=True)
class LandingPreview:
    """What is about to land: the plan's commit on its branch, checked, and the check's record."""

    plan_id: str
    branch: str
    commit: str
    target: str
    check: dict[str, Any] | None


@dataclass(frozen=True)
class ApplyResult:
    plan_id: str
    state: ApplyState  # landed | rolled_back | review | no_changes
    branch: str
    commit: str | None
    target: str
    check: dict[str, Any] | None
    timings: dict[str, float]
    error: dict[str, str] | None = None
    landed_by: str = ""  # fast-forward | update-ref
    trace_id: str = ""
    branch_kept: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # --no-check without --review: the user chose to land unchecked; `land ID` honours that choice
    # when a dirty work tree or a merge in progress stopped the landing.
    check_skipped: bool = False
    test_edits: tuple[str, ...] = ()  # existing tests the plan modifies or deletes
    rebased_from: tuple[dict[str, str], ...] = ()  # stale edits merged onto the tip: {path, base_blob, base_commit}
    stage: str = ""  # the stage that raised the error or decided the outcome: validate, build_commit, check, land
    declined: bool = False  # checked and landable, kept because the user said no at the confirmation

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.state != ApplyState.ROLLED_BACK and self.error is None, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class Prepared:
    target: Target
    base: GitTree
    response: Response
    changes: TreeChanges
    test_edits: tuple[str, ...] = ()  # existing test files modified or deleted (testfiles.py)
    rebased_from: tuple[stale.Base, ...] = ()  # stale edits merged onto the tip (stale.py)


def prepare(repo: pygit2.Repository, plan: StoredPlan, response: Response, target: Target) -> Prepared:
    """Everything that can fail before an object is written: validation and the bases."""
    base = GitTree.at(repo, target.tip, [action.path for action in response.actions])
    validated = validate_response(
        response.data,
        protocol=response.protocol,
        mode=Mode.APPLY,
        read_files=plan.files or None,
        tree=base,
        protected=configured_protected(repo.workdir),
    )
    bases = check_bases(validated, plan, base, stale.finder(repo, target.tip, plan.base_commit))
    normalize = settings.get("normalize_eol", repo.workdir).strip().lower() == "lf"
    actions = validated.ordered_actions()
    writes = new_file_contents(actions, stale.reading(base.read_blob, bases), normalize_eol=normalize)
    writes = stale.merged(writes, bases, base.read_blob, normalize_eol=normalize)
    changes = TreeChanges(
        writes=dict(writes),
        delete_files=frozenset(a.path for a in actions if a.kind is ActionKind.DELETE_FILE),
        delete_dirs=frozenset(a.path for a in actions if a.kind is ActionKind.DELETE_DIR),
        create_dirs=frozenset(a.path for a in actions if a.kind is ActionKind.CREATE_DIR),
    )
    return Prepared(target, base, validated, changes, edited_tests_of(repo, base, changes), tuple(bases.values()))


def edited_tests_of(repo: pygit2.Repository, base: GitTree, changes: TreeChanges) -> tuple[str, ...]:
    return tuple(edited_tests(base, changes, configured_test_patterns(repo.workdir)[0]))


def check_bases(
    response: Response, plan: StoredPlan, base: GitTree, finder: stale.BaseFinder | None = None
) -> dict[str, stale.Base]:
    """Bases are compared with the blobs at the tip, not the working tree (docs/DESIGN.md, "Accepted answers"):
    PATCH_FILE's base_sha256, and for UPDATE_FILE the sha256 recorded when PLAN showed it.

    With a ``finder`` (papayu.rebaseStale), a stale base found in the history is returned
    (path -> the version the plan was written against) for a 3-way merge, and a DELETE_FILE
    whose file changed since it was shown is refused (docs/DESIGN.md, "The transaction and its
    guarantees")."""
    errors = []
    found: dict[str, stale.Base] = {}
    for action in response.actions:
        if action.kind is ActionKind.PATCH_FILE:
            expected = action.base_sha256
        elif action.kind is ActionKind.UPDATE_FILE or (finder and action.kind is ActionKind.DELETE_FILE):
            expected = plan.files.get(action.path) or None
        else:
            continue
        blob = base.read_blob(action.path)
        if expected is None or blob is None:
            continue
        actual = sha256_hex(blob)
        if actual != expected and finder is not None:
            if action.kind is ActionKind.DELETE_FILE:
                errors.append(
                    PapayuError(
                        "ERR_BASE_MISMATCH",
                        f"the file changed at the branch tip since the plan read it (sha256 {actual}, the plan "
                        f"saw {expected}): deleting it would drop those changes",
                        path=action.path,
                    )
                )
                continue
            old = finder.find(action.path, expected)
            if old is not None:
                found[action.path] = old
                continue
        if actual != expected:
            errors.append(
                PapayuError(
                    "ERR_BASE_MISMATCH",
                    f"the file at the branch tip has sha256 {actual}, the plan expects {expected}",
                    path=action.path,
                )
            )
    if errors:
        raise ValidationFailed(errors)
    return found


def preflight(repo_root: Path, plan: StoredPlan, response: Response, onto: str | None = None) -> None:
    """Raise every problem a real apply would hit before writing anything; write nothing."""
    repo = open_repo(repo_root)
    prepare(repo, plan, response, resolve_target(repo, onto))


def planned_test_edits(
    repo_root: Path, plan: StoredPlan, response: Response, onto: str | None = None
) -> tuple[str, ...]:
    """The existing tests the plan would modify or delete (for the interactive confirmation);
    raises what `preflight` raises; writes nothing."""
    repo = open_repo(repo_root)
    return prepare(repo, plan, response, resolve_target(repo, onto)).test_edits


def apply_plan(repo_root: Path, plan: StoredPlan, response: Response, options: ApplyOptions) -> ApplyResult:
    repo = open_repo(repo_root)
    pdir = papayu_dir(repo)
    clear_stale(repo, pdir)
    run = _Run(repo, Path(repo.workdir or repo_root), pdir, plan, options, trace_id_for_apply(pdir, plan.trace_id))
    try:
        with run.watch.stage("validate"):
            target = resolve_target(repo, options.onto)
            target = replace(target, tip=options.tip) if options.tip else target
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


class _Run:
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
                    return self.rollback(prepared.target, commit, self.check_error(), stage="check")
                held = (
                    self.held_for_no_check()
                    or self.held_for_verdict()
                    or self.held_for_user_tree_links()
                    or self.held_for_test_edits()
                    or self.held_for_runner_reach()
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
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (error_handler.Terminated)
            interrupted = PapayuError("ERR_INTERRUPTED", f"interrupted during the {self.watch.failed_in or 'apply'}")
            self.rollback(
                prepared.target, commit, interrupted, state=ApplyState.INTERRUPTED, stage=self.watch.failed_in
            )
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
        from papayu_git.landing import checked_out_in  # lazy: the check's path only

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
        quoted = " ".join(shlex.quote(p) for p in dirty)
        return PapayuError(
            "ERR_DIRTY_WORKTREE",
            f"uncommitted changes in files the plan touches: {', '.join(dirty)}; stopped before the check",
            path=str(workdir),
            # The pop runs whatever the apply ends in: a red check must not leave the edits stashed.
            hint=f"commit them, or stash them around a new apply: git stash push -u -- {quoted} && "
            f"{{ git papayu apply {self.plan.id}; git stash pop; }}",
        )

    def commit(self, prepared: Prepared) -> str | None:
        self.test_edits = prepared.test_edits
        self.say_rebased(prepared)
        with self.watch.stage("build_commit"):
            tree_id = build_tree(prepared.base, prepared.changes)
            if tree_id == prepared.base.tree.id:
                self.warnings.append("the plan's actions change nothing in the tree")
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

    def held_for_test_edits(self) -> PapayuError | None:
        """A plan that modifies or deletes existing tests needs a human (testfiles.py): the
        interactive yes or --allow-test-edits; else it stops at review with the branch kept."""
        if not self.test_edits or self.options.allow_test_edits:
            return None

        output.event("TEST_EDITS_HELD", plan_id=self.plan.id, paths=",".join(self.test_edits))
        edited = safe_text(", ".join(self.test_edits))  # the plan's paths
        ways = (
            f"review it (git papayu show {self.plan.id}), then land it: git papayu land {self.plan.id} "
            f"(--allow-test-edits lands such plans without asking)"
        )
        verdict = self.gate.verdict if self.gate else None
        said = "; ".join(verdict.lines()[:3]) if verdict is not None and verdict.code in HELD_FOR_A_HUMAN else ""
        reason = f"the plan edits tests or how they run: {edited}" + (f"; {safe_text(said)}" if said else "")
        self.warnings.append(f"{reason}; NOT landed. {ways[0].upper()}{ways[1:]}")
        return PapayuError("ERR_TEST_EDITS_HELD", reason, path=self.branch, hint=ways)

    def scan_reach(self, prepared: Prepared) -> None:
        """Read what the plan adds to its code (and its new test modules do at import) for
        routes to the test runner, before its verdict is trusted (check/reach.py)."""
        self.reach = ()
        if self.command is None:
            return
        from papayu_git.check.reach import runner_reach  # see resolve_check
        from papayu_git.judges import command_files
        from papayu_git.testfiles import compile_patterns

        tests = compile_patterns(configured_test_patterns(str(self.root))[0])
        files = command_files(self.command.command, prepared.base)
        found = runner_reach(prepared.base, prepared.changes.writes, tests=tests, command_files=files)
        self.reach = tuple(safe_text(str(r)) for r in found)  # the plan's lines

    def held_for_runner_reach(self) -> PapayuError | None:
        """Code under test runs inside the test process: a plan whose code reaches for the runner
        or its report, or whose new test module changes other modules at import, waits for a human
        with the lines named, whatever its verdict says (check/reach.py)."""
        if not self.reach:
            return None
        output.event("RUNNER_REACH_HELD", plan_id=self.plan.id, lines=len(self.reach))
        shown = "; ".join(self.reach[:5]) + (f"; ... and {len(self.reach) - 5} more" if len(self.reach) > 5 else "")
        ways = f"read those lines (git papayu show {self.plan.id}); land it if they are harmless: git papayu land {self.plan.id}"
        self.warnings.append(
            f"the plan reaches past what its check can judge: {shown}; NOT landed. {ways[0].upper()}{ways[1:]}"
        )
        return PapayuError(
            "ERR_RUNNER_REACH_HELD",
            "the plan reaches past what its check can judge: " + shown,
            path=self.branch,
            hint=ways,
        )

    def held_for_user_tree_links(self) -> PapayuError | None:
        """An unsandboxed check whose environment links into the user's tree (editable installs,
        workspace symlinks) may have tested the user's code, not the plan's: no silent green
        (docs/DESIGN.md, "The check's environment")."""
        links = self.check.user_tree_links if self.check else ()
        if not links or settings.get_bool("check_allow_user_tree_links", str(self.root)):
            return None
        ways = (
            f"review it (git papayu show {self.plan.id}) and land it yourself (git papayu land {self.plan.id}), "
            "or make the sandbox work here (`git papayu doctor`), or accept such checks with "
            "`git config papayu.check.allowUserTreeLinks true`"
        )
        shown = safe_text("; ".join(links[:3]) + ("; ..." if len(links) > 3 else ""))
        self.warnings.append(
            f"the check ran unsandboxed and your environment links into your work tree; NOT landed. {ways}"
        )
        return PapayuError(
            "ERR_CHECK_ENV_LINKED",
            f"the unsandboxed check may have run your work tree's code, not the plan's: {shown}",
            path=self.branch,
            hint=ways,
        )

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

        output.info(
            f"check: {safe_text(self.command.command)}   (from {self.command.source}; sandbox: {self.sandbox.level})"
        )
        if not self.sandbox.sandboxed and self.sandbox.reason != "papayu.sandbox=off":
            self.warn(
                f"the check runs WITHOUT a sandbox: {self.sandbox.reason}. It can read your files and "
                "reach the network; see `git papayu doctor` (papayu.sandbox=required refuses instead)"
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

    def held_for_no_check(self) -> PapayuError | None:
        """No check found: nothing lands automatically; the commit stays for review."""
        if self.options.no_check or self.command is not None:
            return None
        ways = (
            f"review it (git papayu show {self.plan.id}) and land it: git papayu land {self.plan.id} --force; "
            "or configure a check (git config papayu.checkCommand 'CMD', or --check CMD) and apply again; "
            "or pass --no-check to land without one"
        )
        self.warn(
            f"no check command found (--check, papayu.checkCommand, .papa-yu/project.json, "
            f"pytest/npm/cargo/go on {self.repo[self.tip].short_id if self.tip else 'the tip'}); "
            f"NOT landed. Next: {ways}"
        )
        return PapayuError(
            "ERR_NO_CHECK", "no check command was found; the commit is kept for review", path=self.branch, hint=ways
        )

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
        )
        with self.watch.stage("check"), output.progress(f"check: {self.command.command}"):  # masked by progress
            self.gate = run_gate(request)
        self.check = self.gate.check
        verdict = self.gate.verdict
        if verdict is not None and verdict.review and verdict.code in HELD_FOR_A_HUMAN:
            # Passed but for what the plan changes besides its code (tests, their data, scripts):
            # landing it is the human's approval of those changes, as --allow-test-edits would have
            # been (held_for_verdict / held_for_test_edits hold it).
            self.check = replace(self.check, lands=True)
        return self.check.passed or self.gate.review

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

    def held_for_verdict(self) -> PapayuError | None:
        """The verdict stops at review (check/verdict.py): a red tip the plan neither fixes nor
        breaks, tests passing only with the plan's own versions of what judges it, or tests the
        plan removes. A human decides; unapproved test edits say so in their own words
        (held_for_test_edits)."""
        verdict = self.gate.verdict if self.gate else None
        if verdict is None or not verdict.review:
            return None
        if verdict.code in HELD_FOR_A_HUMAN and self.test_edits and not self.options.allow_test_edits:
            return None
        said = safe_text("; ".join(verdict.lines()[:3]))  # test ids and paths come from the plan's run
        if verdict.code in HELD_FOR_A_HUMAN:
            ways = f"review it (git papayu show {self.plan.id}), then land it: git papayu land {self.plan.id}"
            what = (
                "the plan changes what judges it"
                if verdict.code == "ERR_JUDGE_EDITS_HELD"
                else "the plan removes tests"
            )
            self.warnings.append(f"{what}: {said}; NOT landed. {ways[0].upper()}{ways[1:]}")
            return PapayuError(verdict.code or "ERR_JUDGE_EDITS_HELD", said, path=self.branch, hint=ways)
        ways = hint_for("ERR_CHECK_FIXES_NOTHING", self.plan.id)
        self.warnings.append(f"the tip's check is red and the plan fixes none of its failures; NOT landed. {ways}")
        return PapayuError(verdict.code or "ERR_CHECK_FIXES_NOTHING", said, path=self.branch, hint=ways)

    def plan_commands(self) -> tuple[str, ...]:
        return tuple(c for c in self.proposed if isinstance(c, str))

    def check_error(self) -> PapayuError:
        assert self.check is not None
        verdict = self.gate.verdict if self.gate else None
        if verdict is not None and verdict.code not in (None, "ERR_CHECK_FAILED"):
            said = "; ".join(verdict.lines()) or verdict.trailer()
            code = verdict.code or "ERR_CHECK_FAILED"
            return PapayuError(code, f"{said}; full output: {self.check.log}", hint=hint_for(code, self.plan.id))
        if self.check.timed_out:
            return PapayuError(
                "ERR_CHECK_TIMEOUT",
                f"`{self.check.command}` ran past "
                f"{settings.get_int('check_timeout_sec', str(self.root))}s and was killed",
                hint=hint_for("ERR_CHECK_TIMEOUT", self.plan.id),
            )
        if self.check.environment:
            return PapayuError(
                "ERR_CHECK_FAILED",
                f"`{self.check.command}` exited {self.check.exit_code}, and the cause may be the check's "
                f"environment, not the plan: {self.check.environment[0]}; full output: {self.check.log}",
                hint="; ".join([*self.check.environment[1:3], "`git papayu doctor --check` runs the check on the tip"]),
            )
        from papayu_git.check.results.runners import why_exit_code_only

        why = why_exit_code_only(self.check.tests)  # the runners papayu could not read, and what to set
        return PapayuError(
            "ERR_CHECK_FAILED",
            f"`{self.check.command}` exited {self.check.exit_code}{f' (verdict by exit code only: {why})' if why else ''}; "
            f"full output: {self.check.log}",
            hint=hint_for("ERR_CHECK_FAILED", self.plan.id),
        )

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


def record_outcome(pdir: Path, plan: StoredPlan, result: ApplyResult) -> None:
    """The outcome goes into the plan record (for list/land/show) and into a trace."""
    outcome = {
        "state": result.state,
        "branch": result.branch,
        "commit": result.commit,
        "target": result.target,
        "trace_id": result.trace_id,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "check": result.check,
        "error": result.error,
        "test_edits": list(result.test_edits),
        "check_skipped": result.check_skipped,
        **({"stage": result.stage} if result.stage else {}),
        **({"declined": True} if result.declined else {}),
        **({"rebased_from": list(result.rebased_from)} if result.rebased_from else {}),
    }
    plans.save(pdir, dataclasses.replace(plan, extra={**plan.extra, "apply": outcome}))
    check = result.check or {}
    traces.write_record(
        pdir,
        result.trace_id,
        "apply",
        plan,
        protocol=plan.protocol,
        plan_files=plan.files,
        validated_json=plan.response,
        validation_outcome="ok",
        error_code=(result.error or {}).get("code"),
        **({"error_stage": result.stage} if result.error and result.stage else {}),
        check={
            "command": check.get("command"),
            "source": check.get("source"),
            "sandbox": check.get("sandbox"),
            "exit_code": check.get("exit_code"),
            "duration_sec": check.get("duration_sec"),
            "state": check_state(result),
            **({"selection": check["selection"]} if check.get("selection") else {}),
        },
        apply={"state": result.state, "branch": result.branch, "commit": result.commit},
        test_edits=list(result.test_edits),
        timings=result.timings,
        **({"rebased_from": list(result.rebased_from)} if result.rebased_from else {}),
    )


def check_state(result: ApplyResult) -> CheckState:
    """The trace's check.state: how the check ended, or why none ran."""
    check = result.check or {}
    if (result.error or {}).get("code") == "ERR_NO_CHECK":
        return CheckState.NONE_FOUND
    if not check:
        return CheckState.SKIPPED
    if check.get("passed"):
        return CheckState.PASSED
    return CheckState.TIMEOUT if check.get("timed_out") else CheckState.FAILED


def record_refusal(pdir: Path, plan: StoredPlan, trace_id: str, exc: PapayuError) -> None:
    """Refused before any object was written: recorded in the plan and a trace (golden-comparable)."""
    errors = [e.to_dict() for e in getattr(exc, "errors", [exc])]
    update_outcome(pdir, plan.id, state=ApplyState.REFUSED, error=errors[0], trace_id=trace_id)
    traces.write_record(
        pdir,
        trace_id,
        "apply",
        plan,
        protocol=plan.protocol,
        plan_files=plan.files,
        validated_json=plan.response,
        validation_outcome="err",
        error_code=exc.code,
        errors=errors,
    )


def update_outcome(pdir: Path, plan_id: str, **fields: Any) -> None:
    """`land` / `drop` of a kept branch: update the state recorded in the plan."""
    try:
        plan = plans.load(pdir, plan_id)
    except PapayuError:
        return  # a branch without a plan record (e.g. its record was deleted): nothing to update
    outcome = {**(plan.extra.get("apply") or {}), **fields, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    plans.save(pdir, dataclasses.replace(plan, extra={**plan.extra, "apply": outcome}))


def land_branch(
    repo: pygit2.Repository,
    pdir: Path,
    plan_id: str,
    onto: str | None,
    *,
    force: bool = False,
    forge_green: str | None = None,
    branch: str = "",
) -> ApplyResult:
    """`land ID`: fast-forward the target with a kept `papayu/<id>` (its parent must still be the tip).

    Only the commit whose recorded check passed lands (checked.py) unless ``force``;
    ``forge_green``: the commit the forge's checks found green (land --when-green), which
    counts as checked when it is exactly the commit being landed; ``branch``: the kept branch's
    name under papayu/ when it is not the plan id (a best-of candidate's `<run>/<i>`)."""
    # `land` only: apply lands the commit it checked itself (docs/DESIGN.md, "Start-up and cost").
    from papayu_git import checked

    key = branch or plan_id
    plan: StoredPlan | None
    try:
        plan = plans.load(pdir, plan_id)
        recorded = (plan.extra.get("apply") or {}).get("target") or plan.branch
    except PapayuError:
        plan, recorded = None, ""
    commit = generated_branches(repo).get(key)
    if commit is None:
        raise checked.nothing_to_land(plan_id, plan)
    found = checked.verdict(plan_id, plan, commit, unchecked_ok=forge_green == commit)
    target = resolve_target(repo, onto or recorded or None)
    target = Target(target.branch, target.ref, str(commit_of(repo, commit).parents[0].id))
    warning = checked.enforce(found, force=force, doing="landing")
    watch = Stopwatch()
    with watch.stage("land"):
        how = land(repo, pdir, target, commit, plan_id)
    delete_branch(repo, key)
    update_outcome(
        pdir,
        plan_id,
        state=ApplyState.LANDED,
        commit=commit,
        target=target.branch,
        **checked.outcome_fields(found, forced=warning is not None),
        **({"forge_checked": True} if forge_green == commit else {}),
    )
    output.event(
        "APPLY_SUCCESS",
        plan_id=plan_id,
        branch=target.branch,
        commit=commit,
        landed_by=how,
        **({"forced": True} if warning else {}),
    )
    return ApplyResult(
        plan_id,
        ApplyState.LANDED,
        branch_name(key),
        commit,
        target.branch,
        None,
        watch.timings,
        landed_by=how,
        warnings=(warning,) if warning else (),
    )
