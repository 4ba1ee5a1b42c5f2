"""`python -m papayu_git.bestof.child < SPEC`: one best-of candidate's transaction, in a process of
its own (docs/DESIGN.md, "Best of N").

The same transaction as `apply ID --review --keep-failed`, built on the run's pinned tip and kept
on `papayu/<run>/<i>`: validate, commit, the gate against the shared base run, then stop. It
never lands (the run lands its winner with `land`'s code). SIGTERM, from the run stopping it or
from its Ctrl-C, is the CLI's Ctrl-C: the check is killed, the transaction rolls back, and the
candidate's ref goes too. So does a run that dies: the child notices that its parent is gone and
stops itself. The result is the transaction's JSON on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from papayu_git import atomic, output, plans
from papayu_git.error_handler import handle_errors, install_signal_handlers

PARENT_POLL_SEC = 0.5


def main() -> int:
    install_signal_handlers()
    spec = json.loads(sys.stdin.readline())  # the pipe stays open: the answer after the first part comes there
    _watch_parent(os.getppid())
    with handle_errors(json_output=True):
        return _apply(spec)
    return 1  # handle_errors exits; this keeps mypy content


def _apply(spec: dict[str, Any]) -> int:
    from papayu_git.git import papayu_dir
    from papayu_git.objects import delete_branch
    from papayu_git.repository import open_repo
    from papayu_git.transaction import ApplyOptions, apply_plan
    from papayu_git.validate import validate_response

    root = Path(spec["root"])
    repo = open_repo(root)
    plan = plans.load(papayu_dir(repo), plans.check_id(spec["plan_id"]))
    response = validate_response(plan.response, protocol=plan.protocol, mode="apply", read_files=plan.files or None)
    options = ApplyOptions(
        check=spec["check"],
        review=True,
        keep_failed=True,  # a red candidate stays on its ref for `show RUN` until drop or gc
        onto=spec["onto"],
        yes=spec["yes"],
        run_proposed=spec["run_proposed"],
        allow_test_edits=spec["allow_test_edits"],
        tip=spec["tip"],
        branch=spec["branch"],
        check_pause=_pause(Path(spec["first_path"])) if spec.get("first_path") else None,
    )
    try:
        result = apply_plan(root, plan, response, options)
    except KeyboardInterrupt:  # stopped: nothing of it stays (its record says interrupted)
        delete_branch(repo, spec["branch"])
        raise
    output.emit_json(result.to_dict())
    return 0


def _pause(path: Path) -> Any:
    """After the check's first part: what it found, written for the run (bestof/phases.py), then
    its answer on stdin: "go" (the rest) or "done" (end as it is). A closed pipe is "done"."""

    def pause(found: dict[str, Any]) -> str:
        atomic.write_json(path, found, indent=None)
        answer = sys.stdin.readline().strip()
        return answer if answer in ("go", "done") else "done"

    return pause


def _watch_parent(parent: int) -> None:
    """SIGTERM ourselves when the run that started us is gone (reparented): a kill -9 of the run
    must not leave candidates behind."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SEC)
        os.kill(os.getpid(), signal.SIGTERM)

    output.start_thread(threading.Thread(target=watch, daemon=True))


if __name__ == "__main__":
    sys.exit(main())
