"""What the sealed judge costs a plan that changes only code: next to nothing.

A plan that changes only source files is checked by one run (the regression run is its own tree)
plus what papayu reads before trusting the verdict (judges.py decides what is code and which
files are test support, check/reach.py reads the lines the plan adds on their syntax tree), with
the runtime shield in the check's pytest (results/shield.py: the audit hook, the reporting path
verified around every test) and the checked bytes kept for the landing. This bench applies the
same code-only plan with papayu as it is and with papayu at a baseline commit (--baseline,
default: main before the shield), through the real CLI on a real repository with a pytest suite,
interleaved, the base run cached for both. A plan that also changes a data file is timed next to
it: it pays the plan's own run on top.

    python bench/judge_bench.py [--repeat 7] [--files 2000] [--tests 60] [--baseline REV]

Target: code-only apply ≤ 1.1x the baseline (medians, same run). Both the wall time and the CPU
time of the apply (papayu, its git, the sandbox and the check's pytest: everything it waited for)
are given; on a machine shared with other jobs the wall time of one apply varies by tens of per
cent, its CPU time much less, so the target is read on the CPU time there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "fc94f75"  # main before the runtime shield and the sealed judge
TARGET = 1.1
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@x"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def build_repo(path: Path, n_files: int, n_tests: int) -> Path:
    path.mkdir(parents=True)
    for i in range(n_files):
        f = path / f"src/pkg/m{i // 100:03d}/f{i:05d}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"VALUE = {i}\n")
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "tests").mkdir()
    for i in range(n_tests):
        (path / f"tests/test_{i:03d}.py").write_text(
            f"from calc import add\n\n\ndef test_{i}():\n    assert add({i}, 1) == {i + 1}\n"
        )
    (path / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    (path / "testdata").mkdir()
    (path / "testdata/notes.txt").write_text("n\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "tip")
    git(path, "config", "papayu.check.command", PYTEST)
    git(path, "config", "papayu.check.prewarm", "false")
    return path


def plan_file(directory: Path, name: str, with_data: bool, n: int) -> Path:
    actions = [{"kind": "UPDATE_FILE", "path": "calc.py", "content": f"def add(a, b):\n    return a + b  # {n}\n"}]
    if with_data:
        actions.append({"kind": "UPDATE_FILE", "path": "testdata/notes.txt", "content": f"n {n}\n"})
    path = directory / f"{name}-{n}.json"
    path.write_text(json.dumps({"actions": actions, "summary": name}))
    return path


def apply(repo: Path, plan: Path, pythonpath: str | None) -> tuple[float, float]:
    """Wall and CPU seconds of one apply."""
    env = {**os.environ, "PAPAYU_PROTOCOL_VERSION": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", "apply", str(plan), "-y", "--review", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    data = json.loads(proc.stdout)
    if data.get("state") != "review":
        raise SystemExit(f"apply did not stop at review: {data.get('state')} {data.get('error')}")
    subprocess.run(
        [sys.executable, "-m", "papayu_git", "drop", data["plan_id"]], cwd=repo, env=env, capture_output=True
    )
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--tests", type=int, default=60)
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="papayu-judge-bench-"))
    try:
        old = work / "baseline"  # exported, not a worktree: the repository's worktrees stay as they are
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        repo = build_repo(work / "repo", args.files, args.tests)
        plans = work / "plans"
        plans.mkdir()
        times: dict[str, list[tuple[float, float]]] = {"baseline": [], "now": [], "now, with a data file": []}
        for who, path in (("baseline", str(old)), ("now", None)):  # each computes its base once, untimed
            apply(repo, plan_file(plans, f"warm-{who}", False, 0), path)
        for n in range(1, args.repeat + 1):
            times["baseline"].append(apply(repo, plan_file(plans, "old", False, n), str(old)))
            times["now"].append(apply(repo, plan_file(plans, "new", False, n), None))
            times["now, with a data file"].append(apply(repo, plan_file(plans, "data", True, n), None))
        print(f"\napply -y --review of a one-file plan; {args.files} files, {args.tests} tests, base cached")
        print(f"{'papayu':<24} {'wall min':>9} {'median':>8} {'x':>6} {'CPU min':>8} {'median':>8} {'x':>6}")
        wall = {name: [w for w, _ in values] for name, values in times.items()}
        cpu = {name: [c for _, c in values] for name, values in times.items()}
        for name in times:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            row = f"{name:<24} {min(wall[name]) * 1000:7.0f}ms {w * 1000:6.0f}ms {w / statistics.median(wall['baseline']):5.2f}x"
            print(
                f"{row} {min(cpu[name]) * 1000:6.0f}ms {c * 1000:6.0f}ms {c / statistics.median(cpu['baseline']):5.2f}x"
            )
        ratio = statistics.median(cpu["now"]) / statistics.median(cpu["baseline"])
        status = "ok" if ratio <= TARGET else "OVER"
        print(
            f"\ncode-only plan: {ratio:.2f}x the baseline's CPU time (target <= {TARGET}x): {status}; load {os.getloadavg()}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
