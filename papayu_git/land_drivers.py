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
"""

from __future__ import annotations

from pathlib import Path

from papayu_git import settings

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
