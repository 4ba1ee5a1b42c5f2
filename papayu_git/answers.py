"""A stored plan's APPLY answer, validated (docs/DESIGN.md, "The protocol and its validation"): the
plan's own, or, for a plan without actions yet (a PLAN-round answer), the APPLY round's, asked of
the model first (llm/rounds.py). `apply`, `fix` and best-of's candidates get theirs here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git.protocol import NO_CHANGES_PREFIX, raw_actions
from papayu_git.validate import validate_response

if TYPE_CHECKING:
    from papayu_git.llm.client import ChatClient
    from papayu_git.plans import StoredPlan
    from papayu_git.protocol import Response


def response_of(
    root: Path, plan: StoredPlan, protocol: int | None, onto: str | None, client: ChatClient | None = None
) -> tuple[StoredPlan, Response]:
    """The plan's validated APPLY answer; a plan without actions asks the model for it first
    (through ``client`` when the caller holds one), checked early against the branch ``onto``."""
    data = plan.response
    summary = data.get("summary", "") if isinstance(data, dict) else ""
    if not raw_actions(data) and not str(summary or "").startswith(NO_CHANGES_PREFIX):
        # The model client and planner load only here: a plan with actions, the common case,
        # never talks to a model (docs/DESIGN.md, "Start-up and cost").
        from papayu_git.llm.rounds import apply_round

        plan = apply_round(root, plan, protocol, onto, client)
        data = plan.response
    version = protocol or plan.protocol
    return plan, validate_response(data, protocol=version, mode="apply", read_files=plan.files or None)
