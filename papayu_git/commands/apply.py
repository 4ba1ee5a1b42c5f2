"""`git papayu apply [ID|FILE|-]`: run the transaction for a plan (docs/DESIGN.md,
"The transaction and its guarantees").

FILE or `-` is a model response (JSON); it is stored as a plan first so it gets an
id and a `papayu/<id>` branch. ID is a stored plan; a stored plan without actions
(a PLAN-round answer) first gets its APPLY round from the model (answers.py).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, plans, settings
from papayu_git.answers import response_of
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.protocol import DELETING_KINDS, parse_json_text
from papayu_git.report import exit_code, report
from papayu_git.secrets import safe_text  # every line quoting the model or the check
from papayu_git.traces import now_iso

if TYPE_CHECKING:
    import pygit2

    from papayu_git.plans import StoredPlan
    from papayu_git.protocol import Response
    from papayu_git.transaction import ApplyOptions


def plan_from_json(
    pdir: Path, repo: pygit2.Repository, raw: bytes, protocol: int | None, onto: str | None
) -> StoredPlan:
    """A response file becomes a stored plan (id, base commit, target branch)."""
    data = parse_json_text(raw)
    if plans.is_plan_record(data):
        plan = plans.import_record(pdir, data)
    else:
        version = protocol or (1 if isinstance(data, list) else settings.get_int("protocol_version", repo.workdir))
        head = None if repo.head_is_unborn else str(repo.head.target)
        branch = onto or ("" if repo.head_is_detached else str(repo.references["HEAD"].target)[len("refs/heads/") :])
        plan = plans.StoredPlan(
            id=plans.new_id(),
            mode="apply",
            protocol=version,
            base_commit=head or "",
            branch=branch,
            response=data,
            created_at=now_iso(),
        )
    plans.save(pdir, plan)
    return plan


def load_plan(
    pdir: Path, repo: pygit2.Repository, source: str | None, protocol: int | None, onto: str | None
) -> StoredPlan:
    if source == "-":
        return plan_from_json(pdir, repo, sys.stdin.buffer.read(), protocol, onto)
    if source and Path(source).is_file():
        return plan_from_json(pdir, repo, Path(source).read_bytes(), protocol, onto)
    if source is None:
        stored = sorted(plans.list_plans(pdir), key=lambda p: (p.created_at, p.id))
        if not stored:
            raise PapayuError("ERR_PLAN_NOT_FOUND", "no stored plan; pass a response FILE or `-`")
        return stored[-1]
    from papayu_git.commands.drop import resolve_generated  # see run: it loads the checkout's modules

    return plans.load(pdir, resolve_generated(repo, pdir, source))  # an id, a prefix, @, a candidate's RUN:N


def _confirm_deletions(response: Response, yes: bool) -> bool:
    doomed = [a.path for a in response.actions if a.kind in DELETING_KINDS]
    if yes or not doomed:
        return yes
    if not sys.stdin.isatty():
        return False  # the transaction refuses with ERR_DELETE_NOT_CONFIRMED
    return output.confirm(f"The plan deletes {safe_text(', '.join(doomed))}. Continue?")


def confirm_test_edits(root: Path, plan: StoredPlan, response: Response, options: ApplyOptions) -> bool:
    """allow_test_edits for the transaction: the flag, or a yes on a terminal (without -y) to a
    question naming the existing tests the plan modifies or deletes. No (or no terminal, or -y):
    the transaction commits and checks, then stops at review (transaction/held.py)."""
    if options.allow_test_edits or options.yes or options.review or not sys.stdin.isatty():
        return options.allow_test_edits
    from papayu_git.objects import branch_name  # see run
    from papayu_git.transaction import planned_test_edits

    try:
        edited = planned_test_edits(root, plan, response, options.onto)
    except PapayuError:
        return False  # the transaction raises (and records) it
    if not edited:
        return False
    return output.confirm(
        f"The plan edits tests or how they run: {safe_text(', '.join(edited))}. Land it "
        f"if the check passes? (no: keep {branch_name(plan.id)} for review)"
    )


def run(source: str | None, options: ApplyOptions, protocol: int | None = None, as_json: bool = False) -> int:
    # The transaction and the repository load when a plan is applied, not for `apply --help`
    # (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.housekeeping import open_checkout
    from papayu_git.transaction import apply_plan

    repo, root, pdir = open_checkout()
    plan = load_plan(pdir, repo, source, protocol, options.onto)
    plan, response = response_of(root, plan, protocol, options.onto)
    if response.commands_to_run:
        output.info(
            "The model proposes these commands ("
            + (
                "--run-proposed: they run in the worktree after the check):"
                if options.run_proposed
                else "NOT run; --run-proposed runs them in the worktree after the check):"
            )
        )
        for command in response.commands_to_run:
            output.info(f"  $ {safe_text(command)}")
    yes = _confirm_deletions(response, options.yes)
    refused = not yes and any(a.kind in DELETING_KINDS for a in response.actions)  # ERR_DELETE_NOT_CONFIRMED
    allow = options.allow_test_edits if refused else confirm_test_edits(root, plan, response, options)
    options = options._replace(yes=yes, allow_test_edits=allow)
    result = apply_plan(root, plan, response, options)
    report(result, as_json)
    return exit_code(result)


_OPTION_NAMES = {
    "check_cmd": "check",
    "no_check": "no_check",
    "review": "review",
    "keep_failed": "keep_failed",
    "onto": "onto",
    "rebase": "rebase",
    "yes": "yes",
    "run_proposed": "run_proposed",
    "allow_test_edits": "allow_test_edits",
}


def transaction_options(yes_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The transaction's options, shared by `apply` and `fix` (which takes every option of
    apply); the callback receives them as one ``options: ApplyOptions``."""

    def decorate(callback: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(callback)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {field: kwargs.pop(name) for name, field in _OPTION_NAMES.items()}
            from papayu_git.transaction import ApplyOptions  # see run

            return callback(*args, options=ApplyOptions(**values), **kwargs)

        for option in reversed(
            [
                click.option(
                    "--check",
                    "check_cmd",
                    metavar="CMD",
                    help="Check command to run in the worktree "
                    "(overrides papayu.check.command, project.json and detection).",
                ),
                click.option("--no-check", is_flag=True, help="Land without running a check."),
                click.option(
                    "--review", is_flag=True, help="Stop after the commit (and check); keep branch papayu/<id>."
                ),
                click.option("--keep-failed", is_flag=True, help="Keep papayu/<id> when the check fails."),
                click.option("--onto", metavar="BRANCH", help="Land on BRANCH instead of the current branch."),
                click.option(
                    "--rebase", is_flag=True, help="If the branch moved, re-apply on its new tip when bases match."
                ),
                click.option("-y", "--yes", is_flag=True, help=yes_help),
                click.option(
                    "--run-proposed", is_flag=True, help="Also run the model's commands_to_run in the worktree."
                ),
                click.option(
                    "--allow-test-edits",
                    is_flag=True,
                    help="Land plans that modify or delete existing tests without asking (else they stop at review).",
                ),
            ]
        ):
            wrapper = option(wrapper)
        return wrapper

    return decorate


@click.command("apply")
@click.argument("source", required=False, metavar="[ID|FILE|-]")
@transaction_options(yes_help="Confirm deletions without asking.")
@click.option("--protocol", type=click.Choice(["1", "2"]), help="Protocol of the response (default: the plan's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result with per-stage timings.")
def command(source: str | None, options: ApplyOptions, protocol: str | None, as_json: bool) -> None:
    """Apply a plan as a commit on papayu/<id>, run the check in a temporary
    worktree, and fast-forward your branch only if it passes.

    \b
    SOURCE: a stored plan ID (or unique prefix), a response FILE, or `-` (stdin);
    default: the newest stored plan. Your branch, index and working tree stay
    untouched unless the check passes; on failure papayu/<id> is deleted.
    Exit 0 landed/review, 1 rolled back or refused (ERR_* printed).
    """
    with handle_errors(as_json):
        raise SystemExit(run(source, options, int(protocol) if protocol else None, as_json))
