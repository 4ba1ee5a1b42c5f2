"""What the check sees of the user's machine: an allowlist of mounts (docs/DESIGN.md, "The
check's environment").

Inside the sandbox the plan's checkout is at the repository's own path, so every absolute path
the project's environment baked in (editable installs, workspace symlinks, cargo and CMake
caches, venv shebangs) resolves to the plan's code. Around it: the system read-only, the
toolchains on PATH and the offline package caches under HOME, the repository's ignored
environment directories (`.venv`, `node_modules`, `target`, ...) as throwaway overlays, the files
the user named (`papayu.check.include`), and nothing else: not the rest of HOME, not the user's
ignored files, not the user's `.git` beyond its objects, no unix socket of the host.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from papayu_git import settings
from papayu_git.git import run_git


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


# The system, read-only. /etc is in, its shadow files and private keys are not.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store", "/sys")
HIDDEN_SYSTEM_GLOBS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
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
    "CARGO_HOME": ("registry", "git"),
    "GOPATH": ("pkg/mod",),
}
# Ignored directories of the repository that hold its environment, at any depth next to a
# manifest. Never build outputs that would carry the user's code into the plan's run.
ENV_DIR_NAMES = ("node_modules", ".venv", "venv", "env", ".tox", ".nox", "target", ".pixi", ".yarn")
MANIFESTS = ("package.json", "pyproject.toml", "setup.py", "setup.cfg", "Cargo.toml", "tox.ini", "noxfile.py")
NEVER_ENV = frozenset({"build", "dist", "__pycache__", ".git", ".papa-yu"})
# Files named by the environment that hold credentials: hidden wherever they are.
CREDENTIAL_FILE_VARS = (
    "KUBECONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "DOCKER_CONFIG",
    "NETRC",
    "PGPASSFILE",
    "PIP_CONFIG_FILE",
    "NPM_CONFIG_USERCONFIG",
    "GIT_CONFIG_GLOBAL",
    "SSH_AUTH_SOCK",
    "GNUPGHOME",
    "PASSWORD_STORE_DIR",
    "VAULT_CONFIG_PATH",
    "HF_TOKEN_PATH",
)
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


def mounts(layout: Layout, env: dict[str, str]) -> list[Mount]:
    """Every mount of the check, in the order bubblewrap must make them (parents first)."""
    placed = system_mounts(env, layout.repo_root)
    placed += [
        Mount(Kind.OVERLAY, str(layout.work), str(layout.repo_root)),
        Mount(Kind.OVERLAY, str(layout.gitdir), str(layout.inner_gitdir)),
        Mount(Kind.OVERLAY, str(layout.objects), str(layout.inner_gitdir / "objects")),
    ]
    placed += [Mount(Kind.OVERLAY, str(p), str(p)) for p in env_dirs(layout.repo_root, layout.work)]
    placed += [Mount(Kind.RO, str(p), str(p)) for p in beside_the_checkout(included(layout.repo_root), layout)]
    ordered = _parents_first(placed)
    visible = [Path(m.dest) for m in ordered if m.kind is not Kind.HIDE]
    return ordered + _hidden_credentials(env, visible)


def system_mounts(env: dict[str, str], repo_root: Path | None = None) -> list[Mount]:
    """The system, the toolchains and the package caches: what any check sees."""
    home = Path(os.path.expanduser("~"))
    return [*_system(), *_toolchains(repo_root, home, env), *_caches(home, env)]


def _system() -> list[Mount]:
    out = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            out.append(Mount(Kind.SYMLINK, os.readlink(path), name))
        elif path.is_dir():
            out.append(Mount(Kind.RO, name, name))
    for pattern in HIDDEN_SYSTEM_GLOBS:
        out += [Mount(Kind.HIDE, p, p) for p in sorted(glob.glob(pattern))]
    return out


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _toolchains(repo_root: Path | None, home: Path, env: dict[str, str]) -> list[Mount]:
    """The prefix of every tool directory on PATH, of VIRTUAL_ENV and of the interpreters the
    project's virtualenvs point at, read-only, unless the system or the repository covers it."""
    covered = [Path(d) for d in SYSTEM_DIRS] + ([repo_root] if repo_root else [])
    wanted: list[Path] = []
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            wanted.append(_prefix(Path(entry), home))
            if home in Path(entry).parents:
                wanted += _link_targets(Path(entry), home)
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "JAVA_HOME", "GOROOT", "RUSTUP_HOME"):
        if env.get(name) and os.path.isabs(env[name]):
            wanted.append(Path(env[name]))
    wanted += [Path(sys.base_prefix), Path(sys.prefix)]
    for venv in [repo_root / ".venv", repo_root / "venv"] if repo_root else []:
        wanted += _venv_interpreters(venv, home)
    out: list[Mount] = []
    seen: set[Path] = set()
    for path in wanted:
        real = _resolved(path)
        for candidate in {path, real} if real else {path}:
            if candidate in seen or not candidate.is_dir() or _under(candidate, covered):
                continue
            if candidate == home or candidate in home.parents or candidate == Path("/"):
                continue  # a PATH entry of HOME itself (~/bin) would show all of HOME
            if candidate == Path("/tmp") or candidate == Path("/run"):
                continue
            seen.add(candidate)
            out.append(Mount(Kind.RO, str(candidate), str(candidate)))
    return out


def _prefix(bin_dir: Path, home: Path) -> Path:
    """/x/bin -> /x, ~/.pyenv/shims -> ~/.pyenv; ~/.local/bin, ~/.cargo/bin and ~/bin stay
    themselves (their parents hold other things, credentials among them)."""
    if bin_dir.name in ("bin", "shims", "sbin") and len(bin_dir.parts) > 2:
        parent = bin_dir.parent
        if parent.name not in (".local", ".cargo") and parent != home:
            return parent
    return bin_dir


def _link_targets(bin_dir: Path, home: Path, limit: int = 256) -> list[Path]:
    """Where the symlinks of a tool directory in HOME point (~/.local/bin/poetry -> a venv)."""
    out = []
    try:
        entries = list(os.scandir(bin_dir))[:limit]
    except OSError:
        return []
    for entry in entries:
        if entry.is_symlink():
            real = _resolved(Path(entry.path))
            if real is not None and real.parent != bin_dir:
                out.append(_prefix(real.parent, home))
    return out


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except OSError:
        return None


def _venv_interpreters(venv: Path, home: Path) -> list[Path]:
    """The base interpreter a project virtualenv was made from (its pyvenv.cfg `home`)."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("home", "base-prefix", "base-exec-prefix") and value.strip():
            base = Path(value.strip())
            out.append(_prefix(base, home) if base.name == "bin" else base)
    python = venv / "bin" / "python"
    real = _resolved(python) if python.is_symlink() else None
    if real is not None:
        out.append(_prefix(real.parent, home))
    return out


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


def env_dirs(repo_root: Path, work: Path) -> list[Path]:
    """The repository's environment directories that exist in the user's tree and are not part
    of the plan's checkout: next to the root and to every manifest of the checkout."""
    names = list(ENV_DIR_NAMES)
    extra_paths: list[str] = []
    for item in settings.get("check_env_dirs", str(repo_root)).split(","):
        item = item.strip().strip("/")
        if not item or item in NEVER_ENV or ".." in item.split("/"):
            continue
        (extra_paths if "/" in item else names).append(item)
    found: list[Path] = []
    for rel_dir in manifest_dirs(work):
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
    # An environment inside another one (node_modules/x/node_modules) comes with its parent.
    found = sorted(set(found))
    return [p for p in found if not any(q in p.parents for q in found)]


def manifest_dirs(work: Path) -> list[str]:
    """Directories of the checkout (relative; "" is the root) holding a project manifest."""
    specs = [f":(glob)**/{name}" for name in MANIFESTS]
    proc = run_git(["ls-files", "-z", "--", *specs], cwd=work, check=False)
    dirs = {""}
    for path in proc.stdout.split("\0") if proc.returncode == 0 else []:
        if path and "node_modules/" not in path:
            dirs.add(os.path.dirname(path))
    return sorted(dirs)


def included(repo_root: Path) -> list[Path]:
    """`papayu.check.include`: ignored files and directories of the user's tree the tests need
    (copied into the check read-only; their values are masked wherever papayu prints)."""
    out = []
    for item in settings.get("check_include", str(repo_root)).split(","):
        item = item.strip()
        if not item:
            continue
        for match in sorted(glob.glob(str(repo_root / item), include_hidden=True)):
            path = Path(match)
            rel = path.relative_to(repo_root) if repo_root in path.parents else None
            if rel is None or rel.parts[0] == ".git" or path.is_symlink():
                continue
            out.append(path)
    return out


def beside_the_checkout(paths: list[Path], layout: Layout, limit: int = 500) -> list[Path]:
    """The included ``paths`` that cover nothing of the plan's checkout: a path it has (a tracked
    file, one the plan wrote) is the plan's. An included directory the checkout also has gives
    only its files the checkout lacks."""
    out: list[Path] = []
    for path in paths:
        there = layout.work / path.relative_to(layout.repo_root)
        if not os.path.lexists(there):
            out.append(path)
        elif path.is_dir() and there.is_dir() and not there.is_symlink():
            files = [f for f in sorted(path.rglob("*"))[:limit] if f.is_file() and not f.is_symlink()]
            out += [f for f in files if not os.path.lexists(layout.work / f.relative_to(layout.repo_root))]
    return out


def included_values(repo_root: Path) -> list[str]:
    """The values of `KEY=value` lines in the included files: secrets to mask in output."""
    values = []
    for path in included(repo_root):
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()][:100]
        for file in files:
            try:
                text = file.read_text(encoding="utf-8", errors="replace")[:200_000]
            except OSError:
                continue
            for line in text.splitlines():
                key, sep, value = line.partition("=")
                value = value.strip().strip("'\"")
                if sep and key.strip() and len(value) >= 4:
                    values.append(value)
    return values


def _parents_first(placed: list[Mount]) -> list[Mount]:
    """Later mounts cover earlier ones: order by depth of the destination, the system first.
    One destination keeps its last mount (an environment overlay beats a toolchain bind)."""
    last: dict[str, Mount] = {}
    for mount in placed:
        last.pop(mount.dest, None)
        last[mount.dest] = mount
    return sorted(last.values(), key=lambda m: len(Path(m.dest).parts))


def _hidden_credentials(env: dict[str, str], visible: list[Path]) -> list[Mount]:
    out = []
    for name in CREDENTIAL_FILE_VARS:
        for value in os.environ.get(name, "").split(os.pathsep):
            path = Path(value) if value and os.path.isabs(value) else None
            if path is not None and (path.exists() or path.is_symlink()) and _under(path, visible):
                out.append(Mount(Kind.HIDE, str(path), str(path)))
    return out


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
        real = _resolved(Path(entry.path))
        if real is not None and repo_root in real.parents and "node_modules" not in real.relative_to(repo_root).parts:
            found.append(f"{Path(entry.path).relative_to(repo_root)} -> {real.relative_to(repo_root)} (workspace link)")
    return found
