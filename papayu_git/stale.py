"""Stale plans: an edit whose base is no longer the file at the tip lands by a 3-way merge
(docs/DESIGN.md, "The transaction and its guarantees").

A plan is written against the blobs the model saw. When the user commits after planning,
the base sha256 of an edit no longer matches the tip. The blob the model saw is looked up
(at the plan's recorded base commit, else in the path's recent history), the edit is made
on it, and the result is merged base -> tip -> edited with `git merge-file` on temporary
files outside the repository: nothing is written to the user's work tree, index, refs or
object store before the commit. A conflict, or a base found nowhere, is ERR_BASE_MISMATCH.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from papayu_git import settings
from papayu_git.apply import sha256_hex
from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.git import run_git
from papayu_git.objects import MODE_EXEC, MODE_FILE

if TYPE_CHECKING:
    import pygit2

MAX_NAMED_RANGES = 6


class Base(NamedTuple):
    """The version of ``path`` a plan was written against, found in the history."""

    path: str
    blob: str  # its blob id
    commit: str  # a commit whose tree holds it at ``path`` (the plan's base commit when it does)
    data: bytes

    def record(self) -> dict[str, str]:
        """What the trace, the plan's outcome and --json say: rebased from this base."""
        return {"path": self.path, "base_blob": self.blob, "base_commit": self.commit}


def enabled(workdir: str | None) -> bool:
    return settings.get_bool("stale_rebase", workdir)


class BaseFinder:
    """Finds the blob with a given sha256 at a path: at ``hint`` (the plan's base commit),
    else among the versions the path took in the last ``depth`` commits reachable from ``tip``."""

    def __init__(self, repo: pygit2.Repository, tip: str, hint: str, depth: int) -> None:
        self.repo, self.tip, self.hint, self.depth = repo, tip, hint, max(depth, 0)
        self._walked: list[pygit2.Commit] | None = None  # one walk for every stale path of a plan

    def find(self, path: str, sha256: str) -> Base | None:
        tip = self._commit(self.tip)
        at_tip = self._blob_at(tip, path) if tip is not None else None
        seen = {at_tip} if at_tip else set()  # the caller found it differs
        for commit in self._commits():
            oid = self._blob_at(commit, path)
            if oid is None or oid in seen:
                continue
            seen.add(oid)
            data = bytes(self.repo[oid].data)  # type: ignore[attr-defined]
            if sha256_hex(data) == sha256:
                return Base(path, oid, str(commit.id), data)
        return None

    def _commits(self) -> Iterator[pygit2.Commit]:
        """The hint first, then the tip's history, newest first (parents after children)."""
        import pygit2

        hinted = self._commit(self.hint) if self.hint else None
        if hinted is not None:
            yield hinted
        if self._walked is None:
            walker = self.repo.walk(self.tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
            self._walked = list(itertools.islice(walker, self.depth))
        yield from self._walked

    def _commit(self, rev: str) -> pygit2.Commit | None:
        import pygit2

        try:
            return self.repo[rev].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return None  # e.g. a plan recorded in another clone

    @staticmethod
    def _blob_at(commit: pygit2.Commit, path: str) -> str | None:
        try:
            entry = commit.tree[path]
        except KeyError:
            return None
        return str(entry.id) if entry.filemode in (MODE_FILE, MODE_EXEC) else None


def finder(repo: pygit2.Repository, tip: str, hint: str) -> BaseFinder | None:
    """The finder for ``prepare``, or None when papayu.stale.rebase is off (a stale base is then
    refused as it always was)."""
    if not enabled(repo.workdir):
        return None
    return BaseFinder(repo, tip, hint, settings.get_int("stale_search_depth", repo.workdir))


def reading(read_blob: Callable[[str], bytes | None], bases: Mapping[str, Base]) -> Callable[[str], bytes | None]:
    """``read_blob`` that answers the stale paths with the version the plan was written against,
    so that the edit is made where the model made it."""

    def read(path: str) -> bytes | None:
        base = bases.get(path)
        return base.data if base is not None else read_blob(path)

    return read


def _normalized(data: bytes) -> bytes:
    """PAPAYU_NORMALIZE_EOL=lf on bytes (apply.normalize_eol_text), also for non-UTF-8 tips."""
    data = data.replace(b"\r\n", b"\n")
    return data if not data or data.endswith(b"\n") else data + b"\n"


def merged(
    writes: Mapping[str, bytes],
    bases: Mapping[str, Base],
    read_tip: Callable[[str], bytes | None],
    *,
    normalize_eol: bool = False,
) -> dict[str, bytes]:
    """``writes`` with each stale path merged base -> tip -> edited; every conflict raised at once."""
    out = dict(writes)
    errors = []
    for path, base in bases.items():
        tip = read_tip(path)
        if tip is None or path not in out:
            continue
        ancestor = _normalized(base.data) if normalize_eol else base.data
        ours = _normalized(tip) if normalize_eol else tip
        try:
            out[path] = merge3(ancestor, ours, out[path], path=path, origin=base.commit[:12])
        except PapayuError as exc:
            errors.append(exc)
    if errors:
        raise ValidationFailed(errors)
    return out


def merge3(ancestor: bytes, tip: bytes, edited: bytes, *, path: str, origin: str = "") -> bytes:
    """``edited`` (made on ``ancestor``) merged with what the tip changed since ``ancestor``, by
    `git merge-file` (git's own rules: changes on the same or adjacent lines conflict).
    A conflict is ERR_BASE_MISMATCH naming the tip's lines; ``origin`` names the base in it."""
    import tempfile  # only a stale edit needs it: ~1.5 ms of imports every apply would pay

    with tempfile.TemporaryDirectory(prefix="papayu-merge-") as tmp:
        for name, data in (("tip", tip), ("base", ancestor), ("plan", edited)):
            (Path(tmp) / name).write_bytes(data)
        proc = run_git(["merge-file", "-p", "tip", "base", "plan"], cwd=tmp, check=False, text=False)
    if proc.returncode == 0:
        return bytes(proc.stdout)
    since = f" since {origin}" if origin else ""
    if not 0 < proc.returncode < 128:  # git refused to merge (a binary file, say)
        said = (proc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"git merge-file exited {proc.returncode}"
        reason = f"the file changed at the branch tip{since} and the 3-way merge is impossible: {why}"
    else:
        where = describe(conflict_ranges(ancestor, tip, edited))
        reason = f"the file changed at the branch tip{since} on lines the plan also changes: {where}"
    raise PapayuError(
        "ERR_BASE_MISMATCH",
        reason,
        path=path,
        hint="Re-read the file (new PLAN) and use the new sha256 as base_sha256.",
    )


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def conflict_ranges(ancestor: bytes, tip: bytes, edited: bytes) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of the tip that the tip changed next to or over a change of
    the edit, both measured from ``ancestor`` (the same rule as git's: touching changes conflict).
    Only for naming a conflict: the merge itself is git's."""
    import difflib  # only a conflict needs it

    base = _lines(ancestor)
    ours = difflib.SequenceMatcher(None, base, _lines(tip), autojunk=False).get_opcodes()
    theirs = difflib.SequenceMatcher(None, base, _lines(edited), autojunk=False).get_opcodes()
    changed = [(i1, i2) for tag, i1, i2, _j1, _j2 in theirs if tag != "equal"]
    ranges: list[tuple[int, int]] = []
    size = len(_lines(tip))
    for tag, i1, i2, j1, j2 in ours:
        if tag == "equal" or not any(i1 <= k2 and k1 <= i2 for k1, k2 in changed):
            continue
        # Lines the tip deleted have no number there: name the line after the gap (or the last).
        first, last = (j1 + 1, j2) if j2 > j1 else (min(j1 + 1, max(size, 1)),) * 2
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def describe(ranges: list[tuple[int, int]]) -> str:
    if not ranges:
        return "the conflicting lines could not be located"
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:MAX_NAMED_RANGES])
    more = f" and {len(ranges) - MAX_NAMED_RANGES} more" if len(ranges) > MAX_NAMED_RANGES else ""
    return ("line " if ranges == [(ranges[0][0], ranges[0][0])] else "lines ") + shown + more + " at the tip"
