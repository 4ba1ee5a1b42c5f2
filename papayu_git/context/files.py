"""FILE blocks from base blobs, and the refusal rule for paths (docs/DESIGN.md, "Context").

A path from a model request or a log is refused — never read, never sent — when it is outside
the repository, inside .git/, or protected (.env, keys, secrets/): the model gets a NOTE instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from papayu_git.context.basetree import MODE_GITLINK, MODE_SYMLINK, BaseTree, Blob, TreeEntry
from papayu_git.context.blocks import BlockKind, ContextBlock, note
from papayu_git.errors import PapayuError
from papayu_git.paths import check_path, is_protected

Range = tuple[int, int]  # 1-based, inclusive
EXCERPT_RADIUS = 80  # ±80 lines around a frame
DIR_LISTING_MAX = 200


def repo_relative(raw: str, repo_root: Path, protected: Sequence[str]) -> str:
    """The repo-relative path of ``raw`` or a PapayuError saying why it is refused."""
    text = raw.strip().replace("\\", "/")
    if text.startswith("file://"):
        text = text[len("file://") :]
    if text.startswith("/"):
        text = _inside_root(text, repo_root)
    while text.startswith("./"):
        text = text[2:]
    path = check_path(text.rstrip("/") or text)
    if is_protected(path, protected):
        raise PapayuError("ERR_PROTECTED_PATH", "protected path (secrets, keys, .env): not read, not sent", path=path)
    return path


def _inside_root(absolute: str, repo_root: Path) -> str:
    normal = os.path.normpath(absolute)
    for root in {str(repo_root), str(repo_root.resolve())}:
        if normal.startswith(root.rstrip("/") + "/"):
            return normal[len(root.rstrip("/")) + 1 :]
    raise PapayuError(
        "ERR_PATH_ABSOLUTE",
        "the path is outside the repository: not read, not sent",
        path=absolute if len(absolute) <= 80 else "..." + absolute[-77:],
    )


def refusal_note(what: str, error: PapayuError) -> ContextBlock:
    label = "invalid" if error.code == "ERR_CONTEXT_REQUEST_INVALID" else "refused"
    return note(label, f"{what}: {error.code}: {error.reason}. {error.hint}")


def merge_ranges(ranges: Sequence[Range], total_lines: int) -> list[Range]:
    clamped = sorted((max(1, a), min(total_lines, b)) for a, b in ranges if a <= b)
    merged: list[Range] = []
    for start, end in clamped:
        if start > end:
            continue
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def excerpt(text: str, ranges: Sequence[Range]) -> tuple[str, str]:
    """(body, detail) showing only ``ranges``; omitted stretches become `...[lines a-b omitted]...`."""
    lines = text.splitlines(keepends=True)
    merged = merge_ranges(ranges, len(lines))
    if not merged:
        asked = ", ".join(f"{a}-{b}" for a, b in ranges)
        return f"...[the file has {len(lines)} lines; lines {asked} are past its end]...", f"0 of {len(lines)} lines"
    if merged == [(1, len(lines))]:
        return text, ""
    parts: list[str] = []
    previous = 0
    for start, end in merged:
        if start > previous + 1:
            parts.append(f"...[lines {previous + 1}-{start - 1} omitted]...\n")
        chunk = "".join(lines[start - 1 : end])
        parts.append(chunk if chunk.endswith("\n") else chunk + "\n")
        previous = end
    if previous < len(lines):
        parts.append(f"...[lines {previous + 1}-{len(lines)} omitted]...\n")
    shown = ", ".join(f"{a}-{b}" for a, b in merged)
    return "".join(parts).rstrip("\n"), f"lines {shown} of {len(lines)}"


def file_block(
    blob: Blob, *, ranges: Sequence[Range] = (), priority: int, requested: bool, dirty: bool
) -> ContextBlock:
    text = blob.text()
    if text is None:
        body = f"...[BINARY: {len(blob.data)} bytes, binary or not UTF-8; content not shown]..."
        return ContextBlock(
            BlockKind.FILE, blob.path, body, priority, blob.path, blob.sha256, requested, dirty=dirty, binary=True
        )
    body, detail = excerpt(text, ranges) if ranges else (text, "")
    return ContextBlock(
        BlockKind.FILE, blob.path, body, priority, blob.path, blob.sha256, requested, dirty=dirty, detail=detail
    )


def entry_note(tree: BaseTree, path: str, entry: TreeEntry | None) -> ContextBlock:
    """Why a path yields no FILE block: missing, a directory (listed), a symlink, a submodule."""
    short = tree.base[:12]
    if entry is None:
        exists = (tree.repo_root / path).exists()
        extra = " (it exists only in the working tree, uncommitted; not sent)" if exists else ""
        return note("missing", f"{path}: not found in the base commit {short}{extra}")
    if entry.mode == MODE_SYMLINK:
        target = tree.blobs([entry]).get(path)
        where = target.data.decode("utf-8", "replace") if target else "?"
        return note("symlink", f"{path}: a symbolic link to {where!r}; request the target path instead")
    if entry.mode == MODE_GITLINK:
        return note("submodule", f"{path}: a git submodule; its files are not part of this repository")
    names = [p for p in tree.all_paths() if p.startswith(path + "/")]
    listing = "\n".join(names[:DIR_LISTING_MAX])
    more = f"\n...[{len(names) - DIR_LISTING_MAX} more files]..." if len(names) > DIR_LISTING_MAX else ""
    return note("directory", f"{path}/ is a directory with {len(names)} files:\n{listing}{more}")
