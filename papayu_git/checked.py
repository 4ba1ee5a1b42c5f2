"""`land` and `pr` move only what was checked.

The transaction records which commit its check ran on and how it ended
(`plan.extra["apply"]`: `commit`, `check`). Before `land ID` moves a branch, or
`pr ID` pushes one, the kept `papayu/<id>` is compared with that record:

- no recorded check (none found, no plan record) → ERR_NOT_CHECKED (an apply with an explicit
  `--no-check` kept by a dirty work tree lands: skipping was the user's choice),
  waived where the forge's CI is the check (`pr`; `land --when-green` once the
  forge's checks of exactly that commit are green);
- `papayu/<id>` is not the commit the check ran on (amended, reset) → ERR_BRANCH_CHANGED_SINCE_CHECK;
- the check failed or timed out (a `--keep-failed` branch) → ERR_CHECK_NOT_PASSED.

`--force` bypasses all three with a loud warning naming what was bypassed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.errors import PapayuError, hint_for
from papayu_git.objects import branch_name
from papayu_git.outcomes import check_word
from papayu_git.plans import plan_name, plan_subject
from papayu_git.retry import RETRY_CODES

if TYPE_CHECKING:
    from papayu_git.plans import StoredPlan


class VerdictState(StrEnum):
    """What the record says about a kept commit; the plan record keeps it as ``check_state`` once
    the commit lands (outcome_fields). The check's own outcome is outcomes.CheckState."""

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    NOT_CHECKED = "not_checked"  # no check ran (none found, no plan record, no outcome)
    CHANGED = "changed"  # papayu/<id> is not the commit the check ran on
    SKIPPED = "skipped"  # --no-check was the user's choice


@dataclass(frozen=True)
class Verdict:
    """What the record says about ``commit``; ``problem`` is None when it may move unforced."""

    plan_id: str
    commit: str
    state: VerdictState
    checked_commit: str | None  # the commit the recorded check ran on
    check: dict[str, Any] | None
    problem: PapayuError | None


def _error(code: str, plan_id: str, reason: str, branch: str = "") -> PapayuError:
    """A refusal naming the kept branch as it is (a candidate's papayu/RUN/N) and the plan by the
    id a person types for it (objects.plan_name: `RUN:N` for a candidate)."""
    branch = branch or branch_name(plan_id)
    return PapayuError(code, reason, path=branch, hint=hint_for(code, plan_name(plan_id, branch)))


def nothing_to_land(plan_id: str, plan: StoredPlan | None) -> PapayuError:
    """`land ID` of a plan without its `papayu/<id>`: what became of it, and the command that
    still gets it onto the branch (apply: commit, check, land)."""
    if plan is None:
        return PapayuError(
            "ERR_PLAN_NOT_FOUND",
            f"no plan and no branch {branch_name(plan_id)} to land",
            hint="Run 'git papayu list' to see plan ids.",
        )
    outcome = plan.extra.get("apply") or {}
    branch = str(outcome.get("branch") or branch_name(plan_id))
    name = plan_name(plan_id, branch)  # a candidate's RUN:N
    state = outcome.get("state") or "not applied"
    if outcome.get("undone_to"):
        became = f"it landed on {outcome.get('target')} and was undone"
    elif state == "landed":
        became = f"it landed on {outcome.get('target')} already"
    else:
        became = f"it is {state}"
    hint = hint_for("ERR_NOTHING_TO_LAND", name)
    if state == "landed" and not outcome.get("undone_to"):
        hint = f"Nothing to land: its commit is on {outcome.get('target')} ('git papayu show {name}')."
    elif (outcome.get("error") or {}).get("code") in RETRY_CODES:
        hint += f" 'git papayu retry {name}' asks the model for a better plan first."
    who = plan_subject(plan_id, branch)
    return PapayuError("ERR_NOTHING_TO_LAND", f"{who} has no branch {branch}: {became}", hint=hint)


def _describe(check: dict[str, Any]) -> str:
    """The recorded check in the words of the report (outcomes.check_word), with its exit code
    when it failed by it."""
    how = check_word(check)
    exit_code = f", exit {check.get('exit_code')}" if how == "FAILED" and check.get("exit_code") else ""
    return f"`{check.get('command')}` {how}{exit_code}"


def verdict(plan_id: str, plan: StoredPlan | None, commit: str, *, unchecked_ok: bool = False) -> Verdict:
    """Judge the kept commit ``commit`` of ``papayu/<plan_id>`` against the plan's recorded outcome.

    ``unchecked_ok``: the forge's CI is the check (pr, a green land --when-green), so a commit
    without a local check may move; a red or changed one still may not."""
    outcome = (plan.extra.get("apply") or {}) if plan is not None else None
    return verdict_of(plan_id, outcome, commit, unchecked_ok=unchecked_ok)


def verdict_of(plan_id: str, outcome: dict[str, Any] | None, commit: str, *, unchecked_ok: bool = False) -> Verdict:
    """`verdict` on the apply outcome itself (the plan record's, or ApplyResult.to_dict()); None:
    there is no plan record."""
    recorded, outcome = outcome is not None, outcome or {}
    check = outcome.get("check") or None
    checked = outcome.get("commit") or None
    branch = str(outcome.get("branch") or branch_name(plan_id))
    if not check and outcome.get("check_skipped") and checked == commit:
        return Verdict(plan_id, commit, VerdictState.SKIPPED, None, None, None)  # --no-check was the user's choice
    if not check:
        why = (
            "there is no plan record for it"
            if not recorded
            else "its plan record has no apply outcome"
            if not outcome
            else "no check command was found"
            if (outcome.get("error") or {}).get("code") == "ERR_NO_CHECK"
            else "the apply ran without a check (--no-check)"
        )
        problem = (
            None
            if unchecked_ok
            else _error("ERR_NOT_CHECKED", plan_id, f"no check ran on {branch} ({commit[:12]}): {why}", branch)
        )
        return Verdict(plan_id, commit, VerdictState.NOT_CHECKED, None, None, problem)
    if checked != commit:
        was = f"{checked[:12]}" if checked else "an unrecorded commit"
        problem = _error(
            "ERR_BRANCH_CHANGED_SINCE_CHECK",
            plan_id,
            f"{branch} is at {commit[:12]}, but its check ({_describe(check)}) ran on {was}",
            branch,
        )
        return Verdict(plan_id, commit, VerdictState.CHANGED, checked, check, problem)
    if not check.get("passed"):
        state = VerdictState.TIMED_OUT if check.get("timed_out") else VerdictState.FAILED
        log = f"; log: {check['log']}" if check.get("log") else ""
        problem = _error(
            "ERR_CHECK_NOT_PASSED",
            plan_id,
            f"the check of {branch} ({commit[:12]}) did not pass: {_describe(check)}{log}",
            branch,
        )
        return Verdict(plan_id, commit, state, checked, check, problem)
    return Verdict(plan_id, commit, VerdictState.PASSED, checked, check, None)


def enforce(found: Verdict, *, force: bool, doing: str) -> str | None:
    """Raise the verdict's refusal, or with ``force`` print and return the warning (``doing``:
    e.g. "landing", "pushing")."""
    if found.problem is None:
        return None
    if not force:
        raise found.problem
    text = f"--force: {doing} anyway, bypassing {found.problem.code}: {found.problem.reason}"
    output.warn(text)
    return text


def outcome_fields(found: Verdict, *, forced: bool) -> dict[str, Any]:
    """What the plan record keeps about a landing: forced or not, and the check state then."""
    fields: dict[str, Any] = {"forced": forced, "check_state": found.state}
    if found.checked_commit and found.checked_commit != found.commit:
        fields["checked_commit"] = found.checked_commit
    return fields
