"""Breaking a tie between green candidates with a judge model (docs/DESIGN.md, "Best of N").

Only candidates the gate already let through, and only those the ranking could not tell apart,
are shown: the judge picks among equals and can never lift a red one. It sees the goal and the
diffs under letters in a random order, never which model wrote them or their number, so neither
a model's name nor a position can sway it. Its failure (no answer, no valid choice) is reported,
and the tie then goes to the lower number.
"""

from __future__ import annotations

import json
import random
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from papayu_git import output
from papayu_git.bestof.sampling import endpoint
from papayu_git.errors import PapayuError
from papayu_git.llm.client import ChatClient
from papayu_git.secrets import safe_text

MAX_DIFF_CHARS = 12_000  # per candidate
SYSTEM = (
    "You compare candidate changes made for one goal in one repository. Every candidate passed the same "
    "tests equally well. Choose the one a careful reviewer would merge: it does what the goal asks, at the "
    "root of the problem, without needless changes, and reads well. Answer with one JSON object: "
    '{"choice": "<letter>", "reason": "<one sentence>"}.'
)
_OBJECT = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True)
class Ruling:
    model: str
    order: tuple[int, ...]  # the candidates as shown, first letter first
    choice: int | None  # a candidate number, None when the judge failed
    reason: str = ""
    error: dict[str, str] | None = None
    usage: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "shown": {string.ascii_uppercase[i]: n for i, n in enumerate(self.order)},
            "choice": self.choice,
            "reason": self.reason,
            "error": self.error,
            "usage": self.usage,
        }


def rule(root: Path, spec: str, goal: str, diffs: dict[int, str]) -> Ruling:
    """Ask the judge ``spec`` (PROVIDER/MODEL[@BASE_URL]) to choose among ``diffs`` (number -> diff)."""
    from papayu_git.check.secret_files import repository_masker  # lazy: reads the protected files

    order = list(diffs)
    random.SystemRandom().shuffle(order)
    label, config, error = endpoint(spec, str(root))
    if config is None:
        assert error is not None
        return Ruling(label, tuple(order), None, error=error.to_dict())
    mask = repository_masker(root)
    parts = [f"GOAL:\n{goal.strip()}\n"]
    for letter, number in zip(string.ascii_uppercase, order, strict=False):
        parts.append(f"CANDIDATE {letter}:\n```diff\n{mask(diffs[number][:MAX_DIFF_CHARS])}\n```\n")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]
    try:
        with output.quiet(), ChatClient(config) as client:
            reply = client.complete(messages, None, input_chars=sum(len(m["content"]) for m in messages))
        choice, reason = _choice(reply.text, order)
    except PapayuError as exc:
        return Ruling(label, tuple(order), None, error=exc.to_dict())
    return Ruling(label, tuple(order), choice, reason, usage=[dict(reply.usage)])


def _choice(text: str, order: list[int]) -> tuple[int, str]:
    found = _OBJECT.search(text)
    try:
        data = json.loads(found.group(0)) if found else None
    except ValueError:
        data = None
    letter = str(data.get("choice", "")).strip().upper() if isinstance(data, dict) else ""
    letters = string.ascii_uppercase[: len(order)]
    if len(letter) != 1 or letter not in letters:
        raise PapayuError(
            "ERR_JUDGE_INVALID",
            f"the judge answered {safe_text(text.strip()[:120])!r}, not one of {', '.join(letters)}",
        )
    return order[letters.index(letter)], str(data.get("reason") or "").strip()[:300]  # type: ignore[union-attr]
