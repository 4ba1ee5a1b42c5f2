"""apply + land cost against `git apply --index` + `git commit` of the same diff (docs/DESIGN.md, "Landing").

Two ways. As a user meets it (the first table, `--mode user`): `git papayu apply PLAN --no-check -y`
through git, a new plan each round on a repository that keeps changing, against
`git apply --index - && git commit` on a twin (see measure_rounds). Then re-applying one plan after a
reset through `python -m papayu_git` (`--mode reset`), with papayu's stage timings and the check's
pooled worktree.

Synthetic repositories of 1k, 10k and 50k files are built once with `git fast-import`
and cached under /tmp (PAPAYU_BENCH_CACHE). For plans of 1, 10 and 100 PATCH_FILEs,
`papayu apply --no-check --json` is timed beside the baseline in the same run; both
land on the checked-out branch, which is reset between runs. papayu's own per-stage
timings (from --json) show its work without interpreter start-up. A last table times
the check stage with a pooled worktree: first use (git worktree add) and reuse.

A last line times `papayu apply --help` against `python -c pass`, in pairs.

    python bench/apply_bench.py [--mode both|user|reset] [--sizes 1000,10000,20000,50000]
        [--plans 1,10,100] [--repeat 7] [--rounds 30] [--user-sizes 1000,50000]
        [--papayu NAME=BIN ...]   # e.g. before=/tmp/v1/bin --papayu after=/tmp/v2/bin

Targets, at 10 files (medians): <= 1.5x the baseline on 50k files, <= 3x on 1k files, 1k -> 50k
growth <= 1.3x; no full checkout after the first use of a pooled worktree; `apply --help` <= 4x
`python -c pass` (docs/DESIGN.md, "Start-up and cost"). Beside the wall-clock ratios, the ratio of
CPU time (user + system of the processes each side ran) holds better on a machine that other work
keeps busy: waiting for a core is not counted.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import synthetic  # bench/synthetic.py

CACHE = Path(os.environ.get("PAPAYU_BENCH_CACHE", "/tmp/papayu-bench-cache"))
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
LINES = 12
# apply + land of 10 PATCH_FILEs on the largest and the smallest repository, the growth between
# them, and `apply --help`, against their baselines.
TARGET_FILES = 50000
TARGET_RATIO = 1.5
SMALL_FILES = 1000
SMALL_TARGET_RATIO = 3.0
GROWTH_TARGET = 1.3
HELP_TARGET_RATIO = 4.0


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, env=ENV)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def path_of(i: int) -> str:
    return f"src/d{i // 500:03d}/s{(i // 50) % 10}/f{i:05d}.txt"


def content_of(i: int) -> bytes:
    return "".join(f"file {i} line {n}: some text to patch\n" for n in range(LINES)).encode()


def build_repo(n_files: int) -> Path:
    """A cached repository of ``n_files`` files (one commit, checked out on main)."""
    return synthetic.build_repo(CACHE / f"repo-{n_files}", n_files, path_of, content_of)


def make_diff(indices: list[int]) -> tuple[str, list[dict[str, str]]]:
    """One hunk per file changing line 5; returns (combined diff, PATCH_FILE actions)."""
    combined, actions = [], []
    for i in indices:
        old = content_of(i).decode().splitlines(keepends=True)
        new = list(old)
        new[5] = new[5].replace("some text", "PATCHED text")
        hunk = "".join(
            [
                f"--- a/{path_of(i)}\n",
                f"+++ b/{path_of(i)}\n",
                "@@ -3,7 +3,7 @@\n",
                *(" " + line for line in old[2:5]),
                "-" + old[5],
                "+" + new[5],
                *(" " + line for line in old[6:9]),
            ]
        )
        combined.append(hunk)
        actions.append(
            {
                "kind": "PATCH_FILE",
                "path": path_of(i),
                "patch": hunk,
                "base_sha256": hashlib.sha256(content_of(i)).hexdigest(),
            }
        )
    return "".join(combined), actions


def timed(cmd: list[str], repo: Path, input: bytes | None = None) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=repo, input=input, capture_output=True, env=ENV)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-2000:]}")
    return elapsed, proc.stdout


def cpu_seconds() -> float:
    """User + system time of the finished child processes so far (their own children included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reset(repo: Path, base: str) -> None:
    git(repo, "reset", "-q", "--hard", base)


def measure(repo: Path, n_patch: int, repeat: int, tmp: Path) -> dict[str, float]:
    base = git(repo, "rev-parse", "HEAD").strip()
    step = max(1, (int(git(repo, "ls-files", "--", "src").count("\n")) // max(n_patch, 1)))
    diff, actions = make_diff([k * step for k in range(n_patch)])
    plan = tmp / f"plan-{n_patch}.json"
    plan.write_text(json.dumps({"actions": actions, "summary": f"bench {n_patch}"}))
    (tmp / "bench.diff").write_text(diff)
    ours, theirs, stages, ours_cpu, theirs_cpu = [], [], [], [], []
    for _ in range(repeat):
        cpu = cpu_seconds()
        elapsed, out = timed([sys.executable, "-m", "papayu_git", "apply", str(plan), "--no-check", "--json"], repo)
        ours.append(elapsed)
        ours_cpu.append(cpu_seconds() - cpu)
        stages.append(json.loads(out)["timings"])
        reset(repo, base)
        start, cpu = time.perf_counter(), cpu_seconds()
        timed(["git", "apply", "--index", str(tmp / "bench.diff")], repo)
        timed(["git", "commit", "-q", "-m", "baseline"], repo)
        theirs.append(time.perf_counter() - start)
        theirs_cpu.append(cpu_seconds() - cpu)
        reset(repo, base)
    inner = {k: statistics.median(s.get(k, 0.0) for s in stages) for k in ("validate", "build_commit", "land")}
    return {
        "papayu": statistics.median(ours),
        "baseline": statistics.median(theirs),
        "papayu_min": min(ours),
        "baseline_min": min(theirs),
        "papayu_cpu": statistics.median(ours_cpu),
        "baseline_cpu": statistics.median(theirs_cpu),
        **inner,
    }


def measure_check(repo: Path, tmp: Path) -> tuple[float, float]:
    """Check stage with `--check true`: first use of the pool (worktree add), then reuse."""
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "worktree", "prune")
    subprocess.run([sys.executable, "-m", "papayu_git", "gc", "--days", "0"], cwd=repo, env=ENV, capture_output=True)
    results = []
    for k in range(2):
        _diff, actions = make_diff([k * 7 + 3])
        plan = tmp / f"check-{k}.json"
        plan.write_text(json.dumps({"actions": actions, "summary": "bench check"}))
        _t, out = timed([sys.executable, "-m", "papayu_git", "apply", str(plan), "--check", "true", "--json"], repo)
        results.append(json.loads(out)["timings"]["check"])
        reset(repo, base)
    return results[0], results[1]


def papayu_argv() -> list[str]:
    """The console script a user runs, from this interpreter's environment."""
    script = Path(sys.executable).parent / "papayu"
    return [str(script)] if script.exists() else [sys.executable, "-m", "papayu_git"]


def measure_help(runs: int) -> dict[str, float]:
    """`papayu apply --help` and `python -c pass` one after the other, ``runs`` pairs: the median
    of the pairs' ratios holds when the machine's speed drifts during the run. Also the floor
    under every command: the interpreter importing click, before papayu does anything (apply and
    land import no pygit2: repository.py)."""
    ours, base, floor = [], [], []
    for _ in range(runs):
        ours.append(timed([*papayu_argv(), "apply", "--help"], CACHE)[0])
        base.append(timed([sys.executable, "-c", "pass"], CACHE)[0])
        floor.append(timed([sys.executable, "-c", "import click"], CACHE)[0])
    return {
        "papayu": statistics.median(ours),
        "baseline": statistics.median(base),
        "ratio": statistics.median(a / b for a, b in zip(ours, base, strict=True)),
        "floor": statistics.median(floor),
    }


# --- as a user meets it ----------------------------------------------------------------------
# A user's shell: the console scripts of an environment on PATH (where pip put git-papayu; by
# default this interpreter's), no identity in the environment (the repositories' config has it),
# byte code written.
BIN = Path(sys.executable).parent
USER_ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_")) and k != "PYTHONDONTWRITEBYTECODE"
}
# `git apply --index - && git commit -q -m x`, as two processes: a user's shell is running already.
USER_BASELINE = (["git", "apply", "--index", "-"], ["git", "commit", "-q", "-m", "x"])
PLANNED_FILES = 10


def user_run(cmd: list[str], cwd: Path, input: bytes | None = None, bin_dir: Path = BIN) -> bytes:
    env = {**USER_ENV, "PATH": f"{bin_dir}{os.pathsep}{USER_ENV.get('PATH', '')}"}
    proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return proc.stdout


def twins(size: int, sides: list[str]) -> dict[str, Path]:
    """Copies of the cached repository of ``size`` files, one per side (each papayu, and git's),
    each with a user's identity in its config and its index refreshed once (new inodes, as after
    a clone)."""
    pristine = build_repo(size)
    out = {}
    for side in sides:
        repo = CACHE / f"rounds-{size}-{side}"
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(pristine, repo, symlinks=True)
        user_run(["git", "config", "user.name", "Bench User"], repo)
        user_run(["git", "config", "user.email", "user@example.com"], repo)
        user_run(["git", "update-index", "-q", "--refresh"], repo)
        out[side] = repo
    return out


def plan_for(repo: Path, files: list[str], round_no: int) -> tuple[dict[str, object], bytes]:
    """The plan a model would write against the tip of ``repo`` (PATCH_FILEs with the tip's
    base_sha256, one changed line each, a different line every round) and the same change as
    one diff."""
    actions, diff = [], []
    for path in files:
        old = (repo / path).read_bytes()
        lines = old.decode().splitlines(keepends=True)
        at = (round_no * 5 + len(path)) % len(lines)
        new = [*lines[:at], f"round {round_no}: {lines[at]}", *lines[at + 1 :]]
        hunk = "".join(difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=3))
        actions.append(
            {"kind": "PATCH_FILE", "path": path, "patch": hunk, "base_sha256": hashlib.sha256(old).hexdigest()}
        )
        diff.append(hunk)
    return {"summary": f"round {round_no}", "actions": actions}, "".join(diff).encode()


def user_timed(cmds: list[list[str]], cwd: Path, input: bytes | None, bin_dir: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the processes and every child they waited for) of
    ``cmds`` run one after the other, ``input`` given to the first."""
    cpu, start = cpu_seconds(), time.perf_counter()
    for cmd in cmds:
        user_run(cmd, cwd, input, bin_dir)
        input = None
    return time.perf_counter() - start, cpu_seconds() - cpu


def tree_of(repo: Path) -> str:
    return user_run(["git", "rev-parse", "HEAD^{tree}"], repo).decode().strip()


Results = dict[int, dict[str, list[float]]]  # size -> "<side>", "<side>_cpu", stages, "load" -> per round


def measure_rounds(sizes: list[int], rounds: int, installs: dict[str, Path], tmp: Path) -> Results:
    """``rounds`` rounds; in each, every size's repositories are timed, each papayu of
    ``installs`` (name -> the bin directory of its environment) and git in turn, in an order that
    rotates round by round (sizes and sides), so that a ratio or a growth is taken between runs
    seconds apart. Each round's plan is written for the current tip and lands on top of the last,
    on every copy, whose trees must then be equal."""
    sides = [*installs, "git"]
    repos = {size: twins(size, sides) for size in sizes}
    count = {
        size: len(user_run(["git", "ls-files", "-z", "--", "src"], r["git"]).split(b"\0")) - 1
        for size, r in repos.items()
    }
    out: Results = {size: {k: [] for side in sides for k in (side, f"{side}_cpu")} for size in sizes}
    loads = []
    for r in range(rounds):
        runs: list[tuple[int, str, Callable[[], tuple[float, float]]]] = []
        for size, copies in repos.items():
            step = count[size] // PLANNED_FILES
            files = [path_of((k * step + r * 37) % count[size]) for k in range(PLANNED_FILES)]
            plan, diff = plan_for(copies["git"], files, r)
            plan_file = tmp / f"round-{size}-{r}.json"
            plan_file.write_text(json.dumps(plan))
            apply_cmd = ["git", "papayu", "apply", str(plan_file), "--no-check", "-y"]
            for name, bin_dir in installs.items():
                runs.append((size, name, functools.partial(user_timed, [apply_cmd], copies[name], None, bin_dir)))
            runs.append((size, "git", functools.partial(user_timed, list(USER_BASELINE), copies["git"], diff, BIN)))
        shift = r % len(runs)
        for size, side, run in runs[shift:] + runs[:shift]:
            wall, cpu = run()
            out[size][side].append(wall)
            out[size][f"{side}_cpu"].append(cpu)
        loads.append(os.getloadavg()[0])
        for size, copies in repos.items():
            if len({tree_of(repo) for repo in copies.values()}) != 1:
                raise SystemExit(f"round {r}: the copies of {size} files differ")
    for size, copies in repos.items():
        out[size]["load"] = loads
        for name in installs:
            out[size].update({f"{name}_{k}": v for k, v in recorded_stages(copies[name]).items()})
    return out


def recorded_stages(repo: Path) -> dict[str, list[float]]:
    """The stage timings papayu recorded in its traces, one per apply."""
    stages: dict[str, list[float]] = {"validate": [], "build_commit": [], "land": []}
    for trace in (repo / ".git" / "papayu" / "traces").glob("*.json"):
        timings = json.loads(trace.read_text()).get("timings") or {}
        for name, values in stages.items():
            values.append(timings.get(name, 0.0))
    return stages


def print_rounds(results: Results, installs: list[str]) -> None:
    """Medians of the rounds, and the median of each round's own ratio (papayu / git, same
    round): the ratio that holds while the machine's speed drifts; beside it the ratio of CPU
    time, which leaves out waiting for a core."""
    med = statistics.median
    ms = lambda s: f"{s * 1000:.0f}"  # noqa: E731
    ratio = lambda a, b: med(x / y for x, y in zip(a, b, strict=True))  # noqa: E731
    print(
        "| papayu | repo files | rounds | load | papayu ms | git apply + commit ms | ratio (median of rounds) "
        "| papayu CPU ms | git CPU ms | ratio of CPU time | validate ms | build_commit ms | land ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in installs:
        for size, r in sorted(results.items()):
            print(
                f"| {name} | {size} | {len(r[name])} | {med(r['load']):.1f} | {ms(med(r[name]))} | {ms(med(r['git']))} "
                f"| {ratio(r[name], r['git']):.2f}x | {ms(med(r[f'{name}_cpu']))} | {ms(med(r['git_cpu']))} "
                f"| {ratio(r[f'{name}_cpu'], r['git_cpu']):.2f}x | {ms(med(r[f'{name}_validate']))} "
                f"| {ms(med(r[f'{name}_build_commit']))} | {ms(med(r[f'{name}_land']))} |"
            )
    print()
    for name in installs:
        if TARGET_FILES in results:
            r = results[TARGET_FILES]
            wall, cpu = ratio(r[name], r["git"]), ratio(r[f"{name}_cpu"], r["git_cpu"])
            print(
                f"{name}, as a user meets it, on {TARGET_FILES} files: {wall:.2f}x (median of rounds), {cpu:.2f}x "
                f"(CPU time); target <= {TARGET_RATIO}x (median): {'met' if wall <= TARGET_RATIO else 'NOT met'}"
            )
        if len(results) > 1:
            small, large = results[min(results)], results[max(results)]
            growth, cpu = ratio(large[name], small[name]), ratio(large[f"{name}_cpu"], small[f"{name}_cpu"])
            print(
                f"{name}, growth as a user meets it, {min(results)} -> {max(results)} files: {growth:.2f}x (median "
                f"of rounds), {cpu:.2f}x (CPU time); target <= {GROWTH_TARGET}x (median): "
                f"{'met' if growth <= GROWTH_TARGET else 'NOT met'}"
            )
    print()


def installs_of(specs: list[str]) -> dict[str, Path]:
    """``--papayu NAME=BIN`` options (default: this interpreter's environment as "papayu")."""
    installs = {}
    for spec in specs or [f"papayu={BIN}"]:
        name, _, directory = spec.partition("=")
        if not (Path(directory) / "git-papayu").exists():
            raise SystemExit(f"no git-papayu in {directory}: install papayu-git into that environment")
        installs[name] = Path(directory)
    return installs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,20000,50000")
    parser.add_argument("--plans", default="1,10,100")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-check-table", action="store_true", help="skip the pooled-worktree table")
    parser.add_argument("--mode", choices=("both", "user", "reset"), default="both")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of the user-style table")
    parser.add_argument("--user-sizes", default="1000,50000", help="repositories of the user-style table")
    parser.add_argument(
        "--papayu",
        action="append",
        default=[],
        metavar="NAME=BIN",
        help="a papayu install for the user-style table: the bin directory of its environment (repeatable: "
        "before=..., after=..., timed round by round)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # Like a pip install (which byte-compiles), so PYTHONDONTWRITEBYTECODE=1 in a dev shell does not
    # make every run recompile the package from source (~60 ms).
    import compileall

    import papayu_git

    compileall.compile_dir(str(Path(papayu_git.__file__).parent), quiet=1)
    tmp = CACHE / "plans"
    tmp.mkdir(parents=True, exist_ok=True)
    if args.mode != "reset":
        installs = installs_of(args.papayu)
        print_rounds(
            measure_rounds([int(s) for s in args.user_sizes.split(",")], args.rounds, installs, tmp), list(installs)
        )
    if args.mode == "user":
        return
    rows, checks = [], []
    for size in sizes:
        print(f"building/using repo of {size} files ...", file=sys.stderr, flush=True)
        repo = build_repo(size)
        for n in (int(p) for p in args.plans.split(",")):
            rows.append((size, n, measure(repo, n, args.repeat, tmp)))
        if not args.no_check_table:
            checks.append((size, *measure_check(repo, tmp)))
    print_tables(rows, checks)
    print_help_ratio(measure_help(max(args.repeat * 3, 11)))


def print_tables(rows: list[tuple[int, int, dict[str, float]]], checks: list[tuple[int, float, float]]) -> None:
    """Medians of the runs, and the ratio of the fastest runs too: on this shared VM a run can
    be 20 % slower for reasons of its own, and the fastest one is the least disturbed
    (like `timeit`'s advice), for papayu and the baseline alike. The CPU ratio (medians of user +
    system time) leaves out the time either side waited for a core."""
    ms = lambda s: f"{s * 1000:8.0f}"  # noqa: E731
    print(
        "| repo files | PATCH_FILEs | papayu apply+land ms | git apply --index + commit ms | ratio "
        "| ratio of fastest runs | ratio of CPU time | papayu validate ms | build_commit ms | land ms "
        "| stages ms | stages/baseline |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, n, r in rows:
        inner = r["validate"] + r["build_commit"] + r["land"]
        print(
            f"| {size} | {n} | {ms(r['papayu'])} | {ms(r['baseline'])} | {r['papayu'] / r['baseline']:.2f}x "
            f"| {r['papayu_min'] / r['baseline_min']:.2f}x | {r['papayu_cpu'] / r['baseline_cpu']:.2f}x "
            f"| {ms(r['validate'])} | {ms(r['build_commit'])} | {ms(r['land'])} | {ms(inner)} "
            f"| {inner / r['baseline']:.2f}x |"
        )
    print()
    targets = {TARGET_FILES: TARGET_RATIO, SMALL_FILES: SMALL_TARGET_RATIO}
    for size, n, r in rows:
        if n == 10:
            ratios = (
                r["papayu"] / r["baseline"],
                r["papayu_min"] / r["baseline_min"],
                r["papayu_cpu"] / r["baseline_cpu"],
            )
            line = (
                f"end to end at 10 files on {size} files: {ratios[0]:.2f}x the baseline (median), "
                f"{ratios[1]:.2f}x (fastest runs), {ratios[2]:.2f}x (CPU time)"
            )
            if size in targets:
                line += f"; target <= {targets[size]}x (median): {'met' if ratios[0] <= targets[size] else 'NOT met'}"
            print(line)
    ten = {size: r for size, n, r in rows if n == 10}
    if len(ten) > 1:
        small, large = ten[min(ten)], ten[max(ten)]
        growth = large["papayu"] / small["papayu"]
        print(
            f"growth at 10 files, {min(ten)} -> {max(ten)} files: {growth:.2f}x (median), "
            f"{large['papayu_min'] / small['papayu_min']:.2f}x (fastest runs), "
            f"{large['papayu_cpu'] / small['papayu_cpu']:.2f}x (CPU time); target <= {GROWTH_TARGET}x (median): "
            f"{'met' if growth <= GROWTH_TARGET else 'NOT met'}"
        )
    if checks:
        print("\n| repo files | check stage, first use (worktree add) ms | check stage, pooled reuse ms |")
        print("|---:|---:|---:|")
        for size, first, again in checks:
            print(f"| {size} | {ms(first)} | {ms(again)} |")


def print_help_ratio(r: dict[str, float]) -> None:
    verdict = "met" if r["ratio"] <= HELP_TARGET_RATIO else "NOT met"
    print(
        f"\n`papayu apply --help` {r['papayu'] * 1000:.0f} ms, `python -c pass` {r['baseline'] * 1000:.0f} ms "
        f"(medians): {r['ratio']:.2f}x (median of pairs); target <= {HELP_TARGET_RATIO}x: {verdict}"
    )
    print(f"`python -c 'import click'` (the part of every command that is not papayu's): {r['floor'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
