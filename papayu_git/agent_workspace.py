"""The agent's private view of the tip (docs/DESIGN.md, "Agent mode").

An in-memory overlay {path: new bytes | None (deleted)} over the tip's tree: reads see it, the
user's branch, index and working tree never do. `apply_diff` is the only way in: a multi-file
unified diff is split per file, every file is dry-run with the tolerant engine of PATCH_FILE
(apply.new_file_contents) and the whole result is validated like a plan against the tip, before
any file of it lands in the overlay. At the end the overlay becomes a plan's actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from papayu_git.apply import new_file_contents, sha256_hex
from papayu_git.errors import PapayuError
from papayu_git.objects import (
    MODE_TREE,
    GitTree,
    TreeChanges,
    build_tree,
    commit_message,
    commit_of,
    create_commit,
)
from papayu_git.paths import check_path
from papayu_git.protocol import Action, ActionKind, Mode, Response
from papayu_git.unified_diff import parse_hunks, split_files
from papayu_git.validate import validate_response

if TYPE_CHECKING:
    import pygit2

PROTOCOL = 1  # whole-file actions with bases recorded in plan.files (docs/DESIGN.md, "Agent mode")


@dataclass(frozen=True)
class Change:
    status: str  # A added | M modified | D deleted
    path: str


class Workspace:
    def __init__(self, repo: pygit2.Repository, tip: str, protected: Sequence[str], *, normalize_eol: bool = False):
        self.repo, self.tip, self.protected, self.normalize_eol = repo, tip, tuple(protected), normalize_eol
        self.base = GitTree(repo, commit_of(repo, tip).tree)
        self.overlay: dict[str, bytes | None] = {}
        self.version = 0  # bumped on every change: run_tests reuses the commit of an unchanged overlay
        self._paths: list[str] | None = None
        self._commit: tuple[int, str] | None = None

    # --- reading ------------------------------------------------------------------------
    def read(self, path: str) -> bytes | None:
        """A regular file's bytes as the agent sees them; None when absent, deleted or not a file."""
        if path in self.overlay:
            return self.overlay[path]
        return self.base.read_blob(path)

    def kind(self, path: str) -> str | None:
        """file | dir | link | submodule | None, overlay first."""
        if path in self.overlay:
            return "file" if self.overlay[path] is not None else None
        kind = self.base.entry_kind(path)
        if kind is None and any(p.startswith(path + "/") for p, data in self.overlay.items() if data is not None):
            return "dir"
        return kind

    def tip_paths(self) -> list[str]:
        """Every file path of the tip, sorted (walked once)."""
        if self._paths is None:
            out: list[str] = []
            stack: list[tuple[str, Any]] = [("", self.base.tree)]
            while stack:
                prefix, tree = stack.pop()
                for child in tree:
                    path = prefix + child.name
                    if child.filemode == MODE_TREE:
                        stack.append((path + "/", self.repo[child.id]))
                    else:
                        out.append(path)
            self._paths = sorted(out)
        return self._paths

    def paths(self) -> list[str]:
        """Every file path the agent sees: the tip's, minus deletions, plus new files."""
        if not self.overlay:
            return self.tip_paths()
        added = [p for p, data in self.overlay.items() if data is not None and self.base.entry_kind(p) is None]
        gone = {p for p, data in self.overlay.items() if data is None}
        return sorted([p for p in self.tip_paths() if p not in gone] + added)

    def status(self, path: str) -> str:
        if path not in self.overlay:
            return ""
        if self.overlay[path] is None:
            return "D"
        return "M" if self.base.entry_kind(path) is not None else "A"

    # --- changing -------------------------------------------------------------------------
    def apply_diff(self, diff: str) -> list[Change]:
        """Apply a multi-file unified diff all or nothing; raise the first file's ERR_* otherwise."""
        sections = split_files(diff)
        if not sections:
            raise PapayuError("ERR_PATCH_NOT_UNIFIED", "the diff has no '--- a/PATH' / '+++ b/PATH' file header")
        staged = dict(self.overlay)
        seen: set[str] = set()
        changes = []
        for section in sections:
            path, status = self._target(section.old, section.new)
            if path in seen:
                raise PapayuError("ERR_ACTION_CONFLICT", "the diff changes this file twice", path=path)
            seen.add(path)
            staged[path] = self._new_bytes(section, path, status, staged)
            changes.append(Change(status, path))
        self._validate(staged)
        for path in seen:
            self._set(path, staged[path])
        self.version += 1
        return changes

    def _target(self, old: str | None, new: str | None) -> tuple[str, str]:
        if old is None and new is None:
            raise PapayuError("ERR_PATCH_UNSUPPORTED", "a file section without file names (or /dev/null on both sides)")
        if old is not None and new is not None and old != new:
            raise PapayuError(
                "ERR_PATCH_UNSUPPORTED",
                f"the diff renames {old} to {new}",
                path=new,
                hint="Delete the old file (+++ /dev/null) and create the new one (--- /dev/null) instead.",
            )
        path = check_path(new if new is not None else old)
        return path, "A" if old is None else "D" if new is None else "M"

    def _new_bytes(self, section: Any, path: str, status: str, staged: dict[str, bytes | None]) -> bytes | None:
        def current(p: str) -> bytes | None:
            return staged[p] if p in staged else self.base.read_blob(p)

        exists = (staged[path] is not None) if path in staged else self.base.entry_kind(path) is not None
        if status == "A":
            if exists:
                raise PapayuError("ERR_CREATE_EXISTS", "--- /dev/null creates a file that already exists", path=path)
            hunks = parse_hunks(section.text, path=path)
            if any(dl.tag != "+" for h in hunks for dl in h.lines):
                raise PapayuError("ERR_PATCH_NOT_UNIFIED", "a new file's hunks may only add lines ('+')", path=path)
            lines = [dl.text + ("\r\n" if dl.crlf else "\n") for h in hunks for dl in h.lines]
            text = "".join(lines)
            if hunks and hunks[-1].new_no_eol:
                text = text.rstrip("\r\n")
            action = Action(ActionKind.CREATE_FILE, path, content=text)
            return new_file_contents([action], current, normalize_eol=self.normalize_eol)[path]
        original = current(path)
        if original is None:
            what = "a directory, link or submodule" if exists else "missing"
            raise PapayuError("ERR_PATCH_MISSING_FILE", f"the diff changes a file that is {what}", path=path)
        if status == "D":
            _check_whole_removal(section.text, original, path)
            return None
        action = Action(ActionKind.PATCH_FILE, path, patch=section.text, base_sha256=sha256_hex(original))
        return new_file_contents([action], current, normalize_eol=self.normalize_eol)[path]

    def _validate(self, staged: dict[str, bytes | None]) -> None:
        """The result must pass what the final plan will pass (paths, protected, .papa-yu, tree
        rules, sizes), so that an accepted patch never turns into a refused plan."""
        data, files = self._response_data(staged, "agent workspace")
        validate_response(
            data, protocol=PROTOCOL, mode=Mode.APPLY, read_files=files, tree=self.base, protected=self.protected
        )

    def _set(self, path: str, data: bytes | None) -> None:
        tip = self.base.read_blob(path)
        unchanged = data == tip if data is not None else self.base.entry_kind(path) is None
        if unchanged and (data is None or tip is not None):
            self.overlay.pop(path, None)
        else:
            self.overlay[path] = data

    # --- the result -------------------------------------------------------------------------
    def _response_data(self, overlay: dict[str, bytes | None], summary: str) -> tuple[dict[str, Any], dict[str, str]]:
        actions: list[dict[str, Any]] = []
        files: dict[str, str] = {}
        for path in sorted(overlay):
            data = overlay[path]
            tip = self.base.read_blob(path)
            if tip is not None:
                files[path] = sha256_hex(tip)  # the base the transaction compares with the tip
            if data is None:
                actions.append({"kind": "DELETE_FILE", "path": path})
                continue
            text = _text(data, path)
            kind = "UPDATE_FILE" if self.base.entry_kind(path) is not None else "CREATE_FILE"
            actions.append({"kind": kind, "path": path, "content": text})
        return {"summary": summary, "actions": actions}, files

    def response(self, summary: str) -> tuple[Response, dict[str, str]]:
        """The overlay as a validated APPLY response (v1, whole files) and its bases."""
        data, files = self._response_data(self.overlay, summary)
        return validate_response(data, protocol=PROTOCOL, mode=Mode.APPLY, read_files=files), files

    def changes(self) -> TreeChanges:
        return TreeChanges(
            writes={p: d for p, d in self.overlay.items() if d is not None},
            delete_files=frozenset(p for p, d in self.overlay.items() if d is None),
        )

    def commit(self, plan_id: str) -> str:
        """A commit of the overlay on the tip; no ref points at it (run_tests checks it out)."""
        if self._commit is None or self._commit[0] != self.version:
            tree = build_tree(self.base, self.changes())
            message = commit_message(f"papayu agent workspace {plan_id}", plan_id, plan_id)
            self._commit = (self.version, create_commit(self.repo, tree, self.tip, message))
        return self._commit[1]


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PapayuError("ERR_NON_UTF8_FILE", "the new content is not UTF-8", path=path) from None


def _check_whole_removal(section: str, original: bytes, path: str) -> None:
    """`+++ /dev/null` deletes the file; hunks, when given, must remove exactly its lines."""
    rows = section.split("\n")
    first = next((i for i, row in enumerate(rows) if row.startswith("@@")), None)
    if first is None:
        return
    removed = [row[1:].rstrip("\r") for row in rows[first:] if row.startswith("-")]
    text = original.decode("utf-8", "replace")
    if [line.rstrip() for line in removed] != [line.rstrip() for line in text.splitlines()]:
        raise PapayuError(
            "ERR_PATCH_APPLY_FAILED",
            "the deletion's '-' lines are not the file's content",
            path=path,
            hint="To delete a file send '--- a/PATH' and '+++ /dev/null' with no hunk, or with every line removed.",
        )
