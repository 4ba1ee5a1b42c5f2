"""Everything that can fail before an object is written (docs/DESIGN.md, "The transaction and its
guarantees"): validation on the tip's tree, the bases (a stale one merged when papayu.stale.rebase
finds it), the new file contents and the tests the plan edits. ``preflight`` and
``planned_test_edits`` run it for the LLM layer and `apply`'s question; nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from papayu_git import settings, stale
from papayu_git.apply import new_file_contents, sha256_hex
from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.landing import Target, resolve_target
from papayu_git.objects import (
    GitTree,
    TreeChanges,
)
from papayu_git.paths import configured_protected
from papayu_git.plans import StoredPlan
from papayu_git.protocol import ActionKind, Mode, Response
from papayu_git.repository import open_repo
from papayu_git.testfiles import configured_test_patterns, edited_tests
from papayu_git.validate import validate_response

if TYPE_CHECKING:
    import pygit2


class Prepared(NamedTuple):
    target: Target
    base: GitTree
    response: Response
    changes: TreeChanges
    test_edits: tuple[str, ...] = ()  # existing test files modified or deleted (testfiles.py)
    rebased_from: tuple[stale.Base, ...] = ()  # stale edits merged onto the tip (stale.py)


def prepare(repo: pygit2.Repository, plan: StoredPlan, response: Response, target: Target) -> Prepared:
    """Everything that can fail before an object is written: validation and the bases."""
    base = GitTree.at(repo, target.tip, [action.path for action in response.actions])
    validated = validate_response(
        response.data,
        protocol=response.protocol,
        mode=Mode.APPLY,
        read_files=plan.files or None,
        tree=base,
        protected=configured_protected(repo.workdir),
    )
    bases = check_bases(validated, plan, base, stale.finder(repo, target.tip, plan.base_commit))
    normalize = settings.get("normalize_eol", repo.workdir).strip().lower() == "lf"
    actions = validated.ordered_actions()
    writes = new_file_contents(actions, stale.reading(base.read_blob, bases), normalize_eol=normalize)
    writes = stale.merged(writes, bases, base.read_blob, normalize_eol=normalize)
    changes = TreeChanges(
        writes=dict(writes),
        delete_files=frozenset(a.path for a in actions if a.kind is ActionKind.DELETE_FILE),
        delete_dirs=frozenset(a.path for a in actions if a.kind is ActionKind.DELETE_DIR),
        create_dirs=frozenset(a.path for a in actions if a.kind is ActionKind.CREATE_DIR),
    )
    return Prepared(target, base, validated, changes, edited_tests_of(repo, base, changes), tuple(bases.values()))


def edited_tests_of(repo: pygit2.Repository, base: GitTree, changes: TreeChanges) -> tuple[str, ...]:
    return tuple(edited_tests(base, changes, configured_test_patterns(repo.workdir)[0]))


def check_bases(
    response: Response, plan: StoredPlan, base: GitTree, finder: stale.BaseFinder | None = None
) -> dict[str, stale.Base]:
    """Bases are compared with the blobs at the tip, not the working tree (docs/DESIGN.md, "Accepted answers"):
    PATCH_FILE's base_sha256, and for UPDATE_FILE the sha256 recorded when PLAN showed it.

    With a ``finder`` (papayu.stale.rebase), a stale base found in the history is returned
    (path -> the version the plan was written against) for a 3-way merge, and a DELETE_FILE
    whose file changed since it was shown is refused (docs/DESIGN.md, "The transaction and its
    guarantees")."""
    errors = []
    found: dict[str, stale.Base] = {}
    for action in response.actions:
        if action.kind is ActionKind.PATCH_FILE:
            expected = action.base_sha256
        elif action.kind is ActionKind.UPDATE_FILE or (finder and action.kind is ActionKind.DELETE_FILE):
            expected = plan.files.get(action.path) or None
        else:
            continue
        blob = base.read_blob(action.path)
        if expected is None or blob is None:
            continue
        actual = sha256_hex(blob)
        if actual != expected and finder is not None:
            if action.kind is ActionKind.DELETE_FILE:
                errors.append(
                    PapayuError(
                        "ERR_BASE_MISMATCH",
                        f"the file changed at the branch tip since the plan read it (sha256 {actual}, the plan "
                        f"saw {expected}): deleting it would drop those changes",
                        path=action.path,
                    )
                )
                continue
            old = finder.find(action.path, expected)
            if old is not None:
                found[action.path] = old
                continue
        if actual != expected:
            errors.append(
                PapayuError(
                    "ERR_BASE_MISMATCH",
                    f"the file at the branch tip has sha256 {actual}, the plan expects {expected}",
                    path=action.path,
                )
            )
    if errors:
        raise ValidationFailed(errors)
    return found


def preflight(repo_root: Path, plan: StoredPlan, response: Response, onto: str | None = None) -> None:
    """Raise every problem a real apply would hit before writing anything; write nothing."""
    repo = open_repo(repo_root)
    prepare(repo, plan, response, resolve_target(repo, onto))


def planned_test_edits(
    repo_root: Path, plan: StoredPlan, response: Response, onto: str | None = None
) -> tuple[str, ...]:
    """The existing tests the plan would modify or delete (for the interactive confirmation);
    raises what `preflight` raises; writes nothing."""
    repo = open_repo(repo_root)
    return prepare(repo, plan, response, resolve_target(repo, onto)).test_edits
