"""Observability costs: masking, trace writes, stats over many traces, the MEMORY block.

Targets: masking 1 MB of adversarial model output (a secret every 21 lines) ≤ 250 ms; a trace write ≤ 20 ms; `stats` over
10,000 traces ≤ 3 s; build_memory_block ≤ 20 ms. Prints a table.

    .venv/bin/python bench/observability_bench.py [--traces 10000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from papayu_git import memory, secrets, stats, traces

SECRETS_LINE = (
    "Authorization: Bearer tok9f8e7d6c5b4a3f2e1d0c ghp_R4nd0mT0k3nV4lu3Abcdefghij1234567890 "
    "api_key=live_abcdef1234567890 https://u:pw123456@host/x\n"
)


def model_output(size: int) -> str:
    code = "def handler(item):\n    value = compute(item, 42)  # ordinary code line\n    return value\n"
    block = code * 20 + SECRETS_LINE
    return (block * (size // len(block) + 1))[:size]


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def fake_trace(i: int) -> dict[str, object]:
    fallback = i % 50 == 0
    return {
        "trace_id": f"t{i:06d}",
        "created_at": f"2026-01-01T00:00:{i:06d}Z",
        "command": "apply",
        "request": {"mode": "apply", "latency_ms": 100 + i % 900},
        "validated_json": {"actions": [{"kind": "CREATE_FILE", "path": f"f{i}.py", "content": "x = 1\n" * 50}]},
        "validation_outcome": "ok",
        "protocol_repair_attempt": i % 7 == 0,
        "protocol_fallback_attempted": fallback,
        "protocol_fallback_reason": "ERR_PATCH_APPLY_FAILED" if fallback else None,
        "check": {"state": "passed" if i % 9 else "failed"},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=10_000)
    args = parser.parse_args(argv)
    rows = []
    text = model_output(1_000_000)
    ms = median_ms(lambda: secrets.mask(text), 5)
    rows.append(("mask 1 MB of model output", f"{ms:.1f} ms", f"{1000 / ms:.1f} MB/s", "<= 250 ms"))
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        pdir = repo / ".git" / "papayu"
        data = {
            "command": "apply",
            **traces.schema_fields(2),
            "validated_json": json.loads(
                json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "a.py", "content": text[:50_000]}]})
            ),
        }
        ms = median_ms(lambda: traces.write_trace(pdir, traces.new_trace_id(), data), 20)
        rows.append(("write_trace (50 KB answer)", f"{ms:.1f} ms", "", "<= 20 ms"))
        bulk = Path(tmp) / "bulk"
        bulk.mkdir()
        for i in range(args.traces):
            (bulk / f"t{i:06d}.json").write_text(json.dumps(fake_trace(i)))
        start = time.perf_counter()
        result = stats.compute_stats(traces.load_traces(bulk), 100)
        ms = (time.perf_counter() - start) * 1000
        rows.append(
            (
                f"load + stats over {args.traces} traces",
                f"{ms:.0f} ms",
                f"apply_count={result['apply_count']}",
                "<= 3000 ms",
            )
        )
        memory.set_values(repo, {"project.default_test_command": "pytest -q", "project.ci_notes": "n" * 20_000})
        ms = median_ms(lambda: memory.build_memory_block(repo), 20)
        rows.append(
            (
                "build_memory_block (20 KB notes)",
                f"{ms:.1f} ms",
                f"{len(memory.build_memory_block(repo).encode())} bytes",
                "<= 20 ms",
            )
        )
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'time':>10}  {'':<22}  target")
    for name, value, extra, target in rows:
        print(f"{name:<{width}}  {value:>10}  {extra:<22}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
