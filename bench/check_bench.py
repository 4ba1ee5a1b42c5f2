"""What the check's trust boundary costs: the bwrap sandbox per check, and the isolated checkout.

1. Sandbox overhead: a trivial check (`true`, and `python3 -c pass` with this interpreter)
   through `check.run_check` under bubblewrap (`sandbox.resolve()`, papayu.check.sandbox=auto) and
   with level none, in the same checkout, interleaved. Plus the uncached bwrap probe a fresh
   papayu process pays once, and a breakdown of bwrap's own start-up (plain subprocesses).
2. The check's checkout on synthetic repositories (bench/synthetic.py, cached under /tmp like
   apply_bench's, PAPAYU_BENCH_CACHE): first use (slot creation + full checkout) and reuse
   (moving to a commit that changes 0, 10 or 100 files, and back), for the isolated checkout
   (`worktree.acquire_checkout` + `release_checkout`) against the pool it replaced, a linked
   worktree reproduced with plain git (`git worktree add --detach --force` on first use;
   `git checkout --detach --force` + `git clean -ffdx` on reuse), interleaved.

Reuse is a first move after the first use (reported apart), then round trips there and back (both
moves timed), interleaved; a last table splits the isolated reuse into its two git commands and
papayu's own work. The run is done twice with the two designs' directories swapped (file
creation cost depends on the directory on this VM's disk). First uses stop after --first-budget
seconds per size (at least one per design and phase): writing tens of thousands of files takes
from 1 s to 30 s here. --pool-dir /dev/shm leaves the disk out.

    python bench/check_bench.py [--sizes 1000,20000,50000] [--repeat 20] [--first 5] [--reuse 9]

Targets: the sandbox adds <= 50 ms per check; reuse of the isolated checkout <= 1.5x the
linked-worktree reuse (10 files changed).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import synthetic  # noqa: E402  (bench/synthetic.py)

from papayu_git import check, worktree  # noqa: E402
from papayu_git.check import sandbox  # noqa: E402

CACHE = Path(os.environ.get("PAPAYU_BENCH_CACHE", "/tmp/papayu-bench-cache"))
WORK = CACHE / "check-bench"  # the pools of this run (--pool-dir); removed at the end
LINES = 12
CHANGES = (0, 10, 100)  # files a reuse move changes (0: the same commit, the floor)
TARGET_SANDBOX_MS = 50.0
TARGET_REUSE = 1.5


def path_of(i: int) -> str:  # the same repositories as apply_bench.py: one cache for both
    return f"src/d{i // 500:03d}/s{(i // 50) % 10}/f{i:05d}.txt"


def content_of(i: int) -> bytes:
    return "".join(f"file {i} line {n}: some text to patch\n" for n in range(LINES)).encode()


def build_repo(n_files: int) -> Path:
    return synthetic.build_repo(CACHE / f"repo-{n_files}", n_files, path_of, content_of)


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def change_commit(repo: Path, base: str, n_files: int, n_change: int) -> str:
    """A commit on ``base`` changing ``n_change`` files spread over the tree (fixed dates: the
    same commit every run). Made with fast-import under a scratch ref, which is then dropped."""
    if n_change == 0:
        return base
    step = max(1, n_files // n_change)
    ref = f"refs/papayu-check-bench/change-{n_change}"
    message = b"bench change %d\n" % n_change
    chunks = [
        b"commit %s\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata %d\n%sfrom %s\n"
        % (ref.encode(), len(message), message, base.encode())
    ]
    for k in range(n_change):
        i = k * step
        data = content_of(i).replace(b"some text", b"CHANGED text")
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path_of(i).encode(), len(data), data))
    git(repo, "fast-import", "--quiet", "--force", input=b"".join(chunks))
    commit = git(repo, "rev-parse", ref).strip()
    git(repo, "update-ref", "-d", ref)
    return commit


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# --- 1. the sandbox ------------------------------------------------------------------


def measure_sandbox(
    repeat: int,
) -> tuple[list[tuple[str, list[float], list[float]]], list[float], list[tuple[str, str, list[float]]], str]:
    """(command, bwrap times, none times) per command; uncached probe times; bwrap breakdown."""
    import pygit2

    repo_path = build_repo(1000)
    repo = pygit2.Repository(str(repo_path))
    head = str(repo.head.target)
    bwrap = sandbox.resolve(str(repo_path))
    if not bwrap.sandboxed:
        raise SystemExit(f"no bwrap sandbox here ({bwrap.reason}): nothing to compare")
    none = sandbox.Sandbox(sandbox.NONE, None, False, "bench")
    python = os.path.realpath(sys.executable)  # not a pyenv shim on PATH: that is ~200 ms of bash
    commands = [("true", "true"), ("python3 -c pass", f"{shlex.quote(python)} -c pass")]
    checkout = worktree.acquire_checkout(repo, WORK / "sandbox" / "papayu", head, plan_id="bench")
    log = WORK / "sandbox" / "check.log"
    rows = []
    try:
        for label, command in commands:
            runs: dict[str, list[float]] = {"bwrap": [], "none": []}
            cmd = check.CheckCommand(command, "--check")
            order = [("bwrap", bwrap), ("none", none)]
            for r in range(repeat + 1):
                for name, box in order if r % 2 else order[::-1]:
                    result: list[check.CheckResult] = []
                    elapsed = timed(
                        lambda: result.append(
                            check.run_check(
                                cmd, checkout, log, timeout_sec=60, sandbox=box, repo_root=repo_path, commit=head
                            )
                        )
                    )
                    if not result[0].passed:
                        raise SystemExit(f"{command} failed under {name}: {result[0].tail}")
                    if r:  # the first round warms the page cache
                        runs[name].append(elapsed)
            rows.append((label, runs["bwrap"], runs["none"]))
        probes = [timed(lambda: sandbox._probe.__wrapped__(bwrap.bwrap, False)) for _ in range(max(5, repeat // 2))]
        breakdown = bwrap_breakdown(bwrap, repo_path, checkout, python, repeat)
    finally:
        worktree.release_checkout(checkout)
    return rows, probes, breakdown, python


def bwrap_breakdown(
    box: sandbox.Sandbox, repo_path: Path, checkout: worktree.CheckCheckout, python: str, repeat: int
) -> list[tuple[str, str, list[float]]]:
    """Where bwrap's start-up goes: `sh -c true` with more and more of papayu's command line,
    and `python3 -c pass` without and with it, as plain subprocesses (no run_check around)."""
    from papayu_git.check.view import CheckView

    assert box.bwrap is not None
    bwrap = box.bwrap
    full = CheckView.prepare(checkout, box, repo_path, checkout.slot / "report").prefix
    cut = full.index("--overlay-src")
    true, py = ["/bin/sh", "-c", "true"], [python, "-c", "pass"]
    steps = [
        ("sh -c true", "no sandbox", true),
        ("sh -c true", "bwrap --ro-bind / /", [bwrap, "--ro-bind", "/", "/", "--", *true]),
        ("sh -c true", "+ --unshare-all", [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--", *true]),
        ("sh -c true", "papayu's argv without the overlays", [*full[:cut], "--", *true]),
        ("sh -c true", "papayu's argv (+ the checkout, git dir and environment overlays)", [*full, "--", *true]),
        ("python3 -c pass", "no sandbox", py),
        ("python3 -c pass", "papayu's argv", [*full, "--", *py]),
    ]
    times: dict[tuple[str, str], list[float]] = {(group, label): [] for group, label, _ in steps}
    for r in range(repeat + 1):
        for group, label, argv in steps if r % 2 else steps[::-1]:
            elapsed = timed(lambda: subprocess.run(argv, check=True, stdin=subprocess.DEVNULL))
            if r:
                times[(group, label)].append(elapsed)
    return [(group, label, samples) for (group, label), samples in times.items()]


# --- 2. the checkout -----------------------------------------------------------------


GIT_TIMES: dict[str, float] = {}  # git subcommand -> seconds, of the isolated checkout's last use
_run_git = worktree.run_git


def _timed_run_git(args: list[str], **kwargs: object) -> object:
    start = time.perf_counter()
    try:
        return _run_git(args, **kwargs)  # type: ignore[arg-type]
    finally:
        sub = next(a for a in args if not a.startswith("-"))
        GIT_TIMES[sub] = GIT_TIMES.get(sub, 0.0) + time.perf_counter() - start


worktree.run_git = _timed_run_git  # type: ignore[assignment]  # where the isolated reuse goes


class Isolated:
    """The isolated checkout of papayu now: a slot of its own (objects via alternates)."""

    name = "isolated checkout"

    def __init__(self, repo_path: Path, work: Path) -> None:
        import pygit2

        self.repo = pygit2.Repository(str(repo_path))
        self.papayu_dir = work / "papayu"

    def first(self, commit: str) -> None:
        checkout = worktree.acquire_checkout(self.repo, self.papayu_dir, commit, plan_id="bench")
        worktree.release_checkout(checkout)
        assert checkout.fresh

    def move(self, commit: str) -> None:
        GIT_TIMES.clear()
        checkout = worktree.acquire_checkout(self.repo, self.papayu_dir, commit, plan_id="bench")
        worktree.release_checkout(checkout)
        assert not checkout.fresh

    def remove(self) -> None:
        shutil.rmtree(self.papayu_dir, ignore_errors=True)


class Linked:
    """The pool it replaced: a linked worktree of the user's repository, reused."""

    name = "linked worktree (old)"

    def __init__(self, repo_path: Path, work: Path) -> None:
        self.repo_path = repo_path
        self.path = work / "linked-wt"

    def first(self, commit: str) -> None:
        git(self.repo_path, "worktree", "add", "-q", "--detach", "--force", str(self.path), commit)

    def move(self, commit: str) -> None:
        git(self.path, "checkout", "--detach", "--force", "-q", commit)
        git(self.path, "clean", "-q", "-ff", "-d", "-x")

    def remove(self) -> None:
        if self.path.exists():
            git(self.repo_path, "worktree", "remove", "--force", "--force", str(self.path))
        git(self.repo_path, "worktree", "prune")


def measure_checkout(size: int, n_first: int, budget: float, n_reuse: int) -> dict[str, dict[str, list[float]]]:
    """design name -> {"first": [...], "reuse 10": [...], ...} (seconds).

    Two phases with the designs' directories swapped: on this VM's ext4, creating a file costs
    0.03 to 0.8 ms depending on the directory it goes in (inode allocation; same in plain
    Python), which would otherwise favour whichever design drew the faster directory. Each
    phase does up to ``n_first`` / 2 first uses (fewer once half of ``budget`` seconds are
    spent; at least one), one round trip reported apart (the first move after a first use
    refreshes the whole index: files as new as the index are hashed again), then
    ``n_reuse`` / 2 round trips per change size, interleaved.
    """
    repo_path = build_repo(size)
    base = git(repo_path, "rev-parse", "HEAD").strip()
    targets = {n: change_commit(repo_path, base, size, n) for n in CHANGES}
    work = WORK / f"repo-{size}"
    times: dict[str, dict[str, list[float]]] = {
        name: {"first": [], "first reuse": [], **{f"reuse {n}": [] for n in CHANGES}}
        for name in (Isolated.name, Linked.name)
    }
    for phase, (here, there) in enumerate((("a", "b"), ("b", "a"))):
        designs: list[Isolated | Linked] = [Isolated(repo_path, work / here), Linked(repo_path, work / there)]
        try:
            start = time.perf_counter()
            for r in range(max(1, (n_first + 1 - phase) // 2)):
                if r and time.perf_counter() - start > budget / 2:
                    break
                for design in designs if (r + phase) % 2 == 0 else designs[::-1]:  # who goes first alternates
                    design.remove()
                    os.sync()  # the deletions are written out before the clock starts
                    times[design.name]["first"].append(timed(lambda: design.first(base)))
            for design in designs:  # the first move after a first use (the index is refreshed) is not typical
                times[design.name]["first reuse"].append(timed(lambda: design.move(targets[10])))
                design.move(base)
            for r in range(max(1, (n_reuse + 1 - phase) // 2)):
                for n in CHANGES:
                    order = designs if (r + phase) % 2 == 0 else designs[::-1]
                    for commit in (targets[n], base):  # there and back: both moves change n files
                        for design in order:
                            times[design.name][f"reuse {n}"].append(timed(lambda: design.move(commit)))
                            if isinstance(design, Isolated):
                                parts = times[design.name]
                                for sub in ("checkout", "clean"):
                                    parts.setdefault(f"reuse {n} git {sub}", []).append(GIT_TIMES[sub])
                                parts.setdefault(f"reuse {n} own", []).append(
                                    parts[f"reuse {n}"][-1] - GIT_TIMES["checkout"] - GIT_TIMES["clean"]
                                )
        finally:
            for design in designs:
                design.remove()
    shutil.rmtree(work, ignore_errors=True)
    return times


# --- output ----------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def verdict(ratios: tuple[float, float], ok: Callable[[float], bool]) -> str:
    return "met" if all(ok(r) for r in ratios) else "met by the fastest runs" if ok(ratios[1]) else "NOT met"


def print_sandbox(
    rows: list[tuple[str, list[float], list[float]]],
    probes: list[float],
    breakdown: list[tuple[str, str, list[float]]],
    python: str,
    repeat: int,
) -> None:
    print(
        f"| check through run_check (median of {repeat}, interleaved) | bwrap ms | no sandbox ms | added ms "
        "| added ms, fastest runs |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, boxed, bare in rows:
        print(
            f"| `{label}` | {ms(statistics.median(boxed))} | {ms(statistics.median(bare))} "
            f"| {ms(statistics.median(boxed) - statistics.median(bare))} | {ms(min(boxed) - min(bare))} |"
        )
    print(
        f"| bwrap probe, uncached (once per papayu process; median of {len(probes)}) "
        f"| {ms(statistics.median(probes))} | | | |"
    )
    print(f"\n(`python3` is {python}.)")
    for label, boxed, bare in rows:
        added = (statistics.median(boxed) - statistics.median(bare), min(boxed) - min(bare))
        print(
            f"sandbox overhead for `{label}`: {added[0] * 1000:+.1f} ms (median), {added[1] * 1000:+.1f} ms "
            "(fastest runs); "
            f"target <= {TARGET_SANDBOX_MS:.0f} ms: {verdict(added, lambda a: a * 1000 <= TARGET_SANDBOX_MS)}"
        )
    print(
        "run_check is woken by the check's exit (pidfd); the plain subprocesses below show bwrap's own "
        "start-up without papayu around it."
    )
    base = {group: statistics.median(samples) for group, label, samples in breakdown if label == "no sandbox"}
    print(f"\n| where bwrap's start-up goes (plain subprocesses, median of {repeat}) | ms | over no sandbox, ms |")
    print("|---|---:|---:|")
    for group, label, samples in breakdown:
        print(
            f"| `{group}`: {label} | {ms(statistics.median(samples))} "
            f"| {ms(statistics.median(samples) - base[group])} |"
        )


def print_checkout(results: list[tuple[int, dict[str, dict[str, list[float]]]]]) -> None:
    med = lambda v: statistics.median(v)  # noqa: E731
    print(
        "\n| repo files | checkout | first use ms (runs) | first reuse, 10 files ms | reuse, same commit ms "
        "| reuse, 10 files changed ms | reuse, 100 files ms | reuse moves each | reuse 10 new/old "
        "| new/old, fastest runs |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, times in results:
        new, old = times[Isolated.name], times[Linked.name]
        for name, t in times.items():
            ratio = fastest = ""
            if t is new:
                ratio = f"{med(new['reuse 10']) / med(old['reuse 10']):.2f}x"
                fastest = f"{min(new['reuse 10']) / min(old['reuse 10']):.2f}x"
            print(
                f"| {size} | {name} | {ms(med(t['first']))} ({len(t['first'])}) | {ms(med(t['first reuse']))} "
                f"| {ms(med(t['reuse 0']))} "
                f"| {ms(med(t['reuse 10']))} | {ms(med(t['reuse 100']))} | {len(t['reuse 10'])} "
                f"| {ratio} | {fastest} |"
            )
    print()
    for size, times in results:
        new, old = times[Isolated.name], times[Linked.name]
        ratios = (med(new["reuse 10"]) / med(old["reuse 10"]), min(new["reuse 10"]) / min(old["reuse 10"]))
        first = med(new["first"]) / med(old["first"])
        print(
            f"reuse at 10 files on {size} files: {ratios[0]:.2f}x the linked worktree (median), {ratios[1]:.2f}x "
            f"(fastest runs); target <= {TARGET_REUSE}x: {verdict(ratios, lambda r: r <= TARGET_REUSE)}; "
            f"first use {first:.2f}x (median)"
        )
    print(
        "\n| repo files | isolated reuse, files changed | total ms | git checkout ms | git clean ms "
        "| papayu's own ms (lock, slot restore) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for size, times in results:
        new = times[Isolated.name]
        for n in CHANGES:
            total, co, clean, own = (med(new[f"reuse {n}{k}"]) for k in ("", " git checkout", " git clean", " own"))
            print(f"| {size} | {n} | {ms(total)} | {ms(co)} | {ms(clean)} | {ms(own)} |")


def main() -> None:
    global WORK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,20000,50000")
    parser.add_argument("--repeat", type=int, default=20, help="runs of each trivial check (table 1)")
    parser.add_argument("--first", type=int, default=5, help="most first uses per design and size")
    parser.add_argument(
        "--first-budget",
        type=float,
        default=20.0,
        help="seconds of first uses per size after which no new round starts (at least one)",
    )
    parser.add_argument("--reuse", type=int, default=9, help="round trips per change size (5 from 50k files)")
    parser.add_argument(
        "--pool-dir", type=Path, help="where the checkouts go (e.g. on /dev/shm to leave the disk out); removed after"
    )
    parser.add_argument("--no-sandbox-table", action="store_true")
    parser.add_argument("--no-checkout-table", action="store_true")
    args = parser.parse_args()
    if args.pool_dir is not None:
        WORK = args.pool_dir / "papayu-check-bench"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    shutil.rmtree(WORK, ignore_errors=True)  # what a killed run left
    WORK.mkdir(parents=True)
    try:
        if not args.no_sandbox_table:
            print("timing the sandbox ...", file=sys.stderr, flush=True)
            rows, probes, breakdown, python = measure_sandbox(args.repeat)
        results = []
        for size in [] if args.no_checkout_table else sizes:
            print(f"building/using repo of {size} files ...", file=sys.stderr, flush=True)
            build_repo(size)
            git(CACHE / f"repo-{size}", "worktree", "prune")
            n_reuse = args.reuse if size < 50000 else min(args.reuse, 5)
            results.append((size, measure_checkout(size, args.first, args.first_budget, n_reuse)))
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    if not args.no_sandbox_table:
        print_sandbox(rows, probes, breakdown, python, args.repeat)
    if results:
        print(f"\n(checkouts under {WORK}, repositories under {CACHE})")
        print_checkout(results)


if __name__ == "__main__":
    main()
