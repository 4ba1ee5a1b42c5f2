"""`plan` on the embedded local model: where the time goes.

Target: everything except model time (context gathering, validation, storage, the rest of
papayu's own work) <= 200 ms and <= 5 % of the total. Prints a table; exits 1 when missed.
Needs papayu-git[local]; prints a note and exits 0 without it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
RUNS = int(os.environ.get("PLAN_BENCH_RUNS", "2"))


def sample_repo(root: Path) -> Path:
    repo = root / "sample"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "calc"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def main() -> int:
    if importlib.util.find_spec("xllamacpp") is None:
        print("plan_bench: papayu-git[local] is not installed; skipped")
        return 0
    from papayu_git.errors import PapayuError
    from papayu_git.llm.planner import PlanRequest, make_plan
    from papayu_git.llm.session import open_client

    os.environ.setdefault("PAPAYU_LLM_MAX_TOKENS", "256")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = sample_repo(Path(tmp))
        os.chdir(repo)
        started = time.perf_counter()
        with open_client(repo) as client:
            server_sec = time.perf_counter() - started
            for _ in range(RUNS):
                timings: dict[str, float] = {}
                try:
                    make_plan(repo, PlanRequest("fix the failing test tests/test_calc.py"), client, timings)
                    rows.append((timings, "ok"))
                except PapayuError as exc:  # the tiny model may fail validation: time still counts
                    rows.append((timings, getattr(exc, "cause_code", exc.code)))
    print(f"local server start: {server_sec * 1000:.0f} ms (not part of plan)")
    print(
        f"{'run':>3} {'context':>9} {'model':>9} {'validation':>11} {'storage':>9} {'other':>8} "
        f"{'non-model':>10} {'share':>6}  outcome"
    )
    ok = True
    for n, (t, outcome) in enumerate(rows, 1):
        if not t:
            print(f"{n:>3} {'-':>9} {'-':>9} {'-':>11} {'-':>9} {'-':>8} {'-':>10} {'-':>6}  {outcome}")
            continue
        parts = t["context"] + t["validation"] + t["storage"]
        other = max(0.0, t["total"] - t["model"] - parts)
        non_model = t["total"] - t["model"]
        share = non_model / t["total"] if t["total"] else 0.0
        ok = ok and non_model <= 0.200 and share <= 0.05
        print(
            f"{n:>3} {t['context'] * 1000:>7.1f}ms {t['model']:>8.2f}s {t['validation'] * 1000:>9.1f}ms "
            f"{t['storage'] * 1000:>7.1f}ms {other * 1000:>6.1f}ms {non_model * 1000:>8.1f}ms {share:>6.1%}  {outcome}"
        )
    print("target: non-model <= 200 ms and <= 5 % of the total:", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
