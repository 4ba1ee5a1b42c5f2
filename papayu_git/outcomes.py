"""Outcome states of the transaction and of its check (docs/DESIGN.md, "The transaction and
its guarantees"; "Traces").

StrEnum members are the strings plan records and traces have always held: json, ``str()`` and
f-strings write the bare value, and a member compares equal to the plain string read back from
a record written before these enums existed. Kept apart from transaction/ so that the pure
readers (stats.py) and the quick commands (list, show) need not import the transaction and what
it loads (docs/DESIGN.md, "Start-up and cost").
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ApplyState(StrEnum):
    """``ApplyResult.state``, the plan record's ``extra.apply.state`` and the trace's ``apply.state``."""

    LANDED = "landed"
    ROLLED_BACK = "rolled_back"
    REVIEW = "review"  # committed and kept on papayu/<id>, not landed
    NO_CHANGES = "no_changes"
    # Only in the plan record: refused before a commit was written, and a kept branch deleted by `drop`.
    REFUSED = "refused"
    DROPPED = "dropped"
    # Committed and checked, refused at landing: the branch had moved (without --rebase).
    REFUSED_BRANCH_MOVED = "refused_branch_moved"
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM during the transaction: rolled back


class CheckState(StrEnum):
    """The trace's ``check.state``: how the check of one apply ended, or why none ran."""

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # --no-check
    NONE_FOUND = "none_found"  # no check command found: held at review (ERR_NO_CHECK)
    INTERRUPTED = "interrupted"  # Ctrl-C or a termination signal while it ran: rolled back
    NOT_RUN = "not_run"  # the apply stopped before its check (a refusal, nothing to commit)


# The warning of a `no_changes` apply whose actions leave the tip's tree as it is (its change is on
# the branch already), as against a model that answered that nothing needs to change.
TREE_UNCHANGED = "the plan's actions change nothing in the tree"

# The states in which a check actually ran (`stats`' pass rate counts only these).
CHECK_RAN = frozenset({CheckState.PASSED, CheckState.FAILED, CheckState.TIMEOUT})


def check_word(check: Mapping[str, Any]) -> str:
    """How a recorded check (``CheckResult.to_dict()``) ended, in the one set of words every
    report, `list` and `show` use (docs/TRANSACTION.md, "What next"): the verdict's, so that a
    check on a red tip reads "passed" only when the plan may land, and one held at review for
    fixing nothing reads so."""
    verdict = check.get("verdict") or {}
    code = verdict.get("code")
    if check.get("timed_out") or code == "ERR_CHECK_TIMEOUT":
        return "TIMED OUT"
    if code == "ERR_CHECK_FIXES_NOTHING":
        return "fixes nothing"
    if check.get("passed"):
        return "passed" if verdict.get("lands", True) else "passed, held for review"
    return "FAILED"
