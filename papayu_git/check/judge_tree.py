"""The tree of the regression run: the tip's judges on the plan's code.

A plan must not write its own judge: a new `tests/test_0_smoke.py` that calls `os._exit(0)`, a
new `conftest.py` that patches the broken function back, a Makefile recipe that repairs the code,
a golden file, a `sitecustomize.py` all turn a red check green. So the regression run checks the
plan's tree with every path that is not the plan's code (judges.py) as on the tip: added ones
removed, changed or deleted ones put back with the tip's bytes and mode. When the plan changes
only code, that tree is the plan's own and one run is enough.

The tree is written through a libgit2 index read from the plan's tree: it restores symlinks and
submodules as they were (objects.build_tree writes regular files only) and, its tree cache intact,
rewrites only the directories on a restored path (~10 ms at 50k files).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git.judges import judging_paths
from papayu_git.objects import MODE_TREE, GitTree, changed_paths, commit_of, create_commit
from papayu_git.testfiles import compile_patterns, configured_test_patterns

if TYPE_CHECKING:
    import pygit2


def judge_paths(
    repo: pygit2.Repository,
    tip: str,
    plan_commit: str,
    repo_root: Path,
    command: str = "",
    support: Sequence[str] = (),
) -> list[str]:
    """The paths ``plan_commit`` changes against ``tip`` that are not its code (judges.py: tests,
    their data and helpers, configs, scripts ``command`` runs, the environment, and ``support``:
    what the tip's run loaded as test support), sorted; [] when the regression run is the plan's
    own run."""
    tip_tree = GitTree(repo, commit_of(repo, tip).tree)
    plan_tree = GitTree(repo, commit_of(repo, plan_commit).tree)
    tests = compile_patterns(configured_test_patterns(repo_root)[0])
    changed = _changed_files(repo, tip_tree.tree, plan_tree.tree)
    return judging_paths(changed, tip_tree, tests=tests, command=command, support=support)


def tip_tests_commit(
    repo: pygit2.Repository,
    tip: str,
    plan_commit: str,
    repo_root: Path,
    command: str = "",
    support: Sequence[str] = (),
) -> tuple[str | None, list[str]]:
    """A commit whose tree is the plan's with every path that is not its code as on the tip
    (parent: the tip; written to the object database, no ref moved), or None when the plan
    changes only code; and those paths."""
    import pygit2

    paths = judge_paths(repo, tip, plan_commit, repo_root, command, support)
    if not paths:
        return None, []
    tip_tree = commit_of(repo, tip).tree
    index = pygit2.Index()
    index.read_tree(commit_of(repo, plan_commit).tree)
    restore = []
    for path in paths:
        entry = _entry(tip_tree, path)
        if entry is None or entry.filemode == MODE_TREE:
            index.remove(path)  # first: a restored file may stand where the plan made a directory
        else:
            restore.append(pygit2.IndexEntry(path, entry.id, entry.filemode))
    for restored in restore:
        index.add(restored)
    message = f"papayu regression run: the tests of {tip[:12]} on the code of {plan_commit[:12]}\n"
    return create_commit(repo, index.write_tree(repo), commit_of(repo, tip).id, message), paths


def changed_files(
    repo: pygit2.Repository, tip: str, commit: str, repo_root: Path, command: str = "", support: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """The files ``commit``'s tree changes against ``tip``'s, and those of them that are code
    (judges.py), sorted."""
    tip_tree = GitTree(repo, commit_of(repo, tip).tree)
    changed = _changed_files(repo, tip_tree.tree, commit_of(repo, commit).tree)
    tests = compile_patterns(configured_test_patterns(repo_root)[0])
    judging = set(judging_paths(changed, tip_tree, tests=tests, command=command, support=support))
    return changed, [p for p in changed if p not in judging]


def _changed_files(repo: pygit2.Repository, old: pygit2.Tree, new: pygit2.Tree) -> list[str]:
    paths = changed_paths(repo, old, new)
    if paths is not None:
        return paths
    # A submodule moved or a file became a directory: libgit2's diff lists a directory's files.
    deltas = old.diff_to_tree(new).deltas
    return sorted({d.old_file.path for d in deltas} | {d.new_file.path for d in deltas})


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        return tree[path]
    except KeyError:
        return None
