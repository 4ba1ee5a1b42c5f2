"""Generated documentation: the reference tables, the README's key settings and the man page.

`python -m papayu_git.docs --write` rewrites the marked regions (`<!-- NAME:BEGIN -->` …
`<!-- NAME:END -->`) of docs/REFERENCE.md (every error code, limit, setting and memory key) and
README.md (the key settings), and `man/git-papayu.1` (which git shows for `git papayu --help`);
`--check` exits 1 when any of them is out of date. Given paths, only those documents are rendered,
by the regions their file name holds. tests/test_docs.py runs the check, so adding an error code,
a setting or a command means regenerating.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from papayu_git import __version__
from papayu_git.cli import LAZY_COMMANDS
from papayu_git.errors import ERROR_CODES
from papayu_git.memory import MEMORY_WHITELIST, git_config_key
from papayu_git.paths import MAX_PATH_LEN
from papayu_git.protocol import MAX_INPUT_BYTES, MAX_INT_DIGITS, MAX_JSON_DEPTH
from papayu_git.settings import SECTIONS, SETTINGS
from papayu_git.validate import MAX_ACTIONS, MAX_FILE_BYTES, MAX_TOTAL_BYTES, PSEUDO_BINARY_RATIO

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "REFERENCE.md"
MAN_PAGE = ROOT / "man" / "git-papayu.1"

# The settings a user of the README meets first; the rest are in the reference.
KEY_SETTINGS = (
    "llm_provider",
    "llm_base_url",
    "llm_model",
    "llm_api_key",
    "llm_timeout_sec",
    "llm_max_tokens",
    "check_command",
    "check_timeout_sec",
    "check_sandbox",
    "protected_paths",
    "trace_enabled",
    "log",
)


class Limit(NamedTuple):
    what: str
    value: str
    code: str


def limits() -> list[Limit]:
    mib = 1024 * 1024
    return [
        Limit("path length", f"{MAX_PATH_LEN} characters", "ERR_PATH_TOO_LONG"),
        Limit("actions per response", str(MAX_ACTIONS), "ERR_TOO_MANY_ACTIONS"),
        Limit(
            "content of one file (or one patch)",
            f"{MAX_FILE_BYTES // mib} MiB ({MAX_FILE_BYTES} bytes)",
            "ERR_FILE_TOO_LARGE",
        ),
        Limit(
            "all contents and patches together",
            f"{MAX_TOTAL_BYTES // mib} MiB ({MAX_TOTAL_BYTES} bytes)",
            "ERR_TOTAL_TOO_LARGE",
        ),
        Limit("non-printable characters in a content", f"{PSEUDO_BINARY_RATIO:.0%}", "ERR_PSEUDO_BINARY"),
        Limit("NUL bytes in a content", "0", "ERR_CONTENT_NUL"),
        Limit("size of a response or file read", f"{MAX_INPUT_BYTES // mib} MiB", "ERR_INPUT_TOO_LARGE"),
        Limit("JSON nesting depth", f"{MAX_JSON_DEPTH} levels", "ERR_JSON_TOO_DEEP"),
        Limit("digits of a JSON integer", f"{MAX_INT_DIGITS:,}", "ERR_JSON_NUMBER_TOO_LARGE"),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def error_table() -> str:
    rows = ["| code | meaning | repair hint (also sent to the model) |", "|---|---|---|"]
    rows += [f"| `{code}` | {_cell(spec.meaning)} | {_cell(spec.hint)} |" for code, spec in ERROR_CODES.items()]
    return "\n".join(rows)


def limits_table() -> str:
    rows = ["| limit | value | error code |", "|---|---|---|"]
    rows += [f"| {_cell(lim.what)} | {lim.value} | `{lim.code}` |" for lim in limits()]
    return "\n".join(rows)


def settings_table() -> str:
    """Every setting (settings.SETTINGS) and every family of keys the user names (SECTIONS), with
    the names they had, which still work with a notice."""
    rows = ["| git config | env var | default | meaning | formerly |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        key = f"`{s.key}`" if s.git else "(environment only)"
        rows.append(f"| {key} | `{s.env}` | `{s.default}` | {_cell(s.meaning)} | {_names(s.old)} |")
    for section in SECTIONS:
        old = _names(tuple(f"{p}<name>" for p in section.old))
        rows.append(f"| `{section.prefix}<name>` | - | | {_cell(section.meaning)} | {old} |")
    return "\n".join(rows)


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def key_settings_table() -> str:
    by_name = {s.name: s for s in SETTINGS}
    rows = ["| git config | env var | default | meaning |", "|---|---|---|---|"]
    for name in KEY_SETTINGS:
        s = by_name[name]
        default = f"`{s.default}`" if s.default else ""
        key = f"`{s.key}`" if s.git else "(environment only)"
        rows.append(f"| {key} | `{s.env}` | {default} | {_cell(s.meaning)} |")
    return "\n".join(rows)


def memory_table() -> str:
    rows = ["| key | type | file | git config override |", "|---|---|---|---|"]
    for key, kind in MEMORY_WHITELIST.items():
        where = "preferences.json" if key.startswith("user.") else ".papa-yu/project.json"
        rows.append(f"| `{key}` | {kind} | {where} | `{git_config_key(key)}` |")
    return "\n".join(rows)


REGIONS: dict[str, Callable[[], str]] = {
    "ERROR-TABLE": error_table,
    "LIMITS-TABLE": limits_table,
    "SETTINGS-TABLE": settings_table,
    "MEMORY-TABLE": memory_table,
    "KEY-SETTINGS": key_settings_table,
}
# Which regions each generated document holds, by file name.
DOCUMENTS: dict[str, tuple[str, ...]] = {
    REFERENCE.name: ("ERROR-TABLE", "LIMITS-TABLE", "SETTINGS-TABLE", "MEMORY-TABLE"),
    README.name: ("KEY-SETTINGS",),
}


def _framed(body: str, match: re.Match[str]) -> str:
    return match.group(1) + body + "\n" + match.group(2)


def render(text: str, regions: tuple[str, ...], document: str = "the document") -> str:
    """``text`` with each of ``regions`` replaced by its generated table."""
    for name in regions:
        pattern = re.compile(rf"(<!-- {name}:BEGIN -->\n).*?(<!-- {name}:END -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{document} has no <!-- {name}:BEGIN --> ... <!-- {name}:END --> region")
        # A function, not a replacement string: the table may hold backslashes re.sub would expand.
        text = pattern.sub(functools.partial(_framed, REGIONS[name]()), text)
    return text


def render_reference(text: str) -> str:
    return render(text, DOCUMENTS[REFERENCE.name], REFERENCE.name)


def render_readme(text: str) -> str:
    return render(text, DOCUMENTS[README.name], README.name)


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.splitlines())


def man_page() -> str:
    """roff for `man git-papayu`: git turns `git papayu --help` into `git help papayu`."""
    out = [
        f'.TH GIT\\-PAPAYU 1 "" "papayu\\-git {__version__}" "Git Manual"',
        ".SH NAME",
        "git\\-papayu \\- plans from a language model land as commits only when the check passes",
        ".SH SYNOPSIS",
        ".B git papayu",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".br",
        "Also installed as \\fBpapayu\\fR and \\fBpython \\-m papayu_git\\fR.",
        ".SH DESCRIPTION",
        _roff(
            "papayu-git asks a language model for a fix plan in a strict JSON protocol, validates it, "
            "commits it in a temporary git worktree, runs the project's check there and fast-forwards "
            "your branch only if the check passes. Your branch, index and working tree are untouched "
            "otherwise. Run 'git papayu COMMAND -h' for the options of a command."
        ),
        ".SH COMMANDS",
    ]
    for name in sorted(LAZY_COMMANDS):
        out += [".TP", f"\\fB{_roff(name)}\\fR", _roff(LAZY_COMMANDS[name][1])]
    out += [
        ".SH EXIT STATUS",
        ".TP",
        "0",
        "success",
        ".TP",
        "1",
        _roff("a failure with an ERR_... code and a hint (validation error, check failed, ...)"),
        ".TP",
        "2",
        "usage error",
        ".TP",
        "3",
        "internal bug",
        ".TP",
        "130",
        "interrupted",
        ".SH ENVIRONMENT",
    ]
    for setting in SETTINGS:
        if setting.env:
            git_key = f" (git config {setting.git_key})" if setting.git_key else ""
            formerly = f"; formerly {', '.join(setting.old)}" if setting.old else ""
            out += [
                ".TP",
                f"\\fB{_roff(setting.env)}\\fR",
                _roff(f"{setting.meaning}{git_key}; default '{setting.default}'{formerly}"),
            ]
    out += [".SH SEE ALSO", _roff("docs/REFERENCE.md of papayu-git: error codes, limits and settings tables."), ""]
    return "\n".join(out)


def _outputs(paths: list[Path]) -> dict[Path, str]:
    """Each document rendered by the regions its name holds; no paths: the repository's own, and
    the man page."""
    outputs = {}
    for path in paths or [REFERENCE, README]:
        if path.name not in DOCUMENTS:
            raise SystemExit(f"{path}: not a generated document (one of {', '.join(DOCUMENTS)})")
        outputs[path] = render(path.read_text(encoding="utf-8"), DOCUMENTS[path.name], str(path))
    if not paths:
        outputs[MAN_PAGE] = man_page()
    return outputs


def main(argv: list[str]) -> int:
    write = "--write" in argv
    stale = []
    for path, text in _outputs([Path(a) for a in argv if not a.startswith("--")]).items():
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(path)
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'updated' if write else 'out of date'}: {path}", file=sys.stderr)
    if stale and not write:
        print("run: python -m papayu_git.docs --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
