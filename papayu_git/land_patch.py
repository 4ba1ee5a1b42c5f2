"""The patch a fast-forward applies to the user's work tree and index (docs/DESIGN.md, "Landing").

Each touched file's whole content is taken out and the new content put in: one hunk without
context, which `git apply` may only place at the top of a file exactly that long, so it refuses a
file that differs from the tip's in any way. Written here from the blobs, it saves landing a
`git diff-tree` (~8 ms at 50k files). Binary files, symlinks and paths git would quote are left
to that diff (None).
"""

from __future__ import annotations

import re

from papayu_git.object_store import ObjectStore
from papayu_git.objects import MODE_EXEC, MODE_FILE, Change

# Printable ASCII but space, `"` and `\`: what git writes unquoted and without a trailing tab.
_PLAIN_PATH = re.compile(r"[!#-\[\]-~]+")
_NO_NEWLINE = b"\n\\ No newline at end of file\n"


def whole_file_patch(store: ObjectStore, changes: list[Change]) -> bytes | None:
    """The patch of ``changes`` (changed regular files; objects.changed_entries), or None when a
    change needs git's own diff."""
    parts = []
    for path, before, after in changes:
        entries = [e for e in (before, after) if e is not None]
        if not _PLAIN_PATH.fullmatch(path) or any(e.filemode not in (MODE_FILE, MODE_EXEC) for e in entries):
            return None
        old = store.read(before.id)[1] if before is not None else b""
        new = store.read(after.id)[1] if after is not None else b""
        if b"\0" in old or b"\0" in new:  # binary to git: only its binary patch carries it
            return None
        name = path.encode()
        header = [b"diff --git a/%s b/%s\n" % (name, name)]
        if before is None:
            header.append(b"new file mode %o\n" % entries[0].filemode)
        elif after is None:
            header.append(b"deleted file mode %o\n" % before.filemode)
        elif before.filemode != after.filemode:
            header.append(b"old mode %o\nnew mode %o\n" % (before.filemode, after.filemode))
        parts += header
        if old != new:  # else a mode change, or an empty file created or deleted: the header says all
            parts.append(b"--- %s\n" % (b"a/" + name if before is not None else b"/dev/null"))
            parts.append(b"+++ %s\n" % (b"b/" + name if after is not None else b"/dev/null"))
            parts.append(_hunk(old, new))
    return b"".join(parts)


def _hunk(old: bytes, new: bytes) -> bytes:
    removed, added = _lines(old), _lines(new)
    lines = [b"@@ -%s +%s @@\n" % (_range(len(removed)), _range(len(added)))]
    lines += [_line(b"-", text) for text in removed]
    lines += [_line(b"+", text) for text in added]
    return b"".join(lines)


def _lines(data: bytes) -> list[bytes]:
    """Lines as git counts them: ended by a newline only (a lone carriage return is text)."""
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _line(sign: bytes, text: bytes) -> bytes:
    return sign + text if text.endswith(b"\n") else sign + text + _NO_NEWLINE


def _range(count: int) -> bytes:
    return b"0,0" if count == 0 else b"1" if count == 1 else b"1,%d" % count
