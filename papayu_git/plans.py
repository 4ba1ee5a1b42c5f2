"""Stored plans: `.git/papayu/plans/<id>.json` (SPEC §1 `plan`).

A plan records what the model saw (files with their sha256, the context text) so
that `apply ID` can run the APPLY round with the same context and check implicit
bases against the blobs at the branch tip (SPEC §4.2).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from papayu_git.errors import PapayuError

PLAN_FORMAT = 1


def new_id() -> str:
    """Short, sortable, unique enough for branch names: papayu/<id>."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()  # not `secrets`: its import costs ~5 ms per command


@dataclass(frozen=True)
class StoredPlan:
    id: str
    goal: str = ""
    mode: str = "plan"                      # plan | apply (the round that produced `response`)
    protocol: int = 2
    base_commit: str = ""
    branch: str = ""
    files: dict[str, str] = field(default_factory=dict)   # path -> sha256 shown to the model
    response: Any = None                    # validated JSON of the last round
    trace_id: str = ""
    created_at: str = ""
    context: str = ""                       # the user message sent with the plan round
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"papayu_plan": PLAN_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StoredPlan":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def plans_dir(papayu_dir: Path) -> Path:
    return papayu_dir / "plans"


def save(papayu_dir: Path, plan: StoredPlan) -> Path:
    directory = plans_dir(papayu_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{plan.id}.json"
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(plan.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, target)
    return target


def is_plan_record(data: Any) -> bool:
    return isinstance(data, dict) and data.get("papayu_plan") == PLAN_FORMAT


def find_record(directory: Path, id_or_prefix: str, code: str, what: str) -> Path:
    """The one `<id>.json` in ``directory`` named by an id or a unique prefix (like git's short
    hashes). Ids never contain path separators, so nothing outside ``directory`` is read."""
    if not id_or_prefix or any(c in id_or_prefix for c in "/\\\0*?[") or id_or_prefix.startswith("."):
        raise PapayuError(code, f"invalid {what} id {id_or_prefix!r}")
    exact = directory / f"{id_or_prefix}.json"
    if exact.is_file():
        return exact
    matches = sorted(directory.glob(f"{id_or_prefix}*.json")) if directory.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(m.stem for m in matches[:5])
        raise PapayuError(code, f"{what} id prefix {id_or_prefix!r} is ambiguous: {names}",
                          hint="Give more characters of the id.")
    raise PapayuError(code, f"no {what} {id_or_prefix!r}", path=str(directory))


def resolve_id(papayu_dir: Path, id_or_prefix: str) -> str:
    return find_record(plans_dir(papayu_dir), id_or_prefix, "ERR_PLAN_NOT_FOUND", "plan").stem


def load(papayu_dir: Path, id_or_prefix: str) -> StoredPlan:
    plan_id = resolve_id(papayu_dir, id_or_prefix)
    data = json.loads((plans_dir(papayu_dir) / f"{plan_id}.json").read_text(encoding="utf-8"))
    return StoredPlan.from_json(data)


def list_plans(papayu_dir: Path) -> list[StoredPlan]:
    directory = plans_dir(papayu_dir)
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            out.append(StoredPlan.from_json(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue
    return out
