"""`doctor`: papayu's git hook and the pre-commit configuration."""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from papayu_git import hooks
from papayu_git.commands.doctor.items import INFO, OK, WARN, Here, Item
from papayu_git.hooks import HOOKS


def git_hook_item(here: Here) -> Item:
    name = "git hook"
    if here.root is None:
        return Item(name, INFO, "not tried: not in a repository")
    hook = hooks.hooks_dir(here.root) / hooks.SHIM_NAME
    data: dict[str, Any] = {"path": str(hook), "papayus": False}
    if not (hook.exists() or hook.is_symlink()):
        return Item(name, INFO, f"no pre-commit hook ({hook})", "Optional: `git papayu hooks install`.", data=data)
    text = hooks.read_hook(hook)
    if hooks.SHIM_MARKER not in text:
        owner = "the pre-commit tool's" if hooks.PRE_COMMIT_TOOL_MARKER in text else "not papayu's"
        return Item(name, INFO, f"{hook}: {owner}", data=data)
    data["papayus"] = True
    chained = hook.with_name(hooks.SHIM_NAME + hooks.CHAINED_SUFFIX)
    also = f"; runs {chained.name} first" if chained.exists() else ""
    line = re.search(r"^PAPAYU_PYTHON=(.*)$", text, re.M)
    words = shlex.split(line.group(1)) if line else []
    python = words[0] if words else ""
    data["python"] = python or None
    if python and not os.access(python, os.X_OK):
        return Item(
            name,
            WARN,
            f"papayu's shim in {hook}, but its Python {python} is gone",
            "`git papayu hooks install` (rewrites the shim).",
            data=data,
        )
    return Item(name, OK, f"papayu's shim in {hook}{also}", data=data)


def precommit_config_item(here: Here) -> Item:
    name = "pre-commit config"
    if here.root is None:
        return Item(name, INFO, "not tried: not in a repository")
    path = here.root / ".pre-commit-config.yaml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Item(name, INFO, "no .pre-commit-config.yaml", data={"hooks": []})
    ids = [h.id for h in HOOKS if re.search(rf"\bid:\s*['\"]?{re.escape(h.id)}\b", text)]
    if not ids:
        return Item(
            name,
            INFO,
            ".pre-commit-config.yaml references no papayu hook",
            "Optional: add papayu's hooks (docs/FEATURES.md: pre-commit hooks).",
            data={"hooks": []},
        )
    return Item(name, OK, f".pre-commit-config.yaml uses {', '.join(ids)}", data={"hooks": ids})
