"""The APPLY round for a stored plan that has no actions yet (a PLAN-round answer).

`apply ID` opens a model session for it; `fix` passes the client it already holds, so the
embedded server starts once for both rounds.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from papayu_git import output, plans
from papayu_git.llm.apply_round import run_apply_round
from papayu_git.llm.client import ChatClient
from papayu_git.llm.session import open_client


def apply_round(
    repo_root: Path,
    plan: plans.StoredPlan,
    protocol: int | None = None,
    onto: str | None = None,
    client: ChatClient | None = None,
) -> plans.StoredPlan:
    """Ask the model for the APPLY answer of ``plan`` (same context) for the branch ``onto`` (None:
    the plan's own); returns the saved plan."""
    if protocol is not None and protocol != plan.protocol:
        plan = replace(plan, protocol=protocol)
    output.info(f"papayu: plan {plan.id} has no actions yet; asking the model for the change (APPLY round)")
    if client is not None:
        return run_apply_round(repo_root, plan, client, onto).plan

    with open_client(repo_root) as opened:
        return run_apply_round(repo_root, plan, opened, onto).plan
