"""`git papayu best-of N GOAL` (and `fix GOAL --candidates N`): N plans for one pinned tip,
checked side by side, the best green one lands (docs/DESIGN.md, "Best of N")."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, prewarm, settings
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import find_toplevel

if TYPE_CHECKING:
    from papayu_git.bestof.session import Options
    from papayu_git.transaction import ApplyOptions

MAX_CANDIDATES = 16


def run(
    goal: str,
    options: Options,
    mode: str | None = None,
    from_file: str | None = None,
    protocol: int | None = None,
) -> int:
    # The model stack and the run load here, not for `best-of --help` (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.bestof import asking, decide
    from papayu_git.bestof.session import Session, lock
    from papayu_git.context import read_log_file
    from papayu_git.llm.routing import resolve

    route = resolve(goal, mode)
    if route.confirm:
        raise PapayuError("ERR_USAGE", f"{goal!r} confirms a stored plan; best-of needs a goal to plan for")
    root = find_toplevel()
    prewarm.start(root, check=options.check, onto=options.onto)  # the base run, while the models think
    version = protocol or settings.get_int("protocol_version", str(root))
    log = read_log_file(from_file) if from_file else None
    session = Session(root, asking.Question(root, route, version, log, options.onto), options)
    output.info(
        f"papayu: best of {len(session.rows)} on {session.target.branch} @ {session.target.tip[:12]} "
        f"(run {session.run_id})"
    )
    try:
        with lock(session):
            session.gather()
            winner = decide.rank(session)
            session.save()
        return decide.conclude(session, winner)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM (at the question too): every candidate rolls back
        with _signals_held():
            session.abort("interrupted")
        raise


def from_fix(
    goal: str,
    apply: ApplyOptions,
    count: int,
    mode: str | None,
    from_file: str | None,
    protocol: int | None,
    as_json: bool,
    attempts: int | None,
) -> int:
    """`fix GOAL --candidates N`: best-of with fix's options; those that mean nothing for a run of
    candidates (or would let one land unchecked) are refused."""
    from papayu_git.bestof.session import Options

    refused = [name for name, given in (("--no-check", apply.no_check), ("--attempts", attempts)) if given]
    if refused:
        raise PapayuError(
            "ERR_USAGE",
            f"{' and '.join(refused)} cannot go with --candidates: each candidate is checked once, on one tip",
            hint="Leave it out, or use `git papayu retry ID` on the best red candidate afterwards.",
        )
    options = Options(
        count, apply.check, apply.onto, apply.yes, apply.review, apply.allow_test_edits, apply.run_proposed,
        as_json=as_json,
    )  # fmt: skip
    return run(goal, options, mode, from_file, protocol)


@contextmanager
def _signals_held() -> Iterator[None]:
    """A second Ctrl-C must not cut the rollback short: it waits until the rollback is done."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def bound_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--first-green, --budget-tokens, --timeout."""
    for option in reversed(
        [
            click.option(
                "--first-green", is_flag=True, help="Stop the other candidates once one passes the gate (it wins)."
            ),
            click.option(
                "--budget-tokens",
                type=click.IntRange(0),
                default=0,
                metavar="T",
                help="No model request starts once the run's tokens (spent and reserved) would pass T (0: no bound).",
            ),
            click.option(
                "--timeout",
                "timeout_sec",
                type=click.FloatRange(0),
                default=0.0,
                metavar="SEC",
                help="Stop whatever is still asked or checked after SEC seconds (0: no bound).",
            ),
        ]
    ):
        command = option(command)
    return command


@click.command("best-of")
@click.argument("count", type=click.IntRange(1, MAX_CANDIDATES), metavar="N")
@click.argument("goal")
@click.option(
    "--mode",
    type=click.Choice(["plan", "apply", "fix-plan", "chat", "fixit"]),
    help="How the models are asked first (default: from the goal, else PAPAYU_LLM_MODE).",
)
@click.option("--from-file", "from_file", metavar="LOG", help="A log or test output to diagnose ('-' = stdin).")
@click.option(
    "--check", "check_cmd", metavar="CMD", help="Check command (overrides papayu.check.command and detection)."
)
@click.option("--onto", metavar="BRANCH", help="Land on BRANCH instead of the current branch.")
@click.option("-y", "--yes", is_flag=True, help="Land the winner without asking (deletions included); diffstat first.")
@click.option("--review", is_flag=True, help="Rank, keep every candidate, land nothing (git papayu land RUN:N).")
@click.option(
    "--allow-test-edits", is_flag=True, help="Candidates that modify existing tests may win (else they are held)."
)
@click.option("--run-proposed", is_flag=True, help="Also run each candidate's commands_to_run after its check.")
@bound_options
@click.option("--protocol", type=click.Choice(["1", "2"]), help="Protocol version (default PAPAYU_PROTOCOL_VERSION).")
@click.option("--json", "as_json", is_flag=True, help="The run's score matrix and the landing as JSON.")
def command(
    count: int,
    goal: str,
    mode: str | None,
    from_file: str | None,
    check_cmd: str | None,
    onto: str | None,
    yes: bool,
    review: bool,
    allow_test_edits: bool,
    run_proposed: bool,
    first_green: bool,
    budget_tokens: int,
    timeout_sec: float,
    protocol: str | None,
    as_json: bool,
) -> None:
    """Ask for N plans for GOAL on one pinned tip, check them side by side, land the best green one.

    \b
    Candidates come from the configured model (rising temperatures, a
    different approach each) or from every model in papayu.candidates.models. Each
    is committed on papayu/<run>/<i> and checked in its own sandboxed checkout
    against the one base run of the tip; identical trees are checked once.
    Ranking: the gate passes, then more tests fixed, then no flaky signal,
    then the smaller change. The winner's diff and verdict come before the
    question (-y: a diffstat). Your branch, index and work tree are untouched
    until it lands. Exit 0 landed or kept, 1 nothing green (ERR_BEST_OF_NO_GREEN).
    """
    from papayu_git.bestof.session import Options  # see run

    options = Options(
        count, check_cmd, onto, yes, review, allow_test_edits, run_proposed, first_green, budget_tokens, timeout_sec,
        as_json,
    )  # fmt: skip
    with handle_errors(as_json):
        raise SystemExit(run(goal, options, mode, from_file, int(protocol) if protocol else None))
