"""The transaction's input and output (docs/ARCHITECTURE.md, "transaction/"): ``ApplyOptions``,
``ApplyResult``, and the ``LandingPreview`` a caller's landing question is shown. NamedTuples: every
apply defines them, and a frozen dataclass costs five times as much to define (docs/DESIGN.md,
"Start-up and cost")."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NamedTuple

from papayu_git.outcomes import ApplyState


class ApplyOptions(NamedTuple):
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
    confirm_landing: Callable[[LandingPreview], bool] | None = None
    # A best-of candidate's check after its first part (check/gate.py, GateRequest.pause): told
    # what it found, answers "go" (the rest) or "done" (it ends as it is).
    check_pause: Callable[[dict[str, Any]], str] | None = None
    # A best-of candidate (docs/DESIGN.md, "Best of N"): built on this pinned tip, not the branch's
    # tip now, and kept on papayu/<branch> (`<run>/<i>`) instead of papayu/<plan id>.
    tip: str = ""
    branch: str = ""


class LandingPreview(NamedTuple):
    """What is about to land: the plan's commit on its branch, checked, and the check's record."""

    plan_id: str
    branch: str
    commit: str
    target: str
    check: dict[str, Any] | None


class ApplyResult(NamedTuple):
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
    warnings: tuple[str, ...] = ()
    # --no-check without --review: the user chose to land unchecked; `land ID` honours that choice
    # when a dirty work tree or a merge in progress stopped the landing.
    check_skipped: bool = False
    test_edits: tuple[str, ...] = ()  # existing tests the plan modifies or deletes
    rebased_from: tuple[dict[str, str], ...] = ()  # stale edits merged onto the tip: {path, base_blob, base_commit}
    stage: str = ""  # the stage that raised the error or decided the outcome: validate, build_commit, check, land
    declined: bool = False  # checked and landable, kept because the user said no at the confirmation

    def to_dict(self) -> dict[str, Any]:
        # A copy, as dataclasses.asdict made: callers keep and change the records (best-of's).
        return {"ok": self.state != ApplyState.ROLLED_BACK and self.error is None, **copy.deepcopy(self._asdict())}
