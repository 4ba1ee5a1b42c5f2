"""What `doctor` reports: an ``Item`` per thing tried, the ``Here`` its areas fill in for each
other (the repository, bwrap, the model named)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
# A bwrap probe on a busy machine (a suite on every core) can take seconds to start: waiting is cheap.
PROBE_TIMEOUT_SEC = 60.0


@dataclass
class Item:
    name: str
    status: str  # ok | warn | fail | info
    detail: str
    hint: str = ""  # the next command, when not ok
    code: str = ""  # an ERR_* code for a failure
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint or None,
            "code": self.code or None,
            "data": self.data,
        }


@dataclass
class Here:
    root: Path | None = None
    repo: Any = None  # pygit2.Repository
    gitdir: Path | None = None
    bwrap: str | None = None
    bwrap_works: bool = False
    provider: str = ""
    model: str = ""  # the model plans are asked of ("" when none could be named)
