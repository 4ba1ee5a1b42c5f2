"""Whether the user's git hooks run when papayu lands or pushes a plan's commit (docs/DESIGN.md,
"Landing").

Landing writes the plan's files into the user's work tree, and git then runs hooks from wherever
core.hooksPath points: often a tracked directory that the plan has just written (husky's
`.husky/_`, whose wrappers run `.husky/<hook>`; a `.githooks/`). Such a hook runs outside the
sandbox, with the user's credentials and network, before anyone has read the diff. So the git
commands that land or push (apply, update-ref, merge and the maintenance it starts, push) get
``HookPolicy.git_args``: hooks off, unless the user opted in (papayu.land.runHooks) and the
commit changes no file a hook may run or read.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from papayu_git import output, settings
from papayu_git.git import NO_HOOKS, common_dir, hooks_dir
from papayu_git.objects import GitTree, changed_paths

if TYPE_CHECKING:
    import pygit2

    from papayu_git.objects import HasId

# Directories, at any depth, whose files hooks run: husky's, shared hook directories, lefthook's scripts.
_HOOK_DIRS = frozenset({".husky", ".githooks", ".git-hooks", ".lefthook", ".lefthook-local"})
# Files, at any depth, that say which commands hooks run.
_HOOK_CONFIG = re.compile(
    r"\.?lefthook(-local)?\.(ya?ml|jsonc?|toml)|\.pre-commit-(config|hooks)\.ya?ml"
    r"|\.?simple-git-hooks\.(json|[cm]?js)|\.huskyrc(\.(json|js|ya?ml))?|husky\.config\.js|\.overcommit\.ya?ml"
)
# package.json keys that hook managers read (husky 4, simple-git-hooks, the pre-commit and pre-push
# packages), and the scripts a hook usually runs (`npm test`; `npm install` runs lifecycle scripts).
_PACKAGE_KEYS = ("husky", "simple-git-hooks", "pre-commit", "pre-push", "scripts")


class HookPolicy(NamedTuple):
    """Whether the user's hooks may run for one landing or push; ``why_not`` says why they may not."""

    run: bool
    why_not: str = ""

    @property
    def git_args(self) -> tuple[str, ...]:
        return () if self.run else NO_HOOKS


def hook_policy(repo: pygit2.Repository, workdir: Path | None, old: HasId, new: HasId) -> HookPolicy:
    """Hooks run only when papayu.land.runHooks is on and going from ``old`` to ``new`` changes no
    file a hook may run or read (``workdir``: where the hooks would run)."""
    if not settings.get_bool("land_run_hooks", str(workdir or repo.workdir or repo.path)):
        return HookPolicy(False, "papayu.land.runHooks is off")
    touched = hook_inputs(repo, workdir, old, new)
    if touched:
        named = ", ".join(touched[:3]) + (" …" if len(touched) > 3 else "")
        return HookPolicy(False, f"the plan changes {named}, which a hook may run or read")
    return HookPolicy(True)


def hook_inputs(repo: pygit2.Repository, workdir: Path | None, old: HasId, new: HasId) -> list[str]:
    """The changed paths a hook may run or read."""
    paths = changed_paths(repo, old, new)
    if paths is None:
        return ["a submodule or a file turned directory"]  # cannot be judged path by path: the worst is assumed
    in_tree = _in_tree_hooks_path(repo, workdir)
    before, after = GitTree(repo, old), GitTree(repo, new)
    return [
        path
        for path in paths
        if _is_hook_file(path, in_tree)
        or (
            path.rsplit("/", 1)[-1].casefold() == "package.json"
            and _package_hooks_changed(before.read_blob(path), after.read_blob(path))
        )
    ]


def _folded(path: str) -> list[str]:
    # As a case-folding file system or NTFS (trailing dots and spaces dropped) would open it.
    return [part.rstrip(". ").casefold() for part in path.split("/")]


def _is_hook_file(path: str, in_tree: tuple[tuple[str, ...], ...]) -> bool:
    parts = _folded(path)
    if any(part in _HOOK_DIRS for part in parts[:-1]) or _HOOK_CONFIG.fullmatch(parts[-1]):
        return True
    return any(parts[: len(prefix)] == list(prefix) for prefix in in_tree)


def _in_tree_hooks_path(repo: pygit2.Repository, workdir: Path | None) -> tuple[tuple[str, ...], ...]:
    """core.hooksPath as folded path segments when it lies inside ``workdir``, and its parent when
    it is husky's `_` (whose wrappers run the hooks beside it)."""
    if workdir is None or not _hooks_path_set(repo):
        return ()
    try:
        inside = hooks_dir(workdir).relative_to(workdir.resolve())
    except ValueError:
        return ()
    parts = tuple(_folded(inside.as_posix())) if inside.parts else ()
    return (parts, parts[:-1]) if parts and parts[-1] == "_" else (parts,)


def _package_hooks_changed(old: bytes | None, new: bytes | None) -> bool:
    try:
        return _hook_keys(old) != _hook_keys(new)
    except (ValueError, AttributeError):  # unreadable either side: the worst is assumed
        return True


def _hook_keys(data: bytes | None) -> dict[str, object]:
    package = json.loads(data) if data is not None else {}
    return {key: package.get(key) for key in _PACKAGE_KEYS}


def _hooks_path_set(repo: pygit2.Repository) -> bool:
    try:
        repo.config["core.hooksPath"]
    except KeyError:
        return False
    return True


def may_have_hook(repo: pygit2.Repository, hook: str) -> bool:
    """Whether git could find ``hook``, without a git process in the common case (no core.hooksPath)."""
    return _hooks_path_set(repo) or (common_dir(repo) / "hooks" / hook).exists()


def say_skipped(repo: pygit2.Repository, workdir: Path, hook: str, policy: HookPolicy) -> None:
    """'<hook> hook skipped' when hooks were off and git would have run one: looked up after the
    landing, because the plan may be what created it."""
    if policy.run or not may_have_hook(repo, hook):
        return
    path = (hooks_dir(workdir) if _hooks_path_set(repo) else common_dir(repo) / "hooks") / hook
    if path.is_file() and os.access(path, os.X_OK):
        output.info(f"{hook} hook skipped: {policy.why_not}")
        output.event("HOOK_SKIPPED", hook=hook, reason=policy.why_not)
