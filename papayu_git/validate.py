"""Complete validation of a model response before anything is written (docs/DESIGN.md,
"The protocol and its validation").

Schema first (structure), then the semantic rules: paths, protected paths,
conflicts, content, limits, PATCH_FILE shape, the NO_CHANGES rules and memory_patch.
All problems are collected; the first one gives the exit code.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.memory import check_memory_patch
from papayu_git.paths import DEFAULT_PROTECTED, check_path, fold_key, is_protected
from papayu_git.protocol import (
    DELETING_KINDS,
    MAX_JSON_DEPTH,
    NO_CHANGES_PREFIX,
    WRITING_KINDS,
    Action,
    ActionKind,
    Mode,
    Response,
    coerce_mode,
    json_depth_ok,
    parse_json_text,
    raw_actions,
)
from papayu_git.schemas import RESPONSE_SCHEMAS, schema_errors

MAX_ACTIONS = 200
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 5 * 1024 * 1024
PSEUDO_BINARY_RATIO = 0.10

_SHA256 = re.compile(r"[0-9a-f]{64}")
_HUNK_HEADER = re.compile(r"^@@[^\n]*@@", re.M)
_CHANGE_LINE = re.compile(r"^(?:[+](?!\+\+ )|-(?!-- ))", re.M)
_NON_PRINTABLE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f\ufffd]")
# A summary that says nothing changes, however it is spelled ('NO_CHANGES', ' no_changes: ...').
_SAYS_NO_CHANGES = re.compile(r"\s*NO_CHANGES\b", re.I)


def says_no_changes(summary: object) -> bool:
    """Whether ``summary`` claims that nothing needs to change: such an answer must carry no
    actions (ERR_NO_CHANGES_WITH_ACTIONS), whatever the round."""
    return isinstance(summary, str) and _SAYS_NO_CHANGES.match(summary) is not None


class TreeView(Protocol):
    """What the validator needs to know of the base tree (implemented with pygit2 in worktree.py).

    ``entry_kind`` returns "file", "link", "dir", "submodule" or None when absent. ``names_in``
    lists a directory's entry names ("" is the root); it is read only where a plan names a path
    that is not an entry, to find its case or Unicode twin. ``files_under`` lists every
    non-directory path below a directory; it is read only for DELETE_DIR.
    """

    def entry_kind(self, path: str) -> str | None: ...

    def names_in(self, directory: str) -> list[str]: ...

    def files_under(self, path: str) -> list[str]: ...


class _Twins:
    """The base tree's names folded (paths.fold_key), one directory at a time and only when
    asked: a plan of exact entries never builds an index, a new name costs one lookup."""

    def __init__(self, tree: TreeView) -> None:
        self.tree = tree
        self.dirs: dict[str, dict[str, str]] = {}

    def of(self, path: str) -> str | None:
        """The base tree's path that macOS or Windows would open for ``path`` (not an entry)."""
        directory, _, name = path.rpartition("/")
        index = self.dirs.get(directory)
        if index is None:
            index = self.dirs[directory] = {fold_key(n): n for n in self.tree.names_in(directory)}
        twin = index.get(fold_key(name))
        return None if twin is None else f"{directory}/{twin}" if directory else twin


def looks_like_unified_diff(patch: str) -> bool:
    return bool(_HUNK_HEADER.search(patch)) and bool(_CHANGE_LINE.search(patch))


def utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def check_content(path: str, content: str) -> list[PapayuError]:
    if "\x00" in content:
        return [PapayuError("ERR_CONTENT_NUL", "content contains a NUL byte", path=path)]
    size = utf8_size(content)
    if size > MAX_FILE_BYTES:
        return [PapayuError("ERR_FILE_TOO_LARGE", f"{size} bytes (max {MAX_FILE_BYTES})", path=path)]
    if content and _NON_PRINTABLE.search(content):
        bad = len(_NON_PRINTABLE.findall(content))
        if bad / len(content) > PSEUDO_BINARY_RATIO:
            return [
                PapayuError("ERR_PSEUDO_BINARY", f"{bad} of {len(content)} characters are non-printable", path=path)
            ]
    return []


_KINDS = {kind.value: kind for kind in ActionKind}


def _to_action(item: Mapping[str, Any], path: str) -> Action:
    # v1 actions allow extra fields of any type (its schema is open): only strings are action data.
    def text(key: str) -> str | None:
        value = item.get(key)
        return value if isinstance(value, str) else None

    return Action(_KINDS[item["kind"]], path, text("content"), text("patch"), text("base_sha256"))


def _in_the_way(action: Action, prefix: str, kind: str | None) -> PapayuError | None:
    """The error of an entry ``prefix`` of the base tree that a path goes through."""
    if kind == "link":
        return PapayuError("ERR_PATH_THROUGH_SYMLINK", f"{prefix} is a symbolic link", path=action.path)
    if kind == "submodule":
        return PapayuError("ERR_PATH_IN_SUBMODULE", f"{prefix} is a submodule", path=action.path)
    if kind == "file":
        return PapayuError("ERR_PATH_COLLISION", f"{prefix} is a file in the base tree", path=action.path)
    return None


def _twin_error(action: Action, path: str, tree: TreeView, twins: _Twins) -> PapayuError | None:
    """``path`` is not in the base tree: refuse it when macOS or Windows would open another entry
    (``A.txt`` beside ``a.txt``, NFD beside NFC); through a link or submodule by its own code."""
    twin = twins.of(path)
    if twin is None:
        return None
    kind = tree.entry_kind(twin)
    error = _in_the_way(action, twin, kind) if kind in ("link", "submodule") else None
    return error or PapayuError(
        "ERR_PATH_COLLISION",
        f"{path} is the base tree's {kind} {twin} on macOS and Windows (letter case or Unicode form differ)",
        path=action.path,
    )


def _check_prefixes(action: Action, tree: TreeView, twins: _Twins) -> tuple[PapayuError | None, bool]:
    """The first error of the directories above the path, and whether they all exist."""
    parts = action.path.split("/")
    for depth in range(1, len(parts)):
        prefix = "/".join(parts[:depth])
        kind = tree.entry_kind(prefix)
        if kind is None:
            return _twin_error(action, prefix, tree, twins), False
        error = _in_the_way(action, prefix, kind)
        if error:
            return error, True
    return None, True


def _protected_inside(action: Action, tree: TreeView, protected: Sequence[str]) -> list[PapayuError]:
    """DELETE_DIR removes every file below it: none of them may be protected."""
    for path in tree.files_under(action.path):
        if is_protected(path, protected):
            return [
                PapayuError(
                    "ERR_PROTECTED_PATH", f"DELETE_DIR {action.path} would delete this protected file", path=path
                )
            ]
    return []


def _check_tree(action: Action, tree: TreeView, twins: _Twins, protected: Sequence[str]) -> list[PapayuError]:
    error, parents_exist = _check_prefixes(action, tree, twins)
    if error:
        return [error]
    kind = tree.entry_kind(action.path)
    error = _twin_error(action, action.path, tree, twins) if kind is None and parents_exist else None
    if error:
        return [error]
    problems = _check_kind(action, kind)
    if problems or action.kind is not ActionKind.DELETE_DIR:
        return problems
    return _protected_inside(action, tree, protected)


def _check_kind(action: Action, kind: str | None) -> list[PapayuError]:
    """The action against what the base tree holds at its exact path."""
    if kind == "submodule":
        return [PapayuError("ERR_PATH_IN_SUBMODULE", "the path is a submodule", path=action.path)]
    if kind == "link" and action.kind in (ActionKind.UPDATE_FILE, ActionKind.PATCH_FILE, ActionKind.DELETE_DIR):
        return [PapayuError("ERR_PATH_THROUGH_SYMLINK", "the path is a symbolic link", path=action.path)]
    k = action.kind
    if k is ActionKind.CREATE_FILE and kind is not None:
        code = "ERR_PATH_COLLISION" if kind == "dir" else "ERR_CREATE_EXISTS"
        return [PapayuError(code, f"the path already exists ({kind})", path=action.path)]
    if k is ActionKind.CREATE_DIR and kind not in (None, "dir"):
        return [PapayuError("ERR_PATH_COLLISION", f"the path exists as a {kind}", path=action.path)]
    if k in (ActionKind.UPDATE_FILE, ActionKind.PATCH_FILE) and kind not in ("file",):
        if kind is None:
            return [PapayuError("ERR_PATCH_MISSING_FILE", "the file does not exist at the base", path=action.path)]
        return [PapayuError("ERR_PATH_COLLISION", f"the path is a {kind}, not a file", path=action.path)]
    if k is ActionKind.DELETE_FILE and kind not in ("file", "link"):
        code = "ERR_DELETE_MISSING" if kind is None else "ERR_PATH_COLLISION"
        return [
            PapayuError(
                code,
                "no file at this path in the base tree" if kind is None else f"the path is a {kind}; use DELETE_DIR",
                path=action.path,
            )
        ]
    if k is ActionKind.DELETE_DIR and kind != "dir":
        code = "ERR_DELETE_MISSING" if kind is None else "ERR_PATH_COLLISION"
        return [
            PapayuError(
                code,
                "no directory at this path in the base tree"
                if kind is None
                else f"the path is a {kind}; use DELETE_FILE",
                path=action.path,
            )
        ]
    return []


def _check_patch_shape(action: Action) -> list[PapayuError]:
    path, patch = action.path, action.patch or ""
    problems = check_content(path, patch)
    if problems:
        return problems
    if not looks_like_unified_diff(patch):
        return [PapayuError("ERR_PATCH_NOT_UNIFIED", "patch has no '@@' hunk with changed lines", path=path)]
    if not _SHA256.fullmatch(action.base_sha256 or ""):
        return [PapayuError("ERR_BASE_SHA256_INVALID", f"{action.base_sha256!r} is not 64 lowercase hex", path=path)]
    return []


def _check_update(
    action: Action, protocol: int, mode: Mode, read_files: Mapping[str, str] | None, tree: TreeView | None
) -> list[PapayuError]:
    path = action.path
    exists = (tree.entry_kind(path) == "file") if tree is not None else (read_files is not None and path in read_files)
    if protocol >= 2 and exists:
        return [PapayuError("ERR_V2_UPDATE_EXISTING_FORBIDDEN", "UPDATE_FILE on an existing file", path=path)]
    # v1: in APPLY every UPDATE_FILE must name a file read in PLAN, whose hash is its base
    # (docs/DESIGN.md, "Accepted answers"; golden trace v1/005).
    if protocol == 1 and mode is Mode.APPLY and read_files is not None and path not in read_files:
        return [PapayuError("ERR_UPDATE_WITHOUT_BASE", f"UPDATE_FILE path '{path}' not read in plan", path=path)]
    return []


PAPAYU_CONFIG_DIR = ".papa-yu"
_PAPAYU_CONFIG_NAMES = frozenset({PAPAYU_CONFIG_DIR, "papa-y~1"})  # and its 8.3 short name on Windows


def _check_action(
    action: Action,
    protocol: int,
    mode: Mode,
    read_files: Mapping[str, str] | None,
    tree: TreeView | None,
    twins: _Twins | None,
    protected: Sequence[str],
) -> list[PapayuError]:
    path, kind = action.path, action.kind
    if is_protected(path, protected):
        return [PapayuError("ERR_PROTECTED_PATH", "protected path (secrets, keys, .env)", path=path)]
    if path.split("/", 1)[0].casefold().rstrip(". ") in _PAPAYU_CONFIG_NAMES:
        # The project's check command and memory live there: a plan must not choose its own check
        # (docs/DESIGN.md, "The check's trust boundary"); memory changes go through memory_patch.
        return [PapayuError("ERR_PATH_PAPAYU_CONFIG", "plan actions cannot write .papa-yu/", path=path)]
    if kind in (ActionKind.CREATE_FILE, ActionKind.UPDATE_FILE):
        if action.content is None:  # the schemas leave "required by kind" to us (see their description)
            return [PapayuError("ERR_SCHEMA", f"'content' is a required property of {kind.value}", path=path)]
        problems = check_content(path, action.content)
        if problems:
            return problems
    if kind is ActionKind.PATCH_FILE:
        if action.patch is None:
            return [
                PapayuError("ERR_SCHEMA", "'patch' and 'base_sha256' are required properties of PATCH_FILE", path=path)
            ]
        problems = _check_patch_shape(action)
        if problems:
            return problems
    if kind is ActionKind.UPDATE_FILE:
        problems = _check_update(action, protocol, mode, read_files, tree)
        if problems:
            return problems
    if tree is not None and twins is not None:
        return _check_tree(action, tree, twins, protected)
    return []


_DIR_KINDS = frozenset({ActionKind.CREATE_DIR, ActionKind.DELETE_DIR})


def _same_path_conflict(path: str, group: list[Action]) -> PapayuError:
    spellings = sorted({a.path for a in group})
    if len(spellings) > 1:
        return PapayuError(
            "ERR_PATH_COLLISION",
            f"{' and '.join(spellings)} are one path on macOS and Windows (letter case or Unicode form differ)",
            path=path,
        )
    kinds = [a.kind for a in group]
    names = "+".join(sorted(k.value for k in kinds))
    if {k in _DIR_KINDS for k in kinds} == {True, False}:
        return PapayuError("ERR_PATH_COLLISION", f"one path is used as a file and a directory: {names}", path=path)
    return PapayuError("ERR_ACTION_CONFLICT", f"incompatible actions on one path: {names}", path=path)


def _prefixes(path: str) -> list[str]:
    """'a/b/c' -> ['a', 'a/b']."""
    out, pos = [], path.find("/")
    while pos > 0:
        out.append(path[:pos])
        pos = path.find("/", pos + 1)
    return out


def _directory_twins(actions: Sequence[Action], folded: Sequence[str]) -> list[PapayuError]:
    """Two spellings of one directory ('Dir/a.py', 'dir/b.py') are two trees in git and one
    directory on macOS and Windows."""
    if all(a.path == key for a, key in zip(actions, folded, strict=True)):
        return []  # every path is its own folded key, so is each of its directories: no twins
    directories = {a.path if a.kind in _DIR_KINDS else a.path.rpartition("/")[0] for a in actions}
    directories.discard("")
    spelled: dict[str, str] = {}
    seen: set[str] = set()
    errors = []
    for directory in sorted(directories):
        for prefix in (*_prefixes(directory), directory):
            if prefix in seen:
                continue
            seen.add(prefix)
            other = spelled.setdefault(fold_key(prefix), prefix)
            if other != prefix:
                errors.append(
                    PapayuError(
                        "ERR_PATH_COLLISION",
                        f"{other} and {prefix} are one directory on macOS "
                        "and Windows (letter case or Unicode form differ)",
                        path=directory,
                    )
                )
                break
    return errors


def _check_conflicts(actions: Sequence[Action]) -> list[PapayuError]:
    """One action per path (folded: checkouts on macOS/Windows fold case and Unicode form);
    no file may sit above another path of the plan; nothing survives DELETE_DIR."""
    folded = [fold_key(a.path) for a in actions]
    by_path: dict[str, list[Action]] = defaultdict(list)
    for action, key in zip(actions, folded, strict=True):
        by_path[key].append(action)
    errors = []
    if len(by_path) < len(actions):
        for action, key in zip(actions, folded, strict=True):
            group = by_path[key]
            if len(group) > 1:
                errors.append(_same_path_conflict(action.path, group))
                by_path[key] = []  # report each path once
    file_paths = {key for a, key in zip(actions, folded, strict=True) if a.kind in WRITING_KINDS}
    deleted_dirs = {key for a, key in zip(actions, folded, strict=True) if a.kind is ActionKind.DELETE_DIR}
    for action, key in zip(actions, folded, strict=True):
        for prefix in _prefixes(key):
            if prefix in file_paths:
                errors.append(PapayuError("ERR_PATH_COLLISION", f"{prefix} is a file of this plan", path=action.path))
                break
            if prefix in deleted_dirs and action.kind not in DELETING_KINDS:
                errors.append(
                    PapayuError("ERR_ACTION_CONFLICT", f"DELETE_DIR {prefix} removes this path again", path=action.path)
                )
                break
    return errors + _directory_twins(actions, folded)


def _check_actions(
    items: Sequence[Mapping[str, Any]],
    protocol: int,
    mode: Mode,
    read_files: Mapping[str, str] | None,
    tree: TreeView | None,
    protected: Sequence[str],
) -> tuple[list[Action], list[PapayuError]]:
    errors: list[PapayuError] = []
    actions: list[Action] = []
    twins = _Twins(tree) if tree is not None else None
    total = 0
    for item in items:
        try:
            path = check_path(item["path"], kind=item["kind"])
        except PapayuError as exc:
            errors.append(exc)
            continue
        action = _to_action(item, path)
        actions.append(action)
        total += utf8_size(action.content) if action.content else 0
        total += utf8_size(action.patch) if action.patch else 0
        errors.extend(_check_action(action, protocol, mode, read_files, tree, twins, protected))
    errors.extend(_check_conflicts(actions))
    if total > MAX_TOTAL_BYTES:
        errors.append(PapayuError("ERR_TOTAL_TOO_LARGE", f"{total} bytes of content (max {MAX_TOTAL_BYTES})"))
    return actions, errors


def _check_structure(data: Any, protocol: int) -> Any:
    """Depth, form, action count and schema; returns the raw actions."""
    if not json_depth_ok(data):  # before any recursive schema code sees it
        raise ValidationFailed(
            [PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", path="$")]
        )
    if protocol >= 2 and isinstance(data, list):
        raise ValidationFailed(
            [
                PapayuError(
                    "ERR_SCHEMA",
                    "protocol v2 accepts an object, not an array",
                    path="$",
                    hint='Wrap the actions: {"actions": [...], "summary": "..."}',
                )
            ]
        )
    items = raw_actions(data)
    if isinstance(items, list) and len(items) > MAX_ACTIONS:
        raise ValidationFailed([PapayuError("ERR_TOO_MANY_ACTIONS", f"{len(items)} actions (max {MAX_ACTIONS})")])
    problems = schema_errors(RESPONSE_SCHEMAS[protocol], data)
    if problems:
        raise ValidationFailed(problems)
    return items


def _check_memory(
    obj: Mapping[str, Any], protocol: int, errors: list[PapayuError]
) -> tuple[dict[str, Any], list[PapayuError]]:
    if "memory_patch" not in obj:
        return {}, []

    memory, unknown, wrong = check_memory_patch(obj.get("memory_patch", {}))
    errors.extend(wrong)
    if protocol >= 2:
        errors.extend(unknown)  # the upstream v2 schema closes memory_patch
        return memory, []
    return memory, unknown  # v1: keys outside the whitelist are dropped, with a warning


def validate_response(
    data: Any,
    *,
    protocol: int = 2,
    mode: Mode | str = Mode.APPLY,
    read_files: Mapping[str, str] | None = None,
    tree: TreeView | None = None,
    protected: Sequence[str] = DEFAULT_PROTECTED,
) -> Response:
    """Validate parsed JSON; return the Response or raise ValidationFailed with every problem.

    ``read_files`` (path -> sha256 of files shown in PLAN) enables the v1 UPDATE_FILE
    rule; ``tree`` enables the existence, symlink and submodule rules.
    """
    mode = coerce_mode(mode)
    if not isinstance(protocol, int) or protocol not in RESPONSE_SCHEMAS:
        raise PapayuError("ERR_USAGE", f"unknown protocol {protocol}", hint="Use --protocol 1 or 2.")
    items = _check_structure(data, protocol)
    actions, errors = _check_actions(items, protocol, mode, read_files, tree, protected)
    obj: Mapping[str, Any] = data if isinstance(data, dict) else {}
    summary = obj.get("summary", "") or ""
    context_requests = tuple(obj.get("context_requests") or ())
    # A response asking for more context is not a final APPLY answer (the LLM layer fulfils it).
    if mode is Mode.APPLY and not items and not context_requests and not summary.startswith(NO_CHANGES_PREFIX):
        errors.append(
            PapayuError(
                "ERR_EMPTY_APPLY",
                f"APPLY without actions needs a summary starting with '{NO_CHANGES_PREFIX}'",
                path="summary",
            )
        )
    # Two answers in one: a reader trusts the summary, the transaction would land the actions.
    if items and says_no_changes(summary):
        errors.append(
            PapayuError(
                "ERR_NO_CHANGES_WITH_ACTIONS",
                f"the summary starts with NO_CHANGES but the response carries {len(items)} action(s)",
                path="summary",
            )
        )
    memory, warnings = _check_memory(obj, protocol, errors)
    if errors:
        raise ValidationFailed(errors)
    proposed_raw = obj.get("proposed_changes")
    proposed: Mapping[str, Any] = proposed_raw if isinstance(proposed_raw, dict) else {}
    return Response(
        data=data,
        protocol=protocol,
        mode=mode,
        actions=tuple(actions),
        summary=summary,
        context_requests=context_requests,
        memory_patch=memory,
        questions=tuple(obj.get("questions") or ()),
        plan=tuple(obj.get("plan") or ()),
        risks=tuple(obj.get("risks") or ()),
        commands_to_run=tuple(obj.get("commands_to_run") or proposed.get("commands_to_run") or ()),
        warnings=tuple(warnings),
    )


def validate_text(text: str | bytes, **kwargs: Any) -> Response:
    """Parse a model answer (fence/prose tolerated) and validate it."""
    try:
        data = parse_json_text(text)
    except PapayuError as exc:
        raise ValidationFailed([exc]) from None
    return validate_response(data, **kwargs)
