"""From the model's answer to the check's start, on first use: with and without the prewarm.

`git papayu fix GOAL --mode fixit -y --review --check CMD` on a synthetic repository
(bench/synthetic.py, cached under /tmp like the other benches, PAPAYU_BENCH_CACHE) whose check
pool is removed before every run (first use: no slot exists). The model is a tiny
OpenAI-compatible server in this process that answers after --delay seconds with one
CREATE_FILE action; it notes when it sent the answer. The check writes the time it started into
its work tree (`date +%s.%N`), read back after `fix` exits. Runs with and without the prewarm
(PAPAYU_CHECK_PREWARM=0) alternate; `--review` keeps every run on the same tip (the kept branch is
dropped afterwards).

    python bench/prewarm_bench.py [--sizes 50000,20000] [--delay 5] [--runs 2]

Target: answer -> check start <= 1 s with the prewarm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import synthetic  # noqa: E402  (bench/synthetic.py)

from papayu_git.locks import checkout_pool  # noqa: E402

CACHE = Path(os.environ.get("PAPAYU_BENCH_CACHE", "/tmp/papayu-bench-cache"))
TRASH_NAME = "prewarm-bench-trash"  # beside the repositories: the pools of this run, removed at the end
STARTED = ".papayu-bench-check-started"
TARGET_SEC = 1.0
GOAL = "add a NOTES.txt file"
FIX = [sys.executable, "-m", "papayu_git", "fix", GOAL, "--mode", "fixit", "-y", "--review", "--json"]


def path_of(i: int) -> str:  # the layout of check_bench.py / apply_bench.py
    return f"src/d{i // 500:03d}/s{(i // 50) % 10}/f{i:05d}.txt"


def content_of(i: int) -> bytes:
    return "".join(f"file {i} line {n}: some text to patch\n" for n in range(12)).encode()


class SlowModel:
    """Answers every chat completion after ``delay`` seconds; notes when each answer left."""

    def __init__(self, delay: float) -> None:
        self.answered: list[float] = []
        owner = self
        answer = {
            "summary": "add NOTES.txt",
            "actions": [{"kind": "CREATE_FILE", "path": "NOTES.txt", "content": "notes\n"}],
            "plan": [],
            "questions": [],
            "context_requests": [],
            "risks": [],
            "commands_to_run": [],
            "memory_patch": {},
        }

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                time.sleep(delay)
                body = json.dumps(
                    {
                        "id": "bench",
                        "object": "chat.completion",
                        "model": "bench-model",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": json.dumps(answer)},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                owner.answered.append(time.time())
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def wait_idle(repo: Path, timeout: float = 120) -> None:
    """Until no prewarm of an earlier run holds a lock."""
    from papayu_git import locks

    pdir = repo / ".git" / "papayu"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = checkout_pool(pdir)
        held = [p for p in [*pdir.glob("locks/*.lock"), *pool.glob("*.lock")] if _alive(locks, p)]
        if not held:
            return
        time.sleep(0.1)
    raise SystemExit(f"locks still held after {timeout}s")


def _alive(locks: Any, path: Path) -> bool:
    info = locks.read_lock(path)
    return info is not None and info.alive


def one_run(repo: Path, model: SlowModel, prewarm: bool) -> dict[str, float]:
    wait_idle(repo)
    # First use: no slot. Moved aside, not deleted: on this VM's disk, creating 50k files right
    # after deleting 50k others takes several times longer (seen: 7 s -> 32 s), for both variants.
    pool = checkout_pool(repo / ".git" / "papayu")
    if pool.exists():
        pool.rename(repo.parent / TRASH_NAME / f"{repo.name}-{time.monotonic_ns()}")
    env = {
        **os.environ,
        "PAPAYU_LLM_BASE_URL": model.url,
        "PAPAYU_LLM_MODEL": "bench-model",
        "PAPAYU_LLM_TIMEOUT_SEC": "120",
        "PAPAYU_CHECK_PREWARM": "1" if prewarm else "0",
    }
    check = f"date +%s.%N > {STARTED}"
    answers = len(model.answered)
    start = time.time()
    proc = subprocess.run(
        [*FIX, "--check", check],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    end = time.time()
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"fix failed (exit {proc.returncode}): {proc.stderr[-2000:]}") from None
    apply = result.get("apply") or {}
    if apply.get("state") != "review" or len(model.answered) != answers + 1:
        raise SystemExit(f"unexpected outcome: {json.dumps(result)[:2000]}\n{proc.stderr[-2000:]}")
    marks = sorted(checkout_pool(repo / ".git" / "papayu").glob(f"slot-*/work/{STARTED}"))
    check_started = float(marks[0].read_text().strip())
    git(repo, "branch", "-D", f"papayu/{result['plan']['plan_id']}")
    answered = model.answered[-1]
    return {
        "answer_to_check": check_started - answered,
        "total": end - start,
        "check_stage": float(apply.get("timings", {}).get("check", 0.0)),
        "slots": float(len(marks)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50000,20000")
    parser.add_argument("--delay", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=2, help="runs per size and variant (alternating)")
    parser.add_argument("--dir", help="where the repositories live (default: the bench cache; /dev/shm: no disk)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cache = Path(args.dir) if args.dir else CACHE
    (cache / TRASH_NAME).mkdir(parents=True, exist_ok=True)
    model = SlowModel(args.delay)
    rows = []
    try:
        for n in sizes:
            built = time.monotonic()
            repo = synthetic.build_repo(cache / f"prewarm-{n}", n, path_of, content_of)
            if time.monotonic() - built > 1:
                print(f"built {repo} ({n} files) in {time.monotonic() - built:.0f} s", file=sys.stderr)
            git(repo, "config", "user.name", "Bench")
            git(repo, "config", "user.email", "bench@example.com")
            results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
            for r in range(args.runs):
                for prewarm in (False, True) if r % 2 == 0 else (True, False):
                    run = one_run(repo, model, prewarm)
                    results[prewarm].append(run)
                    print(
                        f"{n} files, prewarm {'on ' if prewarm else 'off'}: answer -> check start "
                        f"{run['answer_to_check']:.2f} s (fix {run['total']:.1f} s)",
                        file=sys.stderr,
                    )
            for prewarm in (False, True):
                runs = results[prewarm]
                rows.append(
                    (
                        n,
                        "on" if prewarm else "off",
                        statistics.median(r["answer_to_check"] for r in runs),
                        max(r["answer_to_check"] for r in runs),
                        statistics.median(r["check_stage"] for r in runs),
                        statistics.median(r["total"] for r in runs),
                    )
                )
    finally:
        model.close()
        shutil.rmtree(cache / TRASH_NAME, ignore_errors=True)
    print(f"model answers after {args.delay:g} s; first use (no check slot yet); {args.runs} run(s) each")
    print(
        f"{'files':>7} {'prewarm':>8} {'answer->check (median)':>23} {'max':>7} {'check stage':>12} {'fix total':>10}"
    )
    ok = True
    for n, variant, median, worst, stage, total in rows:
        print(f"{n:>7} {variant:>8} {median:>21.2f} s {worst:>5.2f} s {stage:>10.2f} s {total:>8.1f} s")
        ok = ok and (variant == "off" or worst <= TARGET_SEC)
    print(f"target: answer -> check start <= {TARGET_SEC:g} s with the prewarm: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
