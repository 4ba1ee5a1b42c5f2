"""`git papayu agent`: papayu's own time per step, and apply_patch against change size.

Per step: a scripted local server answers every turn at once with one tool call (read_file,
search_in_repo, list_files, apply_patch, get_env in turn); papayu's time for a turn is the turn's
wall time minus the measured HTTP round trip (ToolTurn.model_sec), i.e. tool execution, argument
parsing and message building. Target: median ≤ 30 ms per step at 20k files.
apply_patch: one multi-file diff of 1, 10 and 100 files (split, dry-run with the tolerant engine,
whole-workspace validation, overlay update) on a fresh workspace.

    .venv/bin/python bench/agent_bench.py [--files 20000] [--steps 40] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import synthetic  # noqa: E402
from llm_server import ScriptedLLM, chat, tool_calls  # noqa: E402

CACHE = Path(os.environ.get("PAPAYU_BENCH_CACHE", "/tmp/papayu-bench-cache")) / "agent"
TARGET_MS = 30.0


def module_text(i: int) -> str:
    body = "".join(f"    value_{j} = compute_{j}(item, {i})\n" for j in range(12))
    return f'"""Module {i}."""\n\n\ndef handler_{i}(item):\n{body}    return item\n'


def path_of(i: int) -> str:
    return f"pkg{i % 200:03d}/mod_{i:05d}.py"


def diff_for(indices: list[int], tag: str) -> str:
    parts = []
    for i in indices:
        path = path_of(i)
        parts.append(
            f"--- a/{path}\n+++ b/{path}\n@@ -4,3 +4,3 @@\n def handler_{i}(item):\n"
            f"-    value_0 = compute_0(item, {i})\n+    value_0 = compute_0(item, {i})  # {tag}\n"
            f"     value_1 = compute_1(item, {i})\n"
        )
    return "".join(parts)


def calls(steps: int, files: int) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for k in range(steps):
        i = (k * 7919) % files
        kind = k % 5
        if kind == 0:
            out.append(("read_file", {"path": path_of(i)}))
        elif kind == 1:
            out.append(("search_in_repo", {"query": f"handler_{i}(", "glob": "*.py"}))
        elif kind == 2:
            out.append(("list_files", {"root": f"pkg{i % 200:03d}", "max_results": 50}))
        elif kind == 3:
            out.append(("apply_patch", {"diff": diff_for([i], f"step{k}")}))
        else:
            out.append(("get_env", {}))
    return out


class Timed:
    """A ChatClient wrapper: papayu's time per turn = (gap before this call since the previous
    answer) + (the call minus its HTTP round trip)."""

    def __init__(self, client: Any) -> None:
        self.client, self.config = client, client.config
        self.samples: list[float] = []
        self._answered: float | None = None

    def model(self) -> str:
        return str(self.client.model())

    def chat_with_tools(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int) -> Any:
        start = time.perf_counter()
        gap = start - self._answered if self._answered is not None else None
        turn = self.client.chat_with_tools(messages, tools, max_tokens)
        self._answered = time.perf_counter()
        if gap is not None:
            self.samples.append((gap + (self._answered - start - turn.model_sec)) * 1000)
        return turn


def per_step(repo: Path, steps: int) -> tuple[list[float], dict[str, list[float]]]:
    from papayu_git.agent import run_agent
    from papayu_git.git import papayu_dir
    from papayu_git.llm.session import open_client
    from papayu_git.repository import open_repo
    from papayu_git.transaction import ApplyOptions

    script = [tool_calls(c) for c in calls(steps, 20000)] + [chat("done")]
    server = ScriptedLLM(script)
    os.environ.update(server.env())
    try:
        repo_obj = open_repo(repo)
        with open_client(repo) as client:
            timed = Timed(client)
            done = run_agent(
                repo_obj,
                repo,
                papayu_dir(repo_obj),
                "bench",
                ApplyOptions(no_check=True),
                timed,  # type: ignore[arg-type]
                max_steps=steps + 1,
            )
    finally:
        server.close()
    by_tool: dict[str, list[float]] = {}
    for step in done.plan.extra["agent"]["steps"]:
        by_tool.setdefault(step["tool"], []).append(step["ms"])
    return timed.samples, by_tool


def patch_cost(repo: Path, sizes: list[int], runs: int) -> list[tuple[int, float]]:
    from papayu_git.agent_workspace import Workspace
    from papayu_git.repository import open_repo

    repo_obj = open_repo(repo)
    tip = str(repo_obj.head.target)
    out = []
    for size in sizes:
        diff = diff_for([(k * 197) % 20000 for k in range(size)], "bench")
        samples = []
        for _ in range(runs):
            ws = Workspace(repo_obj, tip, ())
            start = time.perf_counter()
            ws.apply_diff(diff)
            samples.append((time.perf_counter() - start) * 1000)
        out.append((size, statistics.median(samples)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    repo = synthetic.build_repo(CACHE / f"repo-{args.files}", args.files, path_of, lambda i: module_text(i).encode())
    os.environ.setdefault("GIT_AUTHOR_NAME", "Bench")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "bench@example.com")
    os.environ.setdefault("GIT_COMMITTER_NAME", "Bench")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "bench@example.com")
    samples, by_tool = per_step(repo, args.steps)
    median = statistics.median(samples)
    print(f"agent bench: {args.files} files, {len(samples)} steps (model time excluded)")
    print(f"{'per step':<22}{'median ms':>10}{'max ms':>10}")
    print(f"{'papayu (all tools)':<22}{median:>10.1f}{max(samples):>10.1f}   target <= {TARGET_MS:.0f} ms")
    for tool, values in sorted(by_tool.items()):
        print(f"{'  ' + tool:<22}{statistics.median(values):>10.1f}{max(values):>10.1f}")
    print(f"\n{'apply_patch files':<22}{'median ms':>10}{'ms/file':>10}")
    for size, ms in patch_cost(repo, [1, 10, 100], args.runs):
        print(f"{size:<22}{ms:>10.1f}{ms / size:>10.2f}")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
