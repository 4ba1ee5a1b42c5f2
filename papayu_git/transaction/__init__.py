"""The transaction: validate → preflight → commit → check → land or roll back.

Nothing here touches the user's index or working tree: the commit is built in
memory (objects.build_tree), the check runs in an isolated, sandboxed checkout
(docs/DESIGN.md, "The check's trust boundary"), and the only
write to the user's side is the final fast-forward / compare-and-swap (landing.py).
Any failure after the commit exists deletes `papayu/<id>` (unless --keep-failed).

One room per concern: `values` (the options and the result), `prepare` (everything that can fail
before an object is written), `run` (one apply, in order), `held` (why a checked plan does not
land), `record` (the outcome in the plan record and the trace), `kept` (`land ID`).
"""

from papayu_git.transaction.kept import land_branch
from papayu_git.transaction.prepare import (
    Prepared,
    check_bases,
    edited_tests_of,
    planned_test_edits,
    preflight,
    prepare,
)
from papayu_git.transaction.record import check_state, record_outcome, record_refusal
from papayu_git.transaction.run import MAX_REBASE_ATTEMPTS, apply_plan
from papayu_git.transaction.values import ApplyOptions, ApplyResult, LandingPreview

__all__ = [
    "MAX_REBASE_ATTEMPTS",
    "ApplyOptions",
    "ApplyResult",
    "LandingPreview",
    "Prepared",
    "apply_plan",
    "check_bases",
    "check_state",
    "edited_tests_of",
    "land_branch",
    "planned_test_edits",
    "preflight",
    "prepare",
    "record_outcome",
    "record_refusal",
]
