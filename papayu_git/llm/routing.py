"""From the command line (goal, --mode) to what the model is asked (docs/DESIGN.md, "Goals, rounds and
the behaviour contract")."""

from __future__ import annotations

from dataclasses import dataclass

from papayu_git import settings
from papayu_git.errors import PapayuError
from papayu_git.llm.goal import Intent, route_goal
from papayu_git.llm.prompts import PromptMode

_BY_OPTION = {
    "plan": PromptMode.FIX_PLAN,
    "fix-plan": PromptMode.FIX_PLAN,
    "chat": PromptMode.CHAT,
    "fixit": PromptMode.FIXIT,
    "apply": PromptMode.APPLY,
}


@dataclass(frozen=True)
class Route:
    goal: str
    prompt_mode: PromptMode
    confirm: bool  # the goal only confirms: apply the latest stored plan
    reason: str


def resolve(goal: str, mode_option: str | None, cwd: str | None = None) -> Route:
    if not goal.isascii():
        try:
            goal.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8 reach Python as lone surrogates
            raise PapayuError(
                "ERR_USAGE",
                "the goal is not valid UTF-8 text",
                hint="Type the goal in a UTF-8 terminal (check LANG / LC_ALL).",
            ) from None
    routed = route_goal(goal)
    if routed.intent is Intent.CONFIRM and mode_option is None:
        return Route(routed.text, PromptMode.APPLY, True, routed.reason)
    if not routed.text:
        raise PapayuError("ERR_USAGE", "the goal is empty", hint='Say what to do, e.g. "fix the failing test".')
    if mode_option:
        return Route(routed.text, _BY_OPTION[mode_option], False, f"--mode {mode_option}")
    if routed.intent is Intent.APPLY:
        return Route(routed.text, PromptMode.APPLY, False, routed.reason)
    configured = settings.get("llm_mode", cwd).strip().lower() or "fix-plan"
    if configured not in _BY_OPTION or configured == "apply":
        raise PapayuError(
            "ERR_LLM_CONFIG",
            f"PAPAYU_LLM_MODE={configured!r}",
            hint="PAPAYU_LLM_MODE is one of: chat, fixit, fix-plan.",
        )
    return Route(routed.text, _BY_OPTION[configured], False, routed.reason)
