"""No program of the user's configuration runs on a plan's files while they land (docs/DESIGN.md,
"Landing").

Landing writes the plan's files into the user's work tree with the user's own git, and git runs
the filter driver that a file's attributes name: `git lfs install` puts
`filter.lfs.{clean,smudge,process}` and `filter.lfs.required` into ~/.gitconfig, so a plan adding
`.gitattributes` (`* filter=lfs`) and `.lfsconfig` would pick which of its files git-lfs reads and
which server it talks to, outside the sandbox. The bytes landed would not be those the check ran
on either: the check's checkout runs no filter (worktree.py). So every filter driver configured at
any level is switched off for the commands that land: smudge, clean and process set empty (git
then runs nothing and writes the blob as it is) and required false (else git refuses a file whose
filter did not run). core.fsmonitor is off too: a program the user named, possibly by a path in
the work tree. Diff and merge drivers do not run there: the fast path's diff passes
--no-ext-diff --no-textconv, and a fast-forward merges no content. git's own conversions (line
endings, working-tree-encoding) run no program and are left as the user set them.

The values go into GIT_CONFIG_PARAMETERS, where `git -c` puts its own: after whatever is there
already (the last value wins), inherited by every git the landing starts, and quoted as git
quotes them, so no driver name needs to survive a shell.

git's conversions still run, with the user's settings (`core.autocrlf`, `core.eol`, a global or
`.git/info/attributes` file), which the check's checkout does not read: a file could land with
other bytes than the check ran. So once landed, every file the plan touched is compared with the
bytes its check's checkout had (as_checked), and any that differs is written as the check ran it
(a plan that changes conversion attributes itself is held before: check/reach.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from papayu_git import atomic, settings
from papayu_git.git import run_git

_FILTER_VARIABLES = (("smudge", ""), ("clean", ""), ("process", ""), ("required", "false"))


def no_drivers_env(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the user's filter drivers and fsmonitor switched off for git in ``workdir``."""
    pairs = [("core.fsmonitor", "false")]
    for name in filter_names(workdir):
        pairs += [(f"filter.{name}.{variable}", value) for variable, value in _FILTER_VARIABLES]
    ours = " ".join(f"{_quoted(key)}={_quoted(value)}" for key, value in pairs)
    before = env.get("GIT_CONFIG_PARAMETERS", "").strip()
    return {**env, "GIT_CONFIG_PARAMETERS": f"{before} {ours}" if before else ours}


def filter_names(workdir: Path) -> list[str]:
    """Every filter driver configured for ``workdir`` at any level (`filter.<name>.<variable>`),
    from the `git config` the command read when it started unless that was over a second ago,
    rather than a `git config` process of its own (docs/DESIGN.md, "Start-up and cost")."""
    names = set()
    for key in settings.git_config_keys("filter.", str(workdir), within=_FRESH_SEC):
        if key.count(".") >= 2:
            names.add(key[len("filter.") : key.rindex(".")])
    return sorted(names)


# How old the command's read of `git config` may be for the landing to trust it: an apply without a
# check lands ~50 ms after it started; after a check (or a question to the user) it is read again.
_FRESH_SEC = 1.0


def _quoted(text: str) -> str:
    """As git's sq_quote: in single quotes, a quote as '\\''."""
    return "'" + text.replace("'", "'\\''") + "'"


def as_checked(workdir: Path, checked: Mapping[str, bytes], env: dict[str, str]) -> list[str]:
    """Make every file of ``checked`` (path -> the bytes the check ran) in ``workdir`` hold
    those bytes; returns the paths that had others (git's conversions, as the user set them)."""
    rewritten = []
    for path, data in sorted(checked.items()):
        target = workdir / path
        try:
            if target.is_symlink() or not target.is_file() or target.read_bytes() == data:
                continue
            mode = target.stat().st_mode & 0o7777
        except OSError:
            continue
        with atomic.replacing(target) as tmp:
            tmp.write_bytes(data)
            os.chmod(tmp, mode)
        rewritten.append(path)
    if rewritten:  # the index's stat data, for the bytes now there (no filter runs: env)
        run_git(["update-index", "-q", "--refresh", "--", *rewritten], cwd=workdir, check=False, env=env)
    return rewritten
