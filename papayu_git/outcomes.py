"""Outcome states of the transaction and of its check (docs/DESIGN.md, "The transaction and
its guarantees"; "Traces").

StrEnum members are the strings plan records and traces have always held: json, ``str()`` and
f-strings write the bare value, and a member compares equal to the plain string read back from
a record written before these enums existed. Kept apart from transaction/ so that the pure
readers (stats.py) and the quick commands (list, show) need not import the transaction and what
it loads (docs/DESIGN.md, "Start-up and cost").
"""

from __future__ import annotations

from enum import StrEnum


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


# The states in which a check actually ran (`stats`' pass rate counts only these).
CHECK_RAN = frozenset({CheckState.PASSED, CheckState.FAILED, CheckState.TIMEOUT})
