"""The user's toolchains, as the check sees them: read-only, and only their installations
(docs/DESIGN.md, "The check's environment").

A directory on PATH brings its tool's installation with it: a `bin` comes with its parent when
that parent is an installation prefix (nothing in it but an installation's layout: `lib`,
`share`, `include`, a Go root's `src`, license and version files), else with only those layout
entries of it. A tool's home is often more than an installation: `~/.fly` keeps a token in
`config.yml` beside `bin`, `~/.pulumi` its `credentials.json`, Rancher Desktop's `~/.rd` a Docker
socket; none of that is layout, so none of it is mounted. The interpreter a project virtualenv
was made from comes from its `pyvenv.cfg`, which the project's files could name: it is mounted
only when it really is a Python installation. Nothing mounted is ever HOME, a parent of it, or a
directory holding a credential file of credential_files.py's table.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from papayu_git.check.credential_files import holds_credentials

BIN_NAMES = frozenset({"bin", "sbin", "shims"})
# An installation's layout: what a prefix (/usr/local, a Go root, a JDK, a Node or Python build,
# a rustup toolchain, a version manager's root) holds besides its programs.
LAYOUT_DIRS = frozenset(
    {
        *("bin", "sbin", "shims", "lib", "lib32", "lib64", "libx32", "libexec", "include", "share", "man"),
        *("etc", "conf", "doc", "docs", "api", "misc", "test", "pkg", "src", "jmods", "legal", "boot"),
        *("modules", "plugins", "completions", "versions", "ssl", "conda-meta", "condabin"),
    }
)
LAYOUT_FILES = frozenset({"release", "go.env", "codereview.cfg", "pyvenv.cfg"})
_DOC_FILE = re.compile(
    r"(readme|licen[cs]e|copying|notice|version|changelog|changes|history|news|patents|security|contributing"
    r"|contributors|authors|maintainers|conduct|code_of_conduct|third[-_]?party[-_a-z]*)([-._].*)?",
    re.IGNORECASE,
)
# Toolchain homes named by the environment: whole, as the user named them.
TOOL_VARS = ("VIRTUAL_ENV", "CONDA_PREFIX", "JAVA_HOME", "GOROOT", "RUSTUP_HOME")
MAX_ENTRIES = 256  # a tool directory with more is no installation prefix (and is read no further)


def wanted(env: dict[str, str], home: Path, venvs: list[Path]) -> list[Path]:
    """Every toolchain path the check should see, unchecked: PATH's tools, the tools symlinked
    into HOME's and /usr/local's PATH directories, TOOL_VARS, papayu's own interpreter, and the
    base interpreters of the project virtualenvs ``venvs``."""
    out: list[Path] = []
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            path = Path(entry)
            out += tool_dirs(path, home)
            if any(root in path.parents for root in (home, Path("/usr/local"), Path("/opt"))):
                out += link_targets(path, home)
    out += [Path(env[name]) for name in TOOL_VARS if env.get(name) and os.path.isabs(env[name])]
    out += [Path(sys.base_prefix), Path(sys.prefix)]
    for venv in venvs:
        out += venv_interpreters(venv)
    return out


def allowed(path: Path, home: Path) -> bool:
    """Never the root, HOME or a parent of it, /tmp or /run (sockets), or what holds credentials."""
    if path in (Path("/"), Path("/tmp"), Path("/run"), home) or path in home.parents:
        return False
    return not holds_credentials(path, home)


def tool_dirs(entry: Path, home: Path) -> list[Path]:
    """What a PATH entry brings: itself; for a `bin` (`sbin`, `shims`) in a tool's directory, the
    tool's installation prefix, or the layout entries of that directory when it is more than one."""
    parent = entry.parent
    if entry.name not in BIN_NAMES or len(entry.parts) <= 2 or parent == home or parent in home.parents:
        return [entry]
    if parent == home / ".local":  # XDG's user prefix: its share/ is every application's data
        return [entry]
    entries = _entries(parent, MAX_ENTRIES + 1)
    if entries is None:
        return [entry]
    workspace = (parent / "pkg" / "mod").is_dir()  # a GOPATH: its src/ is the user's code
    layout = [Path(e.path) for e in entries if _layout_entry(e, go_workspace=workspace)]
    if len(layout) == len(entries) <= MAX_ENTRIES and allowed(parent, home):
        return [parent]
    return [entry, *(p for p in layout if p != entry)]


def _entries(directory: Path, most: int = MAX_ENTRIES) -> list[os.DirEntry[str]] | None:
    """The first ``most`` entries of ``directory``; None when it cannot be read."""
    try:
        with os.scandir(directory) as scan:
            return [e for _, e in zip(range(most), scan, strict=False)]
    except OSError:
        return None


def _layout_entry(entry: os.DirEntry[str], *, go_workspace: bool) -> bool:
    try:
        if entry.is_dir():  # a symlink to a directory too (a JDK's conf -> /etc/java-17)
            return (entry.name in LAYOUT_DIRS or entry.name.endswith(".d")) and not (
                go_workspace and entry.name in ("pkg", "src")
            )
        return entry.is_file() and (entry.name in LAYOUT_FILES or bool(_DOC_FILE.fullmatch(entry.name)))
    except OSError:
        return False


def link_targets(bin_dir: Path, home: Path) -> list[Path]:
    """The installations the symlinks of a tool directory point into (~/.local/bin/poetry -> a
    venv, ~/.local/bin/pnpm -> an npm package)."""
    out = []
    for entry in _entries(bin_dir) or []:
        if entry.is_symlink():
            real = resolved(Path(entry.path))
            if real is not None and real.parent != bin_dir:
                out += installation(real, home)
            for hop in _hops(Path(entry.path))[:-1]:  # a link to a link: each one on the way must be there
                if hop.parent != bin_dir:
                    out += tool_dirs(hop.parent, home)
    return out


MAX_HOPS = 8


def _hops(link: Path) -> list[Path]:
    """The paths a chain of symlinks goes through after ``link`` (~/bin/nrun ->
    ../opt/nrun/bin/nrun -> ../lib/cli.js: both), not resolved further."""
    out: list[Path] = []
    current = link
    for _ in range(MAX_HOPS):
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = Path(os.path.normpath(current.parent / target))
        out.append(current)
    return out


def personal(entry: Path, home: Path) -> bool:
    """A PATH directory of the user's own in HOME (~/bin, ~/.local/bin): it may hold anything
    beside programs (notes, keys), so only its programs are shown (programs())."""
    return home in entry.parents and tool_dirs(entry, home) == [entry]


def programs(directory: Path) -> list[tuple[Path, str | None]]:
    """The programs of ``directory``: its symlinks (with their targets, recreated as links) and
    its executable files; nothing else of it."""
    out: list[tuple[Path, str | None]] = []
    for entry in _entries(directory) or []:
        try:
            if entry.is_symlink():
                out.append((Path(entry.path), os.readlink(entry.path)))
            elif entry.is_file() and os.access(entry.path, os.X_OK):
                out.append((Path(entry.path), None))
        except OSError:
            continue
    return out


def user_sites(home: Path, env: dict[str, str]) -> list[Path]:
    """The user site-packages of every Python 3 (`pip install --user`: ~/.local/lib/python3.12/
    site-packages), which its interpreter reads at start-up: part of the user's environment."""
    base = Path(env.get("PYTHONUSERBASE") or home / ".local")
    names = sorted(n for n in _names(base / "lib") if re.fullmatch(r"python3\.\d+t?", n))
    return [base / "lib" / n / "site-packages" for n in names if (base / "lib" / n / "site-packages").is_dir()]


def installation(program: Path, home: Path) -> list[Path]:
    """What a program (a launcher's real file) needs of the installation it belongs to: the npm
    package it is a file of (`npm install -g --prefix ~/.local pnpm` links `bin/pnpm` to
    `lib/node_modules/pnpm/bin/pnpm.cjs`, which loads the package's `dist/`), the virtualenv
    (pipx's) with the interpreter it was made from, else its directory as a PATH entry."""
    for directory in [program.parent, *program.parent.parents][:MAX_PACKAGE_DEPTH]:
        if directory == home or directory in home.parents:
            break
        if (directory / "pyvenv.cfg").is_file():
            return [directory, *venv_interpreters(directory)]
        if (directory / "package.json").is_file() and _in_node_modules(directory):
            return [directory]
    return tool_dirs(program.parent, home)


MAX_PACKAGE_DEPTH = 6  # directories from a program up to its package's root (`dist/bin/cli/x.js`)


def _in_node_modules(directory: Path) -> bool:
    parent = directory.parent
    return parent.name == "node_modules" or (parent.name.startswith("@") and parent.parent.name == "node_modules")


def resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except OSError:
        return None


def venv_interpreters(venv: Path) -> list[Path]:
    """The Python installation a virtualenv was made from: its pyvenv.cfg's `home` (a bin
    directory), `base-prefix` and `base-exec-prefix`, and where its `bin/python` link points;
    each taken only when it is a Python installation (is_python_installation)."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    named = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("home", "base-prefix", "base-exec-prefix") and os.path.isabs(value.strip()):
            named.append(Path(value.strip()))
    python = venv / "bin" / "python"
    real = resolved(python) if python.is_symlink() else None
    if real is not None:
        named.append(real.parent)
    prefixes = [p.parent if p.name == "bin" else p for p in named]
    return [p for p in dict.fromkeys(prefixes) if is_python_installation(p)]


def is_python_installation(prefix: Path) -> bool:
    """A prefix holding an interpreter (bin/python*) and its library (lib/python*)."""
    try:
        has_python = any(n.startswith("python") for n in os.listdir(prefix / "bin"))
        has_lib = any(n.startswith("python") for lib in ("lib", "lib64") for n in _names(prefix / lib))
    except OSError:
        return False
    return has_python and has_lib


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
