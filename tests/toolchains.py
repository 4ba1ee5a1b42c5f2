"""Test runners that come from a registry (jest, vitest and pnpm from npm; surefire and JUnit from
Maven Central), installed once per machine into a cache that outlives test runs:
~/.cache/papayu-git-tests (of the real HOME: the hermetic fixture replaces HOME per test).

The first run on a fresh machine downloads them (CI has the registries), later runs install from
the cache without the network: a pnpm workspace from its store and a lockfile kept per set of
manifests, a Maven project from a local repository hard-linked into the test's HOME, as a
user's ~/.m2/repository would be (Gradle's ~/.gradle/caches are downloaded for each test). Each step takes a lock, so parallel workers (pytest -n) wait
for one download instead of racing. What cannot be had (no npm, no registry) is a skip reason.

Every test that runs a toolchain (cargo, go, node, npm, maven, gradle, uv, ...) finds it through
``which``/``needs`` here: this module declares ``USES``, and conftest.py (tests/tiers.py) marks any
test that reaches it `toolchain`, which `make check` leaves out.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from tiers import TOOLCHAIN

USES = (TOOLCHAIN,)  # tests/tiers.py: a test that reaches this module runs a toolchain
F = TypeVar("F", bound=Callable[..., object])

REAL_HOME = Path(os.path.expanduser("~"))  # read at import, before the fixture moves HOME
CACHE = Path(os.environ.get("PAPAYU_TEST_CACHE") or REAL_HOME / ".cache" / "papayu-git-tests")
PNPM_VERSION = "10.33.0"
# The versions the JS test projects pin: jest 30 and vitest 4 run on Node 20.
JS_PACKAGES = {"jest": "30.5.2", "vitest": "4.1.12", "cross-env": "10.1.0"}
PNPM_STORE = CACHE / "pnpm-store"
MAVEN_REPO = CACHE / "m2"
# The toolchains live under the real HOME (found at import: the hermetic fixture moves HOME); go
# shares the machine's build cache (a cold one costs ~20 s).
TOOL_ENV = {
    "CARGO_HOME": os.environ.get("CARGO_HOME", str(REAL_HOME / ".cargo")),
    "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(REAL_HOME / ".rustup")),
    "GOCACHE": os.environ.get("GOCACHE", str(REAL_HOME / ".cache" / "go-build")),
    "GOTOOLCHAIN": "local",
    "GOFLAGS": "-mod=mod",
    "CARGO_NET_OFFLINE": "true",
}
# Where installers put them besides PATH; uv is installed next to our interpreter by the test extra.
TOOL_PATH = os.pathsep.join(
    [str(REAL_HOME / ".cargo" / "bin"), "/usr/local/go/bin", os.environ.get("PATH", ""), sysconfig.get_path("scripts")]
)


def which(tool: str) -> str | None:
    """``tool``'s path: on PATH, or where its installer puts it."""
    return shutil.which(tool, path=TOOL_PATH)


# Found on PATH but not always runnable: rustup's shims without a toolchain installed.
SHIMS = frozenset({"cargo", "rustc"})


@functools.cache
def missing(tool: str) -> str | None:
    """Why ``tool`` cannot run here (not found; for a rustup shim, ``tool --version`` fails, as
    common as no cargo at all); None when it can. Cheap: it runs at collection."""
    found = which(tool)
    if found is None:
        return f"toolchain absent here: {tool} not found"
    if tool not in SHIMS:
        return None
    env = {**os.environ, "PATH": TOOL_PATH, **TOOL_ENV}
    proc = subprocess.run([found, "--version"], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode == 0:
        return None
    return f"toolchain absent here: {tool} --version failed (a rustup shim without a toolchain?): {proc.stderr.strip()[:200]}"


@functools.cache
def node_reporter_missing() -> str | None:
    """Why node's test runner with a reporter API (node 20 or later) and npm cannot run here."""
    absent = missing("node") or missing("npm")
    if absent:
        return absent
    version = subprocess.run([str(which("node")), "--version"], capture_output=True, text=True).stdout
    found = re.match(r"v(\d+)", version)
    return None if found and int(found[1]) >= 20 else f"node {version.strip()} has no reporter API (20 or later)"


class Marks(tuple[pytest.MarkDecorator, ...]):
    """Marks to put on a test (``@``) or on one parameter (``pytest.param(..., marks=...)``)."""

    def __call__(self, test: F) -> F:
        for mark in self:
            test = mark(test)
        return test


class Unavailable(Exception):
    """A runner that cannot be installed here: the test is skipped with this reason."""


def needs(*tools: str) -> Marks:
    """The marks of a test, or of one parameter, that runs ``tools``: `toolchain`, and skipped,
    saying why, where one of them cannot run."""
    reasons = [r for tool in tools if (r := missing(tool))]
    skip = pytest.mark.skipif(bool(reasons), reason="; ".join(reasons) or "all found")
    return Marks((getattr(pytest.mark, TOOLCHAIN), skip))


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise Unavailable(f"`{' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()[-600:]}")
    return proc.stdout


def pnpm_bin() -> Path:
    """pnpm's bin directory (put it on PATH), installed with npm into the cache."""
    prefix = CACHE / f"pnpm-{PNPM_VERSION}"
    binary = prefix / "bin" / "pnpm"
    if binary.exists():
        return binary.parent
    if shutil.which("npm") is None:
        raise Unavailable("npm is not installed: pnpm, jest and vitest come from the npm registry")
    with _locked("pnpm"):
        if not binary.exists():
            _run(["npm", "install", "-g", "--prefix", str(prefix), f"pnpm@{PNPM_VERSION}"], CACHE, _npm_env())
    return binary.parent


def pnpm_install(project: Path) -> None:
    """`pnpm install` in ``project`` (a workspace whose manifests depend only on JS_PACKAGES): from
    the cache's store and a lockfile kept for exactly these manifests; online the first time."""
    env = {**_npm_env(), "PATH": f"{pnpm_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}
    store = ["--store-dir", str(PNPM_STORE), "--config.cache-dir=" + str(CACHE / "pnpm-cache")]
    lock = CACHE / "pnpm-locks" / f"{_manifests_digest(project)}.yaml"
    if lock.exists():
        shutil.copyfile(lock, project / "pnpm-lock.yaml")
        try:
            _run(["pnpm", "install", "--offline", "--frozen-lockfile", *store], project, env)
            return
        except Unavailable:
            pass  # the store lost a package: fetch it again
    with _locked("pnpm-store"):
        _run(["pnpm", "install", "--prefer-offline", *store], project, env)
    lock.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(project / "pnpm-lock.yaml", lock)


def _manifests_digest(project: Path) -> str:
    digest = hashlib.sha256(PNPM_VERSION.encode())
    for path in sorted([*project.rglob("package.json"), *project.glob("pnpm-workspace.yaml")]):
        if "node_modules" not in path.parts:
            digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def _npm_env() -> dict[str, str]:
    """npm's own cache in the test cache (HOME is a temporary directory in tests)."""
    return {"npm_config_cache": str(CACHE / "npm-cache"), "npm_config_update_notifier": "false"}


def maven_repository(project: Path, home: Path) -> None:
    """``home``'s ~/.m2/repository with what ``project``'s build needs: its plugins and test
    dependencies downloaded once into the cache (a build of a copy of the project, online),
    then hard-linked in."""
    if shutil.which("mvn") is None:
        raise Unavailable("mvn is not installed")
    marker = MAVEN_REPO / f".warm-{_digest(project, 'pom.xml')}"
    if not marker.exists():
        with _locked("maven"), tempfile.TemporaryDirectory() as scratch:
            if not marker.exists():
                copy = Path(scratch) / "project"
                shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".git"))
                args = ["mvn", "-B", "-q", f"-Dmaven.repo.local={MAVEN_REPO}", "-Dmaven.test.failure.ignore=true"]
                _run([*args, "test"], copy, timeout=900)
                marker.touch()
    target = home / ".m2" / "repository"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(MAVEN_REPO, target, copy_function=os.link, dirs_exist_ok=True)


def gradle_caches(project: Path, home: Path) -> None:
    """``home``'s ~/.gradle/caches with what ``project``'s build downloads: a build of a copy of
    the project, online, as its user would have run once. Not from the machine's cache: the
    Gradle installable here (4.4) records absolute paths in its cache, which cannot move."""
    gradle = shutil.which("gradle")
    if gradle is None:
        raise Unavailable("gradle is not installed")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "project"
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".git"))
        env = {**os.environ, "GRADLE_USER_HOME": str(home / ".gradle")}
        # The tip's tests may fail: what matters is what the build downloaded.
        subprocess.run([gradle, "--no-daemon", "-q", "test", "--continue"], cwd=copy, env=env, timeout=900)
    if not (home / ".gradle" / "caches" / "modules-2").is_dir():
        raise Unavailable("gradle downloaded nothing: is Maven Central reachable?")


def _digest(project: Path, pattern: str) -> str:
    digest = hashlib.sha256()
    for path in sorted(project.rglob(pattern)):
        if ".git" not in path.parts:
            digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def npm_global(prefix: Path, package: str) -> Path:
    """``package`` installed as a user installs a tool, `npm install -g --prefix PREFIX`: its bin
    directory links into `PREFIX/lib/node_modules/<name>/` (from the cache's npm cache, online
    the first time)."""
    if shutil.which("npm") is None:
        raise Unavailable("npm is not installed")
    with _locked("npm-global"):
        _run(["npm", "install", "-g", "--prefer-offline", "--prefix", str(prefix), package], CACHE, _npm_env())
    return prefix / "bin"


GOTESTSUM = "gotest.tools/gotestsum@v1.13.0"


def gotestsum() -> Path:
    """gotestsum as a Go user installs it, `go install` (from the Go module proxy the first time,
    then the machine's module cache): the directory holding its binary, to put on PATH."""
    go = which("go")
    if go is None:
        raise Unavailable("go is not installed")
    bin_dir = CACHE / "go-bin"
    with _locked("gotestsum"):
        if not (bin_dir / "gotestsum").is_file():
            env = {**os.environ, **TOOL_ENV, "PATH": TOOL_PATH, "GOBIN": str(bin_dir), "GOFLAGS": ""}
            env.setdefault("GOPATH", str(REAL_HOME / "go"))
            _run([go, "install", GOTESTSUM], CACHE, env)
    return bin_dir


# tox and nox as a user installs them (a venv of their own, their launcher linked into
# ~/.local/bin, as pipx does); the packages a test project's environments install come from a wheel directory
# filled once from PyPI, so that the environments are made offline after the first run.
PYTHON_TOOLS = {"tox": "tox==4.67.15", "nox": "nox==2026.10.20"}
WHEELS = CACHE / "wheels"


def python_tool(name: str) -> Path:
    """The launcher of ``name`` in a venv of its own (link it into a directory on PATH)."""
    venv = CACHE / PYTHON_TOOLS[name].replace("==", "-")
    launcher = venv / "bin" / name
    if launcher.exists():
        return launcher
    with _locked(name):
        if not launcher.exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(venv)], CACHE)
            _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", PYTHON_TOOLS[name]], CACHE)
    return launcher


def wheelhouse(*requirements: str) -> Path:
    """A directory of wheels holding ``requirements`` and their dependencies (PIP_FIND_LINKS)."""
    marker = WHEELS / f".has-{hashlib.sha256(' '.join(sorted(requirements)).encode()).hexdigest()[:16]}"
    if not marker.exists():
        with _locked("wheels"):
            if not marker.exists():
                WHEELS.mkdir(parents=True, exist_ok=True)
                _run([sys.executable, "-m", "pip", "download", "-q", "-d", str(WHEELS), *requirements], CACHE)
                marker.touch()
    return WHEELS


YARN_VERSION = "4.4.1"


def yarn_release() -> Path:
    """yarn berry's single-file release (`@yarnpkg/cli-dist`'s `bin/yarn.js`, from the npm registry),
    which a project commits as its `yarnPath`."""
    release = CACHE / f"yarn-{YARN_VERSION}" / "package" / "bin" / "yarn.js"
    if release.exists():
        return release
    if shutil.which("npm") is None:
        raise Unavailable("npm is not installed: yarn berry comes from the npm registry")
    with _locked("yarn"):
        if not release.exists():
            where = release.parent.parent.parent
            where.mkdir(parents=True, exist_ok=True)
            tarball = _run(["npm", "pack", "-q", f"@yarnpkg/cli-dist@{YARN_VERSION}"], where, _npm_env()).strip()
            _run(["tar", "xzf", tarball.splitlines()[-1]], where)
    return release


def yarn_install(project: Path) -> None:
    """`yarn install` of a Plug'n'Play project whose cache is its own `.yarn/cache`: the zips kept in
    the test cache per set of manifests, offline after the first run."""
    kept = CACHE / "yarn-caches" / _digest(project, "package.json")
    cache = project / ".yarn" / "cache"
    if kept.is_dir():  # the zips and the lockfile that resolves to them
        shutil.copytree(kept / "cache", cache, dirs_exist_ok=True)
        shutil.copyfile(kept / "yarn.lock", project / "yarn.lock")
    env = {"YARN_ENABLE_NETWORK": "0" if kept.is_dir() else "1", "YARN_ENABLE_TELEMETRY": "0"}
    _run(["node", str(project / ".yarn" / "releases" / f"yarn-{YARN_VERSION}.cjs"), "install"], project, env)
    if not kept.is_dir():
        shutil.copytree(cache, kept / "cache")
        shutil.copyfile(project / "yarn.lock", kept / "yarn.lock")
