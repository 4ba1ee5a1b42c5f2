"""What `doctor` reports: an ``Item`` per thing tried, the ``Here`` its areas fill in for each
other (the repository, bwrap, the model named), and where a setting's value came from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from papayu_git import settings

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
PROBE_TIMEOUT_SEC = 10.0


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


def setting_source(name: str, cwd: str | None) -> str:
    spec = next(s for s in settings.SETTINGS if s.name == name)
    if spec.env and os.environ.get(spec.env) is not None:
        return spec.env
    if spec.git_key and settings.git_config_value(spec.git_key, cwd) is not None:
        return f"git config {spec.git_key}"
    return "default"
