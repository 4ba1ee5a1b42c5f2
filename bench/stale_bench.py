"""A stale plan's 3-way path against a fresh apply of the same patch (docs/DESIGN.md, "The
transaction and its guarantees").

On the cached synthetic repository of bench/apply_bench.py, the user commits a change to line 1
of the files a plan patches (line 6), after the plan was written: `papayu apply --no-check --json`
of that plan finds the version the plan saw in the history, patches it and merges it onto the
tip. The fresh apply is the same patch with the tip's sha256 as its base. Two depths: the plan's
version one commit back, and 199 back (the last commit the default papayu.stale.searchDepth of 200
reads, the tip included). The repository is reset to its cached commit afterwards.

    python bench/stale_bench.py [--size 20000] [--plans 1,10] [--repeat 7]

Target: the 3-way path <= 1.2x the fresh apply.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from apply_bench import CACHE, ENV, build_repo, content_of, git, make_diff, path_of, reset  # bench/apply_bench.py

# Commits between the plan's version and the tip: 199 puts it in the 200th commit the history walk
# reads (the tip is the first), the most the default papayu.stale.searchDepth reaches.
DEPTHS = (1, 199)


def user_edit(i: int) -> bytes:
    """The file as the user changed it after the plan: line 1 rewritten, line 6 (the plan's) untouched."""
    lines = content_of(i).decode().splitlines(keepends=True)
    lines[1] = lines[1].replace("some text", "USER text")
    return "".join(lines).encode()


def commit_history(repo: Path, base: str, indices: list[int], depth: int) -> str:
    """On ``base``: the user's edit of the planned files, then ``depth - 1`` commits of another
    file, so that the plan's version is ``depth`` commits back from the tip. Returns the tip."""
    stream = [b"commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000001 +0000\ndata 9\nuser edit\n"]
    stream.append(b"from %s\n" % base.encode())
    for i in indices:
        data = user_edit(i)
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path_of(i).encode(), len(data), data))
    for n in range(depth - 1):
        note = b"note %d\n" % n
        stream.append(b"commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000002 +0000\ndata 5\nnote\n")
        stream.append(b"M 100644 inline NOTES.txt\ndata %d\n%s\n" % (len(note), note))
    subprocess.run(["git", "fast-import", "--quiet", "--force"], cwd=repo, input=b"".join(stream), check=True, env=ENV)
    tip = git(repo, "rev-parse", "main").strip()
    reset(repo, tip)
    return tip


def run_apply(repo: Path, plan: Path) -> tuple[float, dict[str, float], dict[str, object]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", "apply", str(plan), "--no-check", "--json"],
        cwd=repo,
        capture_output=True,
        env=ENV,
    )
    elapsed = time.perf_counter() - start
    data = json.loads(proc.stdout)
    if proc.returncode != 0 or data.get("state") != "landed":
        raise SystemExit(f"apply failed: {proc.stdout.decode()[-2000:]} {proc.stderr.decode()[-2000:]}")
    return elapsed, data["timings"], data


def measure(repo: Path, base: str, n_patch: int, depth: int, repeat: int, tmp: Path) -> dict[str, float]:
    step = 20000 // max(n_patch, 1)
    indices = [k * step + 7 for k in range(n_patch)]
    _diff, actions = make_diff(indices)  # base_sha256: the version before the user's edit
    stale_plan, fresh_plan = tmp / f"stale-{n_patch}.json", tmp / f"fresh-{n_patch}.json"
    stale_plan.write_text(json.dumps({"actions": actions, "summary": "bench stale"}))
    fresh = [
        {**a, "base_sha256": hashlib.sha256(user_edit(i)).hexdigest()} for a, i in zip(actions, indices, strict=True)
    ]
    fresh_plan.write_text(json.dumps({"actions": fresh, "summary": "bench fresh"}))
    tip = commit_history(repo, base, indices, depth)
    stale, fresh_runs, stale_validate, fresh_validate = [], [], [], []
    for _ in range(repeat):
        elapsed, timings, data = run_apply(repo, stale_plan)
        assert len(data["rebased_from"]) == n_patch, data  # type: ignore[arg-type]
        stale.append(elapsed)
        stale_validate.append(timings["validate"])
        reset(repo, tip)
        elapsed, timings, data = run_apply(repo, fresh_plan)
        assert not data["rebased_from"], data
        fresh_runs.append(elapsed)
        fresh_validate.append(timings["validate"])
        reset(repo, tip)
    return {
        "stale": statistics.median(stale),
        "fresh": statistics.median(fresh_runs),
        "stale_min": min(stale),
        "fresh_min": min(fresh_runs),
        "stale_validate": statistics.median(stale_validate),
        "fresh_validate": statistics.median(fresh_validate),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--plans", default="1,10")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import compileall

    import papayu_git

    compileall.compile_dir(str(Path(papayu_git.__file__).parent), quiet=1)  # as apply_bench.py does
    tmp = CACHE / "plans"
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"building/using repo of {args.size} files ...", file=sys.stderr, flush=True)
    repo = build_repo(args.size)
    base = git(repo, "rev-parse", "main").strip()
    rows = []
    try:
        for n in (int(p) for p in args.plans.split(",")):
            for depth in DEPTHS:
                rows.append((n, depth, measure(repo, base, n, depth, args.repeat, tmp)))
    finally:
        git(repo, "update-ref", "refs/heads/main", base)
        reset(repo, base)
    ms = lambda s: f"{s * 1000:7.0f}"  # noqa: E731
    print(
        "| repo files | PATCH_FILEs | plan's version, commits back | stale (3-way) ms | fresh ms | ratio "
        "| ratio of fastest runs | stale validate ms | fresh validate ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for n, depth, r in rows:
        ratio, fastest = r["stale"] / r["fresh"], r["stale_min"] / r["fresh_min"]
        worst = max(worst, min(ratio, fastest))
        print(
            f"| {args.size} | {n} | {depth} | {ms(r['stale'])} | {ms(r['fresh'])} | {ratio:.2f}x | {fastest:.2f}x "
            f"| {ms(r['stale_validate'])} | {ms(r['fresh_validate'])} |"
        )
    print(
        f"\n3-way path against a fresh apply: worst {worst:.2f}x; target <= 1.2x: {'met' if worst <= 1.2 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
