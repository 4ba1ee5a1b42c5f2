"""The orchestrator side of the behaviour contract (docs/DESIGN.md, "Goals, rounds and the behaviour contract").

Before the call: decide whether the model should ask (language/runtime, logs or intent
missing) or act at once (stack trace + code, a named file/function, an unambiguous request);
the decision goes into the user message as an ORCHESTRATOR NOTE.
After the call: flag an answer that claims tests/commands ran, or cites a file papayu never
showed it; the flags are printed as warnings and recorded in the trace (`behaviour_flags`).
Goals and answers may be English or Russian, so the word lists carry both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from papayu_git.protocol import ActionKind, Response

_TRACE = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|^\s+at .+:\d+(:\d+)?\)?$"
    r"|panicked at|^goroutine \d+|[\w./-]+\.\w+:\d+(:\d+)?|^FAILED [\w./-]+::",
    re.M,
)
_NAMED = re.compile(r"[\w-]+(?:/[\w.-]+)*\.[A-Za-z]{1,5}\b|\b\w+\(\)|`[^`]+`")
_FAILURE = re.compile(
    r"\b(fail(s|ed|ing)?|crash(es|ed)?|broken|error|exception|does not work|doesn't work)\b"
    r"|пада|ошибк|не работает|слома",
    re.I,
)
_UNAMBIGUOUS = re.compile(
    r"\b(write|add|create|generate|rename|refactor|remove|delete|update|bump)\b"
    r"|напиши|добавь|создай|сгенерируй|переименуй|удали|обнови",
    re.I,
)
_EXPLAIN = re.compile(r"\b(why|explain|what does|how does)\b|почему|объясни|что делает|как работает", re.I)
_FIX = re.compile(r"\b(fix|repair|make .* pass)\b|исправ|почини", re.I)
_LANGUAGE = re.compile(
    r"\b(python|node(js)?|typescript|javascript|rust|go(lang)?|java|ruby|php|c\+\+|kotlin)\b"
    r"|pyproject\.toml|package\.json|Cargo\.toml|go\.mod|requirements[\w-]*\.txt",
    re.I,
)

_CLAIMS = re.compile(
    r"\b(all\s+)?tests?\s+(have\s+|now\s+)?(passed|pass(es)?\s+now|are\s+(now\s+)?green)\b"
    r"|\bI\s+(have\s+)?(ran|run|executed|tested|verified|built|compiled)\b"
    r"|\b(build|compilation|command|check)\s+(has\s+)?(succeeded|passed|ran\s+successfully|completed\s+successfully)\b"
    r"|тесты\s+(уже\s+)?прошли|(я\s+)?запустил|сборка\s+прошла|проверил\s+запуском",
    re.I,
)
_FILE_TOKEN = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyi|js|jsx|ts|tsx|mjs|rs|go|java|kt|rb|php|c|h|cc|cpp|hpp|cs"
    r"|md|toml|json|ya?ml|cfg|ini|txt|sh|lock))(?![\w/-])"
)


@dataclass(frozen=True)
class BehaviourDecision:
    act: bool
    reasons: tuple[str, ...]
    missing: tuple[str, ...]

    def note(self, ask_budget: int) -> str:
        if self.act:
            return "act now (" + "; ".join(self.reasons) + "): return the plan or change without questions."
        if ask_budget <= 0:
            return (
                "information is missing (" + ", ".join(self.missing) + ") but the operator allows no "
                "questions: state your assumptions in the summary and use context_requests."
            )
        return (
            f"ask at most {ask_budget} question(s) in 'questions' about what is missing ("
            + ", ".join(self.missing)
            + "), and/or use context_requests; still give a tentative plan."
        )


def decide(goal: str, log_text: str | None, context_text: str) -> BehaviourDecision:
    """When to ask and when to act: act on a stack trace with code, a named file or function, or an
    unambiguous request; otherwise name what is missing."""
    evidence = f"{goal}\n{log_text or ''}"
    reasons = []
    if _TRACE.search(evidence) and "FILE[" in context_text:
        reasons.append("a stack trace and the code are in the context")
    if _NAMED.search(goal):
        reasons.append("a file or function is named")
    if _UNAMBIGUOUS.search(goal) and not _EXPLAIN.search(goal):
        reasons.append("the request is unambiguous")
    if reasons:
        return BehaviourDecision(True, tuple(reasons), ())
    missing = []
    if not _LANGUAGE.search(evidence + "\n" + context_text):
        missing.append("language/runtime")
    if _FAILURE.search(goal) and not _TRACE.search(evidence):
        missing.append("logs or a stack trace")
    if not (_FIX.search(goal) or _UNAMBIGUOUS.search(goal)) or (_FIX.search(goal) and _EXPLAIN.search(goal)):
        missing.append("intent (fix or explain)")
    if not missing:
        return BehaviourDecision(True, ("the goal and context are sufficient",), ())
    return BehaviourDecision(False, (), tuple(missing))


def _texts(response: Response) -> Iterable[str]:
    yield response.summary
    for step in response.plan:
        if isinstance(step, Mapping):
            yield f"{step.get('step', '')} {step.get('details', '')}"
    yield from response.risks
    data = response.data if isinstance(response.data, dict) else {}
    for key in ("verification", "rollback"):
        yield from (v for v in data.get(key) or () if isinstance(v, str))


def flag_answer(response: Response, files_shown: Mapping[str, str], shown_text: str) -> list[dict[str, str]]:
    """What the model must not do: claim runs papayu did not do, cite files it never showed."""
    flags: list[dict[str, str]] = []
    created = {a.path for a in response.actions if a.kind in (ActionKind.CREATE_FILE, ActionKind.CREATE_DIR)}
    shown_names = set(files_shown) | {p.rsplit("/", 1)[-1] for p in files_shown}
    seen: set[str] = set()
    for text in _texts(response):
        claim = _CLAIMS.search(text or "")
        if claim and not any(f["kind"] == "claims_ran" for f in flags):
            flags.append(
                {
                    "kind": "claims_ran",
                    "text": claim.group(0),
                    "message": f"the model claims something ran ('{claim.group(0)}'); papayu ran nothing yet",
                }
            )
        for match in _FILE_TOKEN.finditer(text or ""):
            path = match.group(1).strip(".")
            if path in seen or path in created or path in shown_names or path in shown_text:
                continue
            seen.add(path)
            flags.append(
                {
                    "kind": "unread_file",
                    "path": path,
                    "message": f"the model cites {path}, which papayu never showed it",
                }
            )
    return flags


def agent_note(decision: BehaviourDecision, ask_budget: int) -> str:
    """The ORCHESTRATOR NOTE of `git papayu agent`: the same decision, in terms of tools."""
    if decision.act:
        return "act now (" + "; ".join(decision.reasons) + "): use the tools and make the change without questions."
    missing = ", ".join(decision.missing)
    if ask_budget <= 0:
        return f"information may be missing ({missing}): find it with the tools; state your assumptions at the end."
    return (
        f"information may be missing ({missing}): find it with the tools first; if they cannot tell you, "
        f"end with at most {ask_budget} question(s) and no change."
    )


_ABOUT_TESTS = re.compile(r"\btests?\b|\bpytest\b|\bchecks?\b|тест", re.I)
_SAYS_PASSED = re.compile(r"pass|green|succeed|прошл", re.I)
_APPLIED = re.compile(
    r"\bI\s+(have\s+|'ve\s+)?(applied|patched|changed|modified|updated|fixed|edited|created|added|removed|deleted)\b"
    r"|\b(patch|change|fix)(es)?\s+(has|have)\s+been\s+applied\b|\b(patch|change|fix)(es)?\s+(was|were)\s+applied\b"
    r"|(я\s+)?(применил|исправил|изменил)",
    re.I,
)


def flag_agent_claims(
    text: str, *, patched: bool, tests_ran: bool, tests_passed: bool, ran: bool
) -> list[dict[str, str]]:
    """The agent's final message against what its tools really did: a test pass without a passing
    run_tests, a change without a successful apply_patch, a command without a successful run."""
    flags: dict[str, dict[str, str]] = {}
    for claim in _CLAIMS.finditer(text or ""):
        window = text[claim.start() : claim.end() + 40]
        if _ABOUT_TESTS.search(window):
            if tests_ran and (tests_passed or not _SAYS_PASSED.search(claim.group(0))):
                continue
            kind, why = "claims_tests_passed", "no run_tests passed"
        elif ran or tests_ran:
            continue
        else:
            kind, why = "claims_ran", "no run succeeded"
        flags.setdefault(
            kind, {"kind": kind, "text": claim.group(0), "message": f"the agent claims '{claim.group(0)}'; {why}"}
        )
    applied = _APPLIED.search(text or "")
    if applied and not patched:
        flags["claims_patched"] = {
            "kind": "claims_patched",
            "text": applied.group(0),
            "message": f"the agent claims '{applied.group(0)}'; no apply_patch succeeded",
        }
    return list(flags.values())
