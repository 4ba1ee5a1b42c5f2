"""`land --when-green`'s wait: poll the required checks of one commit until they are green,
red, or the deadline comes; an outage of the forge does not end it (docs/DESIGN.md, "Hooks
and PRs").

A poll that gets no answer, a server error or a rate limit is tried again with back-off (the
interval doubled per failure, at most a minute, never past the deadline); only 401, 403 and
404, which waiting cannot change, end the wait at once. At the deadline a forge that is still
down ends it with its own error code, a forge that answers but is still pending with
ERR_CHECKS_TIMEOUT. A forge that never answered at all (the first call) is a wrong URL or a
forge that is down as the user runs the command: said at once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.forge.checks import (
    Checks,
    ChecksState,
    Required,
    approvals_left,
    commit_items,
    evaluate,
    required_checks,
)
from papayu_git.forge.http import Api, ForgeError, connect

if TYPE_CHECKING:
    import httpx

    from papayu_git.forge.remote import Forge

MAX_BACKOFF_SEC = 60.0


def backoff(failures: int, interval: float) -> float:
    """The wait after the ``failures``-th failed poll in a row."""
    return min(max(interval, 1.0) * 2 ** (failures - 1), max(interval, MAX_BACKOFF_SEC))


def poll(api: Api, sha: str, required: Required, pull: int | None) -> Checks:
    items, pipelines = commit_items(api, sha)
    left = approvals_left(api, pull) if required.approvals and pull is not None else 0
    return evaluate(required, items, pipelines, kind=api.forge.kind, approvals_left=left)


def _announce(required: Required, base: str, sha: str, forge: Forge) -> None:
    if required.hidden and not required.names:
        output.warn(
            f"the forge does not show this token the protection of {base}: waiting for every reported check "
            f"of {sha[:12]}. Set papayu.forge.requiredChecks to the checks {base} requires, or use a token "
            f"({forge.token_names}) that may read the branch's protection."
        )
        return
    output.info(f"waiting for {required.describe()} on {sha[:12]} ({required.source or 'nothing required'})")


def wait_until_green(
    forge: Forge,
    sha: str,
    *,
    base: str,
    pull: int | None,
    timeout: float,
    interval: float,
    configured: tuple[str, ...] = (),
    transport: httpx.BaseTransport | None = None,
) -> Checks:
    """Poll until the checks ``base`` requires are green on ``sha``; ERR_CHECKS_RED,
    ERR_CHECKS_TIMEOUT, or the forge's own error (down until the deadline, or refusing)."""
    deadline = time.monotonic() + timeout
    required: Required | None = None
    failures, down_since = 0, 0.0
    with output.progress(f"waiting for the checks of {sha[:12]}"), connect(forge, transport) as api:
        while True:
            polled_at = time.monotonic()
            try:
                if required is None:
                    required = required_checks(api, base, pull, configured)
                    _announce(required, base, sha, forge)
                checks = poll(api, sha, required, pull)
            except ForgeError as err:
                if not err.transient or required is None:  # down from the start: a wrong URL, said now
                    raise
                failures += 1
                down_since = down_since or polled_at
                left = deadline - time.monotonic()
                output.event("FORGE_UNAVAILABLE", code=err.code, status=err.status or 0, failures=failures)
                if left <= 0:
                    down = time.monotonic() - down_since
                    raise ForgeError(
                        err.code,
                        f"{err.reason} (the forge has not answered for {down:.0f}s; gave up at the "
                        f"{timeout:g}s deadline)",
                        status=err.status,
                        hint=err.hint,
                    ) from None
                time.sleep(min(backoff(failures, interval), left))
                continue
            if failures:
                output.info(f"the forge answers again after {time.monotonic() - down_since:.1f}s")
                failures, down_since = 0, 0.0
            output.event("CHECKS_POLLED", sha=sha, state=checks.state.value, checks=len(checks.items))
            if checks.state is ChecksState.GREEN:
                return checks
            if checks.state is ChecksState.RED:
                raise PapayuError(
                    "ERR_CHECKS_RED",
                    f"required checks failed for {sha[:12]}: {checks.describe(ChecksState.RED)}",
                    path=sha,
                )
            if time.monotonic() + interval > deadline:
                waiting = checks.describe(ChecksState.PENDING) or "no check reported yet"
                ignored = f" (not required, ignored: {', '.join(checks.ignored)})" if checks.ignored else ""
                raise PapayuError(
                    "ERR_CHECKS_TIMEOUT",
                    f"required checks of {sha[:12]} still pending after {timeout:g}s: {waiting}{ignored}",
                    path=sha,
                )
            time.sleep(interval)
