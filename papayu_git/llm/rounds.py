"""The seam `commands/apply.py` calls for a stored plan without actions (apply_round_hook).

`fix` opens one model for both rounds (the embedded server starts once): it registers its
client with ``shared_client`` and the APPLY round reuses it instead of opening another.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path

from papayu_git import output, plans
from papayu_git.llm.apply_round import run_apply_round
from papayu_git.llm.client import ChatClient

_SHARED: ContextVar[ChatClient | None] = ContextVar("papayu_llm_client", default=None)


@contextmanager
def shared_client(client: ChatClient) -> Iterator[None]:
    token = _SHARED.set(client)
    try:
        yield
    finally:
        _SHARED.reset(token)


def apply_round(repo_root: Path, plan: plans.StoredPlan, protocol: int | None = None,
                onto: str | None = None) -> plans.StoredPlan:
    """Ask the model for the APPLY answer of ``plan`` (same context); returns the saved plan."""
    if protocol is not None and protocol != plan.protocol:
        plan = replace(plan, protocol=protocol)
    output.info(f"papayu: plan {plan.id} has no actions yet; asking the model for the change (APPLY round)")
    client = _SHARED.get()
    if client is not None:
        return run_apply_round(repo_root, plan, client, onto).plan
    from papayu_git.llm.session import open_client

    with open_client(repo_root) as opened:
        return run_apply_round(repo_root, plan, opened, onto).plan
