"""Bounds on the check's processes (docs/DESIGN.md, "The check's environment")."""

from __future__ import annotations

import os
from pathlib import Path

from papayu_git import settings


def limits_prefix(repo_root: Path) -> str:
    """Shell words that bound each of the check's processes before its command runs: data
    segment, file size, no core dumps (soft and hard: the check cannot raise them again). Set
    by the check's own shell, so papayu keeps spawning it the fast way (no preexec hook)."""
    memory_mb = settings.get_int("check_memory_mb", str(repo_root))
    if memory_mb <= 0:
        memory_mb = max(512, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (2 * 1024 * 1024))
    file_mb = max(settings.get_int("check_tmp_mb", str(repo_root)), 16)
    # -d is in KiB; -f in 512-byte blocks for dash (1 KiB for bash: a bound twice as loose).
    return (
        f"ulimit -c 0 2>/dev/null; ulimit -d {memory_mb * 1024} 2>/dev/null; ulimit -f {file_mb * 2048} 2>/dev/null; "
    )
