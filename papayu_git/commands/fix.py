"""`git papayu fix GOAL`: `plan`, then `apply` after confirmation.

One model serves both rounds (the embedded server starts once). Takes every option of
`apply`; `-y` skips the confirmation (and confirms deletions).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, prewarm, retry
from papayu_git.answers import response_of
from papayu_git.commands import apply as apply_command
from papayu_git.commands import best_of
from papayu_git.commands import plan as plan_command
from papayu_git.commands.apply import transaction_options
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import find_toplevel, papayu_dir
from papayu_git.landing import resolve_target
from papayu_git.llm.readiness import require_model
from papayu_git.llm.routing import resolve
from papayu_git.llm.session import open_client
from papayu_git.objects import branch_name, delete_branch
from papayu_git.outcomes import ApplyState, check_word
from papayu_git.plans import update_outcome
from papayu_git.report import Landing, exit_code, report
from papayu_git.repository import open_repo
from papayu_git.transaction import apply_plan

if TYPE_CHECKING:
    from papayu_git.llm.client import ChatClient
    from papayu_git.llm.planner import PlanOutcome
    from papayu_git.llm.routing import Route
    from papayu_git.transaction import ApplyOptions, ApplyResult


def default_attempts(options: ApplyOptions) -> int:
    """Unattended (-y), a red check is tried once more with its failures; asked, once."""
    return 2 if options.yes else 1


def run(
    goal: str,
    options: ApplyOptions,
    mode: str | None = None,
    from_file: str | None = None,
    protocol: int | None = None,
    accept_memory: bool = False,
    as_json: bool = False,
    attempts: int | None = None,
    candidates: int = 1,
) -> int:
    if candidates > 1:  # best of N (docs/DESIGN.md, "Best of N")
        return best_of.from_fix(goal, options, candidates, mode, from_file, protocol, as_json, attempts)
    route = resolve(goal, mode)
    if route.confirm:
        return apply_command.run(None, options, protocol, as_json)
    root = find_toplevel()
    refuse_unlandable(root, options.onto)
    config = require_model(str(root))  # before anything runs: no model, nothing to prepare
    # The check's checkout is prepared while the model (and an embedded one's start) takes its time.
    prewarm.start(root, check=options.check, no_check=options.no_check, onto=options.onto)
    with open_client(root, config) as client:
        loop = Loop(root, route, options, protocol, accept_memory, as_json, client)
        return loop.run(attempts or default_attempts(options), from_file=from_file)


def refuse_unlandable(root: Path, onto: str | None) -> None:
    """Where the plan would land is known before the model is asked (and paid): a detached HEAD
    without --onto, an --onto branch that does not exist or a branch without a commit refuse now,
    not after the answer (docs/TRANSACTION.md, "The transaction")."""
    try:
        resolve_target(open_repo(root), onto)
    except PapayuError as exc:
        exc.reason += "; nothing was sent to the model"
        raise


@dataclass
class Attempt:
    outcome: PlanOutcome
    result: ApplyResult | None = None  # None: not applied (no changes, not confirmed)
    superseded_by: str | None = None  # a later attempt, this plan, landed in its place
    dropped: bool = False  # held at review, its branch dropped when that plan landed

    def to_dict(self) -> dict[str, Any]:
        result = self.result.to_dict() if self.result else {}
        said = {
            "plan_id": self.outcome.plan.id,
            "state": result.get("state") or ("no_changes" if self.outcome.response.is_no_changes else "not_applied"),
            "error_code": (result.get("error") or {}).get("code"),
            "failing": list(retry.failing_tests(result.get("check") or {})),
        }
        return {**said, "superseded_by": self.superseded_by} if self.superseded_by else said

    def said(self, *, last: bool = True) -> str:
        """The attempt in the summary line: its plan, how its check ended, and where it is now; an
        earlier attempt still kept (no later one landed) with the command that removes it (the
        last one's steps were said with its report)."""
        result = self.result
        if result is None:
            return f"{self.outcome.plan.id} {self.to_dict()['state'].replace('_', ' ')}"
        how = check_word(result.check) if result.check else str(result.state).replace("_", " ")
        where = (
            f"landed on {result.target}"
            if result.state == ApplyState.LANDED
            else "dropped"
            if self.dropped
            else f"kept on {result.branch}"
            if result.state == ApplyState.REVIEW or result.branch_kept
            else "rolled back"
        )
        drop = f" (git papayu drop {self.outcome.plan.id})" if where.startswith("kept") and not last else ""
        return f"{self.outcome.plan.id} {how}, {where}{drop}"


# -y of the commands that run Loop (fix, retry): the same question, skipped the same way.
YES_HELP = "Land a green plan without asking (deletions included); a diffstat is printed first."


def may_apply(plan_id: str, yes: bool) -> bool:
    """-y or a terminal to ask on later; without either the plan stays stored for `apply ID`."""
    if yes or sys.stdin.isatty():
        return True
    output.info(f"papayu: not confirmed (no terminal, no -y); apply it with: git papayu apply {plan_id}")
    return False


class Loop:
    """Plan, apply (commit + check), show what would land, land; on a red check, plan again with
    its failures, up to ``attempts`` (docs/DESIGN.md, "Retrying a red check")."""

    def __init__(
        self,
        root: Path,
        route: Route,
        options: ApplyOptions,
        protocol: int | None,
        accept_memory: bool,
        as_json: bool,
        client: ChatClient,
    ) -> None:
        self.root, self.route, self.options, self.protocol = root, route, options, protocol
        self.accept_memory, self.as_json, self.client = accept_memory, as_json, client
        self.attempts: list[Attempt] = []

    def run(
        self,
        attempts: int,
        *,
        from_file: str | None = None,
        previous: retry.Feedback | None = None,
        before: dict[str, Any] | None = None,
    ) -> int:
        """``previous``/``before``: the failure and outcome of a plan already tried (`retry ID`)."""
        for number in range(1, attempts + 1):
            if previous is not None:
                self.say_retry(number, attempts, previous)
            outcome = plan_command.make(
                self.route.goal,
                self.route,
                self.protocol,
                from_file,
                self.accept_memory,
                self.client,
                previous=previous,
            )
            attempt = Attempt(outcome)
            self.attempts.append(attempt)
            if not self.as_json:
                plan_command.render(outcome, say_next=False)
            if outcome.response.is_no_changes or not may_apply(outcome.plan.id, self.options.yes):
                break
            attempt.result = self.apply(outcome, last=number == attempts)
            after = attempt.result.to_dict()
            if number == attempts or not retry.retryable(after):
                break
            if before is not None and retry.better(before, after) is False:
                output.info(
                    f"papayu: attempt {number} fails as many tests as the one before it; stopping "
                    f"(git papayu retry {outcome.plan.id} tries again)"
                )
                break
            before = after
            previous = retry.feedback(self.root, outcome.plan.id, outcome.response.summary, after, self.window())
        return self.finish()

    def window(self) -> int:
        window = getattr(self.client, "window", None)
        return int(getattr(window, "tokens", 0) or 0)

    def say_retry(self, number: int, attempts: int, previous: retry.Feedback) -> None:
        """The tests were named by the check's lines above (or by the plan `retry` was given)."""
        n = len(previous.failing)
        failing = f" ({n} failing test{'s' if n != 1 else ''})" if n else ""
        output.info(
            f"papayu: attempt {number} of {attempts}: asking the model again with plan {previous.plan_id}'s "
            f"failures{failing}"
        )

    def apply(self, outcome: PlanOutcome, *, last: bool) -> ApplyResult:
        """Commit and check the plan, land it on a yes; ``last``: no attempt follows a red check."""
        plan, response = response_of(self.root, outcome.plan, self.protocol, self.options.onto, self.client)
        # Deletions and the rest of the diff are confirmed before landing (confirm), not before
        # the commit; existing tests the plan edits get their own question first.
        allow = apply_command.confirm_test_edits(self.root, plan, response, self.options)
        landing = Landing(self.root, self.options.yes, self.as_json)
        options = self.options._replace(yes=True, allow_test_edits=allow, confirm_landing=landing.confirm)
        result = apply_plan(self.root, plan, response, options)
        if not self.as_json:
            again = not last and retry.retryable(result.to_dict())  # the loop asks the model again itself
            report(
                result,
                False,
                diffstat_shown=landing.diffstat_shown,
                check_shown=landing.check_shown,
                say_next=not again,
            )
        return result

    def drop_superseded(self) -> None:
        """A later attempt landed: the earlier ones held at review on papayu/<id> can no longer land
        (their base is not the tip any more). Their branches go, unless --keep-failed keeps them;
        every earlier attempt's record names the plan that landed in its place (`retry` of one of
        them then says so instead of asking the model for a change the branch already has)."""
        last = self.attempts[-1].result
        if last is None or last.state != ApplyState.LANDED:
            return
        earlier = [a for a in self.attempts[:-1] if a.result is not None]
        if not earlier:
            return
        repo = open_repo(self.root)
        pdir = papayu_dir(repo)
        for attempt in earlier:
            plan_id = attempt.outcome.plan.id
            attempt.superseded_by = last.plan_id
            held = attempt.result is not None and attempt.result.state == ApplyState.REVIEW
            if held and not self.options.keep_failed and delete_branch(repo, plan_id):
                attempt.dropped = True
                update_outcome(pdir, plan_id, state=ApplyState.DROPPED, superseded_by=last.plan_id)
                if not self.as_json:
                    output.info(f"papayu: dropped {branch_name(plan_id)}: plan {last.plan_id} landed in its place")
            else:
                update_outcome(pdir, plan_id, superseded_by=last.plan_id)

    def finish(self) -> int:
        self.drop_superseded()
        last = self.attempts[-1]
        if self.as_json:
            output.emit_json(
                {
                    "ok": last.result is None or exit_code(last.result) == 0,
                    "plan": plan_command.as_dict(last.outcome),
                    "apply": last.result.to_dict() if last.result else None,
                    "attempts": [a.to_dict() for a in self.attempts],
                }
            )
        elif len(self.attempts) > 1:
            said = [a.said(last=a is last) for a in self.attempts]
            output.info(f"papayu: {len(self.attempts)} attempts: " + "; ".join(said))
        return exit_code(last.result) if last.result else 0


@click.command("fix")
@click.argument("goal")
@click.option(
    "--mode",
    type=click.Choice(["plan", "apply", "fix-plan", "chat", "fixit"]),
    help="How the model is asked first (default: from the goal, else PAPAYU_LLM_MODE).",
)
@click.option("--from-file", "from_file", metavar="LOG", help="A log or test output to diagnose ('-' = stdin).")
@transaction_options(yes_help=YES_HELP)
@click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    metavar="N",
    help="Plans to try: on a red check the model gets the failing tests and its previous plan "
    "(default 2 with -y, else 1).",
)
@click.option(
    "--candidates",
    type=click.IntRange(1, 16),
    default=1,
    metavar="N",
    help="Ask for N plans on one tip, check them side by side, land the best green one (as best-of N GOAL).",
)
@click.option("--protocol", type=click.Choice(["1", "2"]), help="Protocol version (default PAPAYU_PROTOCOL_VERSION).")
@click.option("--accept-memory", is_flag=True, help="Apply the model's memory_patch (else only on 'remember …').")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable plan and apply result.")
def command(
    goal: str,
    mode: str | None,
    from_file: str | None,
    options: ApplyOptions,
    protocol: str | None,
    accept_memory: bool,
    as_json: bool,
    attempts: int | None,
    candidates: int,
) -> None:
    """Plan GOAL with the model, apply it, show what would land, and land it when you say yes.

    \b
    The change is committed on papayu/<id> and checked in a sandboxed worktree;
    only a green check gets as far as the question, which comes with the
    coloured diff and the verdict (-y: a diffstat, no question). No: the commit
    stays on papayu/<id> (git papayu land ID later). A red check rolls back
    (your branch, index and working tree untouched) and, with --attempts N,
    asks the model again with the failing tests. Exit 0 landed / kept / not
    applied, 1 rolled back.
    """
    with handle_errors(as_json):
        raise SystemExit(
            run(
                goal,
                options,
                mode,
                from_file,
                int(protocol) if protocol else None,
                accept_memory,
                as_json,
                attempts,
                candidates,
            )
        )
