"""Plan -> apply routing of a goal, without buttons (docs/DESIGN.md, "Goals, rounds and the behaviour contract").

Goals are recognised in English and in Russian:

- prefixes `plan: …` / `apply: …` choose the round explicitly;
- a goal that is only a confirmation (ok, ок, apply, применяй, да) applies the latest stored plan;
- "fix / исправь / почини" → plan first; "create / generate / создай / сгенерируй" → apply at once;
- anything else → plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

CONFIRMATIONS = frozenset({"ok", "ок", "apply", "применяй", "да"})
_PREFIX = re.compile(r"^\s*(plan|apply)\s*:\s*", re.I)
_FIX_WORDS = re.compile(r"(?<!\w)(fix|исправь|почини)(?!\w)", re.I)
_CREATE_WORDS = re.compile(r"(?<!\w)(create|generate|создай|сгенерируй)(?!\w)", re.I)


class Intent(StrEnum):
    PLAN = "plan"
    APPLY = "apply"
    CONFIRM = "confirm"  # apply the latest stored plan


@dataclass(frozen=True)
class RoutedGoal:
    intent: Intent
    text: str
    reason: str


def is_confirmation(goal: str) -> bool:
    return goal.strip().strip(".!").strip().casefold() in CONFIRMATIONS


def route_goal(goal: str) -> RoutedGoal:
    prefix = _PREFIX.match(goal)
    if prefix:
        return RoutedGoal(Intent(prefix.group(1).lower()), goal[prefix.end() :].strip(), f"prefix {prefix.group(1)}:")
    if is_confirmation(goal):
        return RoutedGoal(Intent.CONFIRM, goal.strip(), "confirmation")
    fix, create = _FIX_WORDS.search(goal), _CREATE_WORDS.search(goal)
    if fix:  # both kinds of words: planning first is the safer reading
        return RoutedGoal(Intent.PLAN, goal.strip(), f"'{fix.group(1)}' asks for a plan")
    if create:
        return RoutedGoal(Intent.APPLY, goal.strip(), f"'{create.group(1)}' asks for the change")
    return RoutedGoal(Intent.PLAN, goal.strip(), "default")
