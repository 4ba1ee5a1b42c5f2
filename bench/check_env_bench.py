"""What checking a plan in the project's real environment costs, warm, against the same command
run directly in the user's tree, in the same run (interleaved).

1. pytest on an editable install (src layout, `pip install -e .` in `.venv`, 300 tests): the
   check of a one-file plan (the checkout moved to the plan's commit + `run_check` under bwrap,
   the plan's tree at the repository's path, `.venv` laid over it copy-on-write) against
   `.venv/bin/python -m pytest -q` in the user's tree.
2. cargo on a warm workspace (3 crates, `target/` built): the check of a plan that changes one
   crate's source against `cargo test` in a copy of the user's tree with the same change toggled
   each round (both rebuild that crate and what depends on it).
3. Sandbox set-up: `true` through run_check in the editable project (mounts, mtimes, bwrap)
   against `true` run directly.

    python bench/check_env_bench.py [--repeat 7] [--skip-cargo]

4. The per-test verdict with the base cached: the gate (check/gate.py: the cached base read, the
   plan's run, the per-test comparison) for a plan that changes no test file, against one direct
   run of the same command.

Targets: <= 1.3x for pytest and for cargo; sandbox set-up <= 50 ms; the verdict <= 1.2x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from papayu_git import worktree  # noqa: E402
from papayu_git.check import CheckCommand, run_check  # noqa: E402
from papayu_git.check import sandbox as sandbox_mod  # noqa: E402

TARGET_RATIO = 1.3
TARGET_VERDICT = 1.2
TARGET_SETUP_MS = 50.0
ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
ENV["GIT_COMMITTER_EMAIL"] = "b@b"


def sh(args: list[str], cwd: Path, **kw: object) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, env=ENV, **kw).stdout  # type: ignore[call-overload,no-any-return]


def commit_all(repo: Path, message: str) -> str:
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", message], repo)
    return sh(["git", "rev-parse", "HEAD"], repo).strip()


def editable_project(base: Path) -> Path:
    repo = base / "pyproj"
    (repo / "src" / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "calc"\nversion = "0.1"\n'
    )
    (repo / "src/calc/__init__.py").write_text("def add(a, b):\n    return a + b\n")
    for i in range(10):
        body = "".join(f"def test_{i}_{j}():\n    assert calc.add({j}, 1) == {j + 1}\n\n" for j in range(30))
        (repo / f"tests/test_m{i}.py").write_text("import calc\n\n" + body)
    (repo / ".gitignore").write_text(".venv/\n*.egg-info/\n__pycache__/\n")
    sh(["git", "init", "-q", "-b", "main"], repo)
    commit_all(repo, "init")
    sh([sys.executable, "-m", "venv", ".venv"], repo)
    sh([".venv/bin/python", "-m", "pip", "install", "-q", "pytest", "-e", "."], repo)
    return repo


def cargo_workspace(base: Path) -> Path:
    repo = base / "rsproj"
    repo.mkdir()
    (repo / "Cargo.toml").write_text('[workspace]\nmembers = ["a", "b", "c"]\nresolver = "2"\n')
    for name, dep in (("a", ""), ("b", 'a = { path = "../a" }\n'), ("c", 'b = { path = "../b" }\n')):
        (repo / name / "src").mkdir(parents=True)
        (repo / name / "Cargo.toml").write_text(
            f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\n{dep}'
        )
        body = "".join(f"pub fn f{i}(x: u64) -> u64 {{ x * {i} + 1 }}\n" for i in range(200))
        tests = "".join(f"    #[test] fn t{i}() {{ assert_eq!(super::f{i}(1), {i + 1}); }}\n" for i in range(50))
        (repo / name / "src/lib.rs").write_text(f"{body}\n#[cfg(test)]\nmod tests {{\n{tests}}}\n")
    (repo / ".gitignore").write_text("target/\n")
    sh(["git", "init", "-q", "-b", "main"], repo)
    commit_all(repo, "init")
    sh(["cargo", "test", "-q", "--offline"], repo)
    return repo


def plan_commit(repo: Path, path: str, old: str, new: str) -> str:
    """A one-file plan's commit on a side branch; the user's tree stays at the tip."""
    sh(["git", "checkout", "-q", "-b", "plan"], repo)
    target = repo / path
    target.write_text(target.read_text().replace(old, new, 1))
    commit = commit_all(repo, "plan")
    sh(["git", "checkout", "-q", "main"], repo)
    return commit


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def check_runner(repo: Path, commit: str, command: str) -> Callable[[], None]:
    import pygit2

    pyrepo = pygit2.Repository(str(repo))
    box = sandbox_mod.resolve(str(repo))
    if not box.sandboxed:
        raise SystemExit(f"no bwrap sandbox here ({box.reason})")
    pdir = repo / ".git" / "papayu"

    def run() -> None:
        checkout = worktree.acquire_checkout(pyrepo, pdir, commit, plan_id="bench")
        try:
            result = run_check(
                CheckCommand(command, "--check"),
                checkout,
                pdir / "checks" / "bench.log",
                timeout_sec=600,
                sandbox=box,
                repo_root=repo,
                commit=commit,
            )
        finally:
            worktree.release_checkout(checkout)
        if not result.passed:
            raise SystemExit(f"the check failed: {result.tail}")

    return run


def gate_runner(repo: Path, commit: str, command: str) -> Callable[[], None]:
    """The whole per-test verdict of a plan's commit; the base is computed on the first call."""
    import pygit2

    from papayu_git.check.gate import GateRequest, run_gate

    pyrepo = pygit2.Repository(str(repo))
    box = sandbox_mod.resolve(str(repo))
    tip = str(pyrepo.head.target)
    request = GateRequest(
        pyrepo, repo / ".git" / "papayu", repo, "bench", tip, commit, CheckCommand(command, "--check"), box, 600
    )

    def run() -> None:
        gate = run_gate(request)
        if not gate.lands:
            raise SystemExit(f"the gate refused: {gate.verdict}")

    return run


def direct_runner(cwd: Path, command: str, toggle: Callable[[], None] | None = None) -> Callable[[], None]:
    def run() -> None:
        if toggle:
            toggle()
        subprocess.run(["/bin/sh", "-c", command], cwd=cwd, check=True, capture_output=True, env=ENV)

    return run


def compare(name: str, papayu: Callable[[], None], direct: Callable[[], None], repeat: int) -> tuple[str, float, float]:
    runs: dict[str, list[float]] = {"papayu": [], "direct": []}
    pair = [("papayu", papayu), ("direct", direct)]
    for r in range(repeat + 1):
        for label, fn in pair if r % 2 else pair[::-1]:
            elapsed = timed(fn)
            if r:  # the first round warms caches
                runs[label].append(elapsed)
    return name, statistics.median(runs["papayu"]), statistics.median(runs["direct"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip-cargo", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="papayu-envbench-"))
    rows = []
    try:
        py = editable_project(base)
        commit = plan_commit(py, "src/calc/__init__.py", "return a + b", "return b + a")
        pytest_cmd = f"{py}/.venv/bin/python -m pytest -q -p no:cacheprovider"
        rows.append(
            compare(
                "pytest, editable install",
                check_runner(py, commit, pytest_cmd),
                direct_runner(py, pytest_cmd),
                args.repeat,
            )
        )
        verdict_row = compare(
            "verdict, cached base, pytest",
            gate_runner(py, commit, pytest_cmd),
            direct_runner(py, pytest_cmd),
            args.repeat,
        )
        rows.append((*verdict_row, TARGET_VERDICT))
        setup = compare(
            "sandbox set-up (`true`)", check_runner(py, commit, "true"), direct_runner(py, "true"), args.repeat * 2
        )
        if not args.skip_cargo and shutil.which("cargo"):
            rs = cargo_workspace(base)
            commit = plan_commit(rs, "a/src/lib.rs", "x * 1 + 1", "x * 1 + 1 + 0")
            twin = base / "rstwin"
            shutil.copytree(rs, twin, symlinks=True)
            lib = twin / "a/src/lib.rs"
            versions = [lib.read_text(), lib.read_text().replace("x * 1 + 1", "x * 1 + 1 + 0", 1)]
            state = {"i": 0}

            def toggle() -> None:
                state["i"] ^= 1
                lib.write_text(versions[state["i"]])

            rows.append(
                compare(
                    "cargo test, warm target/",
                    check_runner(rs, commit, "cargo test -q --offline"),
                    direct_runner(twin, "cargo test -q --offline", toggle),
                    args.repeat,
                )
            )
        elif not args.skip_cargo:
            print("cargo: not installed here, skipped")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'case':<28} {'papayu check':>13} {'direct':>9} {'ratio':>7}  verdict")
    for name, ours, theirs, *target in rows:
        limit = target[0] if target else TARGET_RATIO
        ratio = ours / theirs
        verdict = f"ok (<= {limit}x)" if ratio <= limit else f"OVER {limit}x"
        print(f"{name:<28} {ours:>12.3f}s {theirs:>8.3f}s {ratio:>6.2f}x  {verdict}")
    name, ours, theirs = setup
    extra_ms = (ours - theirs) * 1000
    verdict = "ok" if extra_ms <= TARGET_SETUP_MS else f"OVER {TARGET_SETUP_MS:.0f} ms"
    print(
        f"{name:<28} {ours:>12.3f}s {theirs:>8.3f}s {extra_ms:>5.0f}ms  {verdict} (target <= {TARGET_SETUP_MS:.0f} ms)"
    )


if __name__ == "__main__":
    main()
