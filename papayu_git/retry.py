"""A red check, sent back to the model: what a retry tells it (docs/DESIGN.md, "Retrying a red check").

A plan whose check failed is not the end of the loop: `fix --attempts N` and `git papayu retry ID`
ask the model again with the previous plan's change, the verdict and the failing tests' output,
masked like everything else that leaves for the provider (the repository's protected values
included) and trimmed to a share of the model's window. Each attempt is a fresh plan and a fresh
transaction on the same base; the loop stops early when an attempt makes nothing better.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from papayu_git import settings
from papayu_git.git import run_git

# The check's verdicts a second plan may fix; anything else (a moved branch, a dirty file, a
# refused answer) is not the plan's code failing its tests.
RETRY_CODES = frozenset(
    {
        "ERR_CHECK_FAILED",
        "ERR_CHECK_REGRESSION",
        "ERR_CHECK_NEW_TESTS_FAIL",
        "ERR_CHECK_TIMEOUT",
        "ERR_CHECK_FIXES_NOTHING",
    }
)
MAX_CHARS = 12_000  # the whole PREVIOUS ATTEMPT block, before the window's share
DIFF_SHARE = 2  # the diff takes at most half of it
MESSAGE_CHARS = 1_500  # per failing test
TAIL_CHARS = 3_000  # the output's tail when the runner named no test
LOG_TAIL_BYTES = 100_000  # of the check log, for the context's heuristics (the files its tracebacks name)


@dataclass(frozen=True)
class Feedback:
    plan_id: str
    failing: tuple[str, ...]  # the tests that made the check red, by name ("" when unnamed)
    text: str  # the PREVIOUS ATTEMPT block of the next request
    log: str  # the failing output, unclipped, for the context's traceback heuristics (files it names)


def retryable(outcome: dict[str, Any]) -> bool:
    """The plan ran its check and the check said no (rolled back, or held: it fixes nothing)."""
    return (outcome.get("error") or {}).get("code") in RETRY_CODES and bool(outcome.get("check"))


def failing_tests(check: dict[str, Any]) -> tuple[str, ...]:
    """The tests a next attempt must make pass: the verdict's newly failing, missing and failing in
    the plan's own run, else those already failing on the tip (a red tip the plan fixed nothing
    of), else the runner's failing tests."""
    verdict = check.get("verdict") or {}
    named = [*verdict.get("broken", ()), *verdict.get("missing", ()), *verdict.get("new_failing", ())]
    named = named or list(verdict.get("already_failing", ()))
    named = named or list((check.get("tests") or {}).get("failing", ()))
    return tuple(dict.fromkeys(str(t) for t in named))


def score(outcome: dict[str, Any]) -> int | None:
    """How red an attempt was: its failing tests; None when the runner gave no names to count."""
    check = outcome.get("check") or {}
    tests = check.get("tests") or {}
    if not tests or not any((tests.get("counts") or {}).values()):
        return None
    return len(failing_tests(check)) or int(tests.get("failing_total") or 0)


def better(before: dict[str, Any], after: dict[str, Any]) -> bool | None:
    """Whether ``after`` fails fewer tests than ``before``; None when the runs cannot tell."""
    old, new = score(before), score(after)
    if old is None or new is None:
        return None
    return new < old


def feedback(root: Path, plan_id: str, summary: str, outcome: dict[str, Any], window_tokens: int = 0) -> Feedback:
    """The PREVIOUS ATTEMPT block for plan ``plan_id`` whose apply ended in ``outcome`` (the plan
    record's `apply` outcome, or ApplyResult.to_dict()). Masked with the repository's secrets."""
    from papayu_git.check.secret_files import repository_masker  # lazy: reads the protected files

    limit = min(MAX_CHARS, window_tokens) if window_tokens else MAX_CHARS  # ~ a quarter of the window
    check = outcome.get("check") or {}
    error = outcome.get("error") or {}
    failing = failing_tests(check)
    names_only = settings.get("agent_test_output", str(root)).strip().lower() == "names"
    said = (check.get("verdict") or {}).get("lines") or []
    lines = [
        f"PREVIOUS ATTEMPT: plan {plan_id} was applied and its check failed ({error.get('code', '?')}); "
        "it did NOT land. Find what it got wrong and answer with a corrected plan; do not repeat it.",
        f"Its summary: {summary.strip() or '(none)'}",
        f"The check `{check.get('command', '?')}` exited {check.get('exit_code')}"
        + (" (timed out)" if check.get("timed_out") else ""),
        *(f"  {line}" for line in said),
    ]
    if failing:
        lines.append(
            "Failing tests: "
            + ", ".join(failing[:20])
            + (f" and {len(failing) - 20} more" if len(failing) > 20 else "")
        )
    log_parts, whole = ([], "") if names_only else _failing_output(check, failing)
    diff = _diff(root, outcome.get("commit"))
    room = max(0, limit - sum(len(x) + 1 for x in lines))
    if diff:
        lines += ["Its change (diff against the tip):", _clip(diff, max(200, room // DIFF_SHARE))]
    output_text = "\n".join(log_parts)
    if output_text:
        room = max(200, limit - sum(len(x) + 1 for x in lines) - 40)
        lines += ["The failing output:", _clip(output_text, room)]
    mask = repository_masker(root)
    return Feedback(plan_id, failing, mask("\n".join(lines)), mask(whole))


def _failing_output(check: dict[str, Any], failing: tuple[str, ...]) -> tuple[list[str], str]:
    """Each failing test's output for the model (head and tail: the innermost frame of a traceback
    comes last), and for the context's heuristics all of it plus the check log's tail, where the
    runner printed every frame (a recorded failure message may be cut short)."""
    messages = check.get("failures") or {}
    shown = [t for t in failing if t in messages] or list(messages)
    parts = [f"--- {test} ---\n{_clip_middle(str(messages[test]), MESSAGE_CHARS)}" for test in shown]
    whole = [f"--- {test} ---\n{messages[test]}" for test in shown]
    if not parts and check.get("tail"):
        parts.append(_tail(str(check["tail"]), TAIL_CHARS))
    whole.append(_log_tail(check.get("log")) or str(check.get("tail") or ""))
    return parts, "\n".join(whole)


def _log_tail(path: Any) -> str:
    """The end of the check's log (papayu's own file under .git/papayu/checks/)."""
    if not isinstance(path, str) or not path:
        return ""
    try:
        with open(path, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - LOG_TAIL_BYTES))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _diff(root: Path, commit: Any) -> str:
    """The previous attempt's change; its branch is gone but the commit stays until `git gc`.
    No external diff driver or textconv: attributes the plan wrote never run a program."""
    if not isinstance(commit, str) or not commit:
        return ""
    args = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", f"{commit}^", commit]
    proc = run_git(args, cwd=root, check=False)
    return str(proc.stdout) if proc.returncode == 0 else ""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = f"\n...[{len(text) - limit} characters cut]"
    return text[: max(0, limit - len(note))] + note


def _clip_middle(text: str, limit: int) -> str:
    """A traceback's head (the test) and its tail (the innermost frame, the error), the middle cut."""
    if len(text) <= limit:
        return text
    note = f"\n...[{len(text) - limit} characters cut]\n"
    head = max(0, limit - len(note)) // 3
    return text[:head] + note + text[len(text) - (max(0, limit - len(note)) - head) :]


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "...[earlier output cut]\n" + text[-limit:]
