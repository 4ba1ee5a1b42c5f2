"""The outcome of a transaction, kept: in the plan record (`extra.apply`, for list, land, show and
`checked.py`) and in its trace (docs/ARCHITECTURE.md, "Stored plan")."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import plans, traces
from papayu_git.errors import PapayuError
from papayu_git.outcomes import ApplyState, CheckState
from papayu_git.plans import StoredPlan
from papayu_git.transaction.values import ApplyResult

if TYPE_CHECKING:
    pass


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
            **({"runs": _runs(check["runs"])} if check.get("runs") else {}),
        },
        apply={"state": result.state, "branch": result.branch, "commit": result.commit},
        test_edits=list(result.test_edits),
        timings=result.timings,
        **({"rebased_from": list(result.rebased_from)} if result.rebased_from else {}),
    )


def check_state(result: ApplyResult) -> CheckState:
    """The trace's check.state: how the check ended, or why none ran: none found, skipped by the
    user's choice (--no-check), interrupted while it ran, or not reached (a refusal first)."""
    check = result.check or {}
    if (result.error or {}).get("code") == "ERR_NO_CHECK":
        return CheckState.NONE_FOUND
    if check:
        if check.get("passed"):
            return CheckState.PASSED
        return CheckState.TIMEOUT if check.get("timed_out") else CheckState.FAILED
    if result.state == ApplyState.INTERRUPTED:
        return CheckState.INTERRUPTED
    if result.check_skipped or (result.state in (ApplyState.REVIEW, ApplyState.LANDED) and not result.error):
        return CheckState.SKIPPED  # --no-check: landed, or kept with --review
    return CheckState.NOT_RUN


def record_refusal(pdir: Path, plan: StoredPlan, trace_id: str, exc: PapayuError) -> None:
    """Refused before any object was written: recorded in the plan and a trace (golden-comparable)."""
    errors = [e.to_dict() for e in getattr(exc, "errors", [exc])]
    plans.update_outcome(pdir, plan.id, state=ApplyState.REFUSED, error=errors[0], trace_id=trace_id)
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


def _runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The check's runs as the trace keeps them: what ran, why, how long (not their logs)."""
    return [{k: v for k, v in run.items() if k != "log"} for run in runs]
