"""What the check sees of the user's machine: an allowlist of mounts (docs/DESIGN.md, "The
check's environment").

Inside the sandbox the plan's checkout is at the repository's own path, so every absolute path
the project's environment baked in (editable installs, workspace symlinks, cargo and CMake
caches, venv shebangs) resolves to the plan's code. Around it: the system read-only (minus its
credential and root-only files), the toolchains' installations (toolchains.py) and the offline
package caches under HOME, the repository's untracked environment directories (`.venv`,
`node_modules`, `target`, ...) as throwaway overlays, the files the user named (includes.py), and
nothing else: not the rest of HOME, no credential file of credential_files.py's table even inside
a mounted directory, not the user's ignored files, not the user's `.git` beyond its objects, no
unix socket of the host. The project's own files choose no mount: a directory holding a tracked
file is never an environment, so no landed `pyvenv.cfg` names what the check mounts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from papayu_git import settings
from papayu_git.check import toolchains
from papayu_git.check.credential_files import home_credentials, named_credentials, system_hidden
from papayu_git.check.includes import included_mounts
from papayu_git.check.project_copies import virtualenvs
from papayu_git.git import isolated_env, run_git, tracked_paths


class Kind(StrEnum):
    RO = "ro"  # read-only bind of the host path
    BIND = "bind"  # writable bind: only papayu's own relay sockets
    OVERLAY = "overlay"  # the host path as the lower layer, writes to a throwaway tmpfs
    HIDE = "hide"  # /dev/null over a file, an empty tmpfs over a directory
    SYMLINK = "symlink"  # source is the link's target


@dataclass(frozen=True)
class Mount:
    kind: Kind
    source: str
    dest: str


# The system, read-only: /etc without its credential files and root-only files
# (credential_files.system_hidden). Not /opt: only the toolchains in it that PATH or a toolchain
# variable names (toolchains.py).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix/store", "/sys")
# Package caches under HOME that offline tools read: overlays (tools write to them; nothing
# reaches the user's copy). Never a whole tool directory that also holds credentials.
HOME_CACHES = (
    ".cache/uv",
    ".cache/pip",
    ".cache/pypoetry",
    ".cache/pdm",
    ".cache/pre-commit",
    ".cache/go-build",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/node-gyp",
    ".cache/node/corepack",  # the package managers corepack's shims run
    ".cache/ms-playwright",
    ".local/share/uv",
    ".local/share/pnpm",
    ".local/share/virtualenvs",
    ".npm/_cacache",
    ".yarn/berry/cache",
    ".cargo/registry",
    ".cargo/git",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".ivy2/cache",
    ".pyenv",
    ".nvm",
    ".rustup",
    ".cargo/bin",
    ".volta",
    ".deno",
    ".bun/bin",
    ".sdkman/candidates",
)
# Package caches named by the environment (sandbox.ENV_ALLOWLIST passes the names): the whole
# directory, or of a tool's home that also holds credentials (cargo's credentials.toml) only
# its download caches.
ENV_CACHES = {
    "GOMODCACHE": ("",),
    "GOCACHE": ("",),
    "UV_CACHE_DIR": ("",),
    "PIP_CACHE_DIR": ("",),
    "npm_config_cache": ("",),
    "COREPACK_HOME": ("",),
    "CARGO_HOME": ("registry", "git"),
    "GOPATH": ("pkg/mod",),
}
# Ignored directories of the repository that hold its environment, at any depth next to a
# manifest. Never build outputs that would carry the user's code into the plan's run.
# `.yarn/cache` and `.yarn/unplugged`: yarn's packages where `.yarn` itself holds tracked files (its
# release, plugins, sdks), which make the whole directory the project's.
ENV_DIR_NAMES = (
    "node_modules",
    ".venv",
    "venv",
    "env",
    ".tox",
    ".nox",
    "target",
    ".pixi",
    ".yarn",
    ".yarn/cache",
    ".yarn/unplugged",
)
MANIFESTS = ("package.json", "pyproject.toml", "setup.py", "setup.cfg", "Cargo.toml", "tox.ini", "noxfile.py")
NEVER_ENV = frozenset({"build", "dist", "__pycache__", ".git", ".papa-yu"})
CHECK_GITCONFIG = "[user]\n\tname = papayu check\n\temail = check@papayu.invalid\n[safe]\n\tdirectory = *\n"


@dataclass(frozen=True)
class Layout:
    """Where things are: the user's repository and the checkout standing in for it."""

    repo_root: Path  # the user's work tree; inside the sandbox, the plan's checkout is here
    work: Path  # the checkout of the plan (host path)
    gitdir: Path  # the checkout's git directory (host path)
    objects: Path  # the user's object store (host path)

    @property
    def inner_gitdir(self) -> Path:
        return self.repo_root / ".git"


def mounts(layout: Layout, env: dict[str, str]) -> tuple[list[Mount], list[str]]:
    """Every mount of the check, in the order bubblewrap must make them (parents first), and
    what the check's log should say about what the user named and the check does not get."""
    home = Path(os.path.expanduser("~"))
    envs = env_dirs(layout.repo_root, layout.work, layout.gitdir)
    venvs = virtualenvs(envs)
    placed = system_mounts(env, layout.repo_root, venvs)
    placed += [
        Mount(Kind.OVERLAY, str(layout.work), str(layout.repo_root)),
        Mount(Kind.OVERLAY, str(layout.gitdir), str(layout.inner_gitdir)),
        Mount(Kind.OVERLAY, str(layout.objects), str(layout.inner_gitdir / "objects")),
    ]
    placed += [Mount(Kind.OVERLAY, str(p), str(p)) for p in envs]
    placed += [Mount(Kind.RO, str(p), str(p)) for p in tools_in_repository(layout, env, home)]
    files, notes = included_mounts(layout.repo_root, layout.work)
    placed += [Mount(Kind.RO, str(p), str(p)) for p in files]
    ordered = _parents_first(placed)
    visible = [Path(m.dest) for m in ordered if m.kind is not Kind.HIDE]
    return ordered + _hidden_credentials(home, visible), notes


def system_mounts(env: dict[str, str], repo_root: Path | None = None, venvs: list[Path] | None = None) -> list[Mount]:
    """The system, the toolchains and the package caches: what any check sees. ``venvs``: the
    project virtualenvs the check gets, whose base interpreters it needs."""
    home = Path(os.path.expanduser("~"))
    return [*_system(), *_toolchains(env, home, repo_root, venvs or []), *_caches(home, env)]


def _system() -> list[Mount]:
    out = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            out.append(Mount(Kind.SYMLINK, os.readlink(path), name))
        elif path.is_dir():
            out.append(Mount(Kind.RO, name, name))
    shown = [Path(m.dest) for m in out]
    hidden = [p for p in system_hidden() if os.path.lexists(p) and _under(Path(p), shown)]
    return out + [Mount(Kind.HIDE, p, p) for p in hidden]


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _toolchains(env: dict[str, str], home: Path, repo_root: Path | None, venvs: list[Path]) -> list[Mount]:
    """The toolchains (toolchains.py), read-only, unless the system or the repository covers
    them. An activated virtualenv outside the repository brings its interpreter too; one inside
    is one of ``venvs`` when it is an environment of the repository at all."""
    covered = [Path(d) for d in SYSTEM_DIRS] + ([repo_root] if repo_root else [])
    active = Path(env.get("VIRTUAL_ENV") or "/")
    outside = [active] if active.is_absolute() and active != Path("/") and not _under(active, covered) else []
    out: list[Mount] = []
    seen: set[Path] = set()
    found = toolchains.wanted(env, home, [*venvs, *outside])
    entries = {Path(e) for e in env.get("PATH", "").split(os.pathsep) if e and os.path.isabs(e)}
    personal = {e for e in entries if toolchains.personal(e, home)}
    for path in [*found, *toolchains.user_sites(home, env)]:
        real = toolchains.resolved(path)
        for candidate in {path, real} if real else {path}:
            if candidate in seen or not candidate.exists() or _under(candidate, covered):
                continue
            seen.add(candidate)
            if not toolchains.allowed(candidate, home):
                continue
            if candidate == path and candidate in personal:
                for program, link in toolchains.programs(candidate):  # not the notes beside them
                    out.append(Mount(Kind.SYMLINK, link, str(program)) if link else _ro(program))
            else:
                out.append(_ro(candidate))
    return out


def _ro(path: Path) -> Mount:
    return Mount(Kind.RO, str(path), str(path))


def tools_in_repository(layout: Layout, env: dict[str, str], home: Path) -> list[Path]:
    """PATH entries inside the repository that the plan's checkout does not have (an ignored
    `.tools/bin` holding a `uv`), and the installations their links point at: the user's tools,
    read-only at their place. Never a directory holding a tracked file: that is the project's,
    and the plan's version of it is in the checkout."""
    entries: dict[str, Path] = {}
    for value in env.get("PATH", "").split(os.pathsep):
        path = Path(value)
        if not path.is_absolute() or layout.repo_root not in path.parents or not path.is_dir():
            continue
        rel = path.relative_to(layout.repo_root).as_posix()
        if not os.path.lexists(layout.work / rel):
            entries[rel] = path
    tracked = tracked_paths(layout.repo_root, sorted(entries))
    out: list[Path] = []
    for rel, path in entries.items():
        if tracked.holds(rel) or path.is_symlink():
            continue
        out.append(path)
        for target in toolchains.link_targets(path, home):
            inside = layout.repo_root in target.parents
            if target.exists() and toolchains.allowed(target, home) and (not inside or _untracked(layout, target)):
                out.append(target)
    return list(dict.fromkeys(out))


def _untracked(layout: Layout, path: Path) -> bool:
    rel = path.relative_to(layout.repo_root).as_posix()
    return not os.path.lexists(layout.work / rel) and not tracked_paths(layout.repo_root, [rel]).holds(rel)


def _caches(home: Path, env: dict[str, str]) -> list[Mount]:
    paths = [home / rel for rel in HOME_CACHES]
    for name, subdirs in ENV_CACHES.items():
        value = env.get(name, "").split(os.pathsep)[0]  # GOPATH may be a list: the first holds pkg/mod
        if value and os.path.isabs(value):
            paths += [Path(value) / sub for sub in subdirs]
    out = []
    seen = set()
    for path in paths:
        if path in seen or path.is_symlink() or not path.is_dir():
            continue
        seen.add(path)
        out.append(Mount(Kind.OVERLAY, str(path), str(path)))
    return out


def env_dirs(repo_root: Path, work: Path, gitdir: Path) -> list[Path]:
    """The repository's environment directories that exist in the user's tree and are not part
    of the plan's checkout (``work``, whose git directory is ``gitdir``): next to the root and
    to every manifest of the checkout."""
    names = list(ENV_DIR_NAMES)
    extra_paths: list[str] = []
    for item in settings.get("check_env_dirs", str(repo_root)).split(","):
        item = item.strip().strip("/")
        if not item or item in NEVER_ENV or ".." in item.split("/"):
            continue
        (extra_paths if "/" in item else names).append(item)
    found: list[Path] = []
    for rel_dir in manifest_dirs(work, gitdir):
        for name in names:
            candidate = repo_root / rel_dir / name
            if not candidate.is_symlink() and candidate.is_dir() and not (work / rel_dir / name).exists():
                if name == "env" and not (candidate / "pyvenv.cfg").is_file():
                    continue  # `env/` is a virtualenv only when it says so; otherwise it is the user's
                found.append(candidate)
    for rel in extra_paths:
        candidate = repo_root / rel
        if candidate.is_dir() and not candidate.is_symlink() and not (work / rel).exists():
            found.append(candidate)
    # A directory holding a tracked file is the project's content, whatever its name: its files
    # (a pyvenv.cfg naming ~/.ssh as the interpreter) may be a landed plan's.
    rels = {p: p.relative_to(repo_root).as_posix() for p in set(found)}
    tracked = tracked_paths(repo_root, sorted(rels.values()))
    found = sorted(p for p, rel in rels.items() if not tracked.holds(rel))
    # An environment inside another one (node_modules/x/node_modules) comes with its parent.
    return [p for p in found if not any(q in p.parents for q in found)]


def manifest_dirs(work: Path, gitdir: Path | None = None) -> list[str]:
    """Directories of the checkout (relative; "" is the root) holding a project manifest.
    ``gitdir``: the checkout's git directory, named because a pool slot's work tree has no
    `.git` of its own while the check runs (the sandbox mounts the git directory there)."""
    specs = [f":(glob)**/{name}" for name in MANIFESTS]
    where = [f"--git-dir={gitdir}", f"--work-tree={work}"] if gitdir is not None else []
    proc = run_git([*where, "ls-files", "-z", "--", *specs], cwd=work, check=False, env=isolated_env())
    dirs = {""}
    for path in proc.stdout.split("\0") if proc.returncode == 0 else []:
        if path and "node_modules/" not in path:
            dirs.add(os.path.dirname(path))
    return sorted(dirs)


def _parents_first(placed: list[Mount]) -> list[Mount]:
    """Later mounts cover earlier ones: order by depth of the destination, the system first.
    One destination keeps its last mount (an environment overlay beats a toolchain bind)."""
    last: dict[str, Mount] = {}
    for mount in placed:
        last.pop(mount.dest, None)
        last[mount.dest] = mount
    return sorted(last.values(), key=lambda m: len(Path(m.dest).parts))


def _hidden_credentials(home: Path, visible: list[Path]) -> list[Mount]:
    """The credential files of the table and of the credential variables that some mount shows
    (a package cache, a tool's directory): an empty file or directory stands in for each. A
    symlink is hidden where it points (bubblewrap mounts over no symlink; one pointing at what
    no mount shows dangles in the check anyway)."""
    found = [Path(os.path.realpath(p)) for p in (*home_credentials(home), *named_credentials(os.environ))]
    hidden = sorted({p for p in found if os.path.lexists(p) and _under(p, visible)})
    outermost = [p for p in hidden if not any(q in p.parents for q in hidden)]
    return [Mount(Kind.HIDE, str(p), str(p)) for p in outermost]


def write_gitconfig(slot: Path) -> Path:
    """The check's global git config: an identity and safe.directory, nothing of the user's."""
    path = slot / "gitconfig.check"
    if not path.is_file() or path.read_text() != CHECK_GITCONFIG:
        path.write_text(CHECK_GITCONFIG)
    return path


def links_into(repo_root: Path, env_dirs: list[Path]) -> list[str]:
    """Where the project's environment points into the user's work tree (outside these
    environment directories): editable installs and workspace symlinks. Unsandboxed, a check
    through them imports the user's code, not the plan's."""
    root = str(repo_root)
    found: list[str] = []
    for env_dir in env_dirs:
        if env_dir.name == "node_modules":
            found += _workspace_links(repo_root, env_dir)
            continue
        for pattern in (
            "lib/python*/site-packages/*.pth",
            "lib/python*/site-packages/__editable__*",
            "lib/python*/site-packages/*.egg-link",
            "Lib/site-packages/*.pth",
        ):
            for path in sorted(env_dir.glob(pattern))[:200]:
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")[:65536]
                except OSError:
                    continue
                if root in text:
                    found.append(f"{path.relative_to(repo_root)} points into {repo_root} (editable install)")
    return list(dict.fromkeys(found))


def _workspace_links(repo_root: Path, modules: Path) -> list[str]:
    found = []
    try:
        entries = [e for e in os.scandir(modules)]
        entries += [s for e in entries if e.name.startswith("@") and e.is_dir() for s in os.scandir(e.path)]
    except OSError:
        return []
    for entry in entries[:5000]:
        if not entry.is_symlink():
            continue
        real = toolchains.resolved(Path(entry.path))
        if real is not None and repo_root in real.parents and "node_modules" not in real.relative_to(repo_root).parts:
            found.append(f"{Path(entry.path).relative_to(repo_root)} -> {real.relative_to(repo_root)} (workspace link)")
    return found
