"""Regenerate tests/golden/v1 and v2 from real papayu traces (docs/CONTRIBUTING.md: golden update policy).

    .venv/bin/python tests/golden/regenerate.py [OUT_DIR] [--driver=validation]   # default: tests/golden

It first runs `python -m papayu_git.schemas --write`, so an edited schema's generated validator
(papayu_git/schema_validators/) is regenerated with the goldens.

For every scenario (tests/golden/scenarios.py) a real git repository is built and the real
commands run: `git papayu plan GOAL` and `git papayu apply ID --no-check -y` against
`ScriptedModel`, an OpenAI-compatible server on 127.0.0.1 whose answers are built from the
FILE[path] (sha256=…) headers it was sent; v2 scenarios run with PAPAYU_PROTOCOL_FALLBACK_TO_V1=0
so the golden records the v2 outcome. Each command writes its trace (.git/papayu/traces) and
the real CLI converts the chosen one: `git papayu trace golden ID OUT`.

`--driver=validation` runs the same rounds without the LLM layer: papayu's context engine
(ContextSession), validator, memory and patch engine, with the trace written by this script
in the layout of docs/ARCHITECTURE.md (the way the goldens were made before `plan` existed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden.scenarios import SCENARIOS, Answer, Scenario  # noqa: E402

MODEL = "scripted-golden"
PROVIDER = "openai-compatible"


class ScriptedModel:
    """An OpenAI-compatible /v1/chat/completions server (stdlib, 127.0.0.1:0) answering each request
    with the next scripted answer, built from the FILE[path] (sha256=…) headers it was sent; the
    last answer repeats (repair retries get the same answer)."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                model.requests.append(body)
                content = json.dumps(model.next_answer(body), ensure_ascii=False)
                data = json.dumps(
                    {
                        "id": "golden",
                        "object": "chat.completion",
                        "model": MODEL,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def next_answer(self, body: dict[str, Any]) -> Any:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
        shown = dict(_FILE_HEADER.findall(text))
        builder = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return builder(shown)

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


_FILE_HEADER = re.compile(r"FILE\[([^\]\n]+)\] \(sha256=([0-9a-f]{64})\)")


def make_repo(path: Path, files: dict[str, str | bytes]) -> Path:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    for args in (
        ["add", "-A"],
        ["-c", "user.name=golden", "-c", "user.email=golden@example.com", "commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env=env, capture_output=True)
    return path


class Round:
    """One LLM round of the validation driver: validate the scripted answer, record the trace."""

    def __init__(self, repo: Path, scenario: Scenario, plan_id: str) -> None:
        from papayu_git.context import ContextSession

        self.repo, self.scenario, self.plan_id = repo, scenario, plan_id
        self.session = ContextSession(repo, "HEAD")
        self.blocks = self.session.base_context(scenario.goal, scenario.log)
        self.text = self.session.render(self.blocks)

    def run(self, mode: str, answer: Any) -> str:
        from papayu_git import traces
        from papayu_git.errors import PapayuError

        started = time.monotonic()
        outcome, code = "ok", None
        try:
            self._check(mode, answer)
        except PapayuError as exc:
            outcome, code = ("ok" if exc.code in _APPLY_TIME else "err"), exc.code
        trace_id = traces.new_trace_id()
        input_chars = len(self.text) + len(self.scenario.goal)
        pdir = self.repo / ".git" / "papayu"
        traces.write_trace(
            pdir,
            trace_id,
            traces.record(
                mode,
                papayu_dir=pdir,
                trace_id=trace_id,
                protocol=self.scenario.protocol,
                plan_id=self.plan_id,
                goal=self.scenario.goal,
                driver="validation",
                request={
                    "mode": mode,
                    "provider": PROVIDER,
                    "model": MODEL,
                    "input_chars": input_chars,
                    "token_budget": 4096 if input_chars > 80_000 else 16384,
                    "strict_json": True,
                    "latency_ms": round((time.monotonic() - started) * 1000, 3),
                },
                context_stats=self.session.context_stats,
                cache_stats=self.session.cache_stats,
                plan_files=dict(self.session.files_shown),
                validated_json=answer,
                validation_outcome=outcome,
                error_code=code,
                protocol_default=self.scenario.protocol,
                protocol_attempts=[self.scenario.protocol],
                protocol_repair_attempt=0,
                protocol_fallback_attempted=False,
            ),
        )
        if mode == "plan" and isinstance(answer, dict) and answer.get("context_requests"):
            self.text = self.session.render(self.blocks + self.session.fulfil(answer["context_requests"]))
        return trace_id

    def _check(self, mode: str, answer: Any) -> None:
        from papayu_git.memory import apply_memory_patch
        from papayu_git.validate import validate_response

        response = validate_response(
            answer, protocol=self.scenario.protocol, mode=mode, read_files=dict(self.session.files_shown)
        )
        apply_memory_patch(self.repo, response.memory_patch, self.scenario.goal, accept_flag=False)
        if mode == "apply":
            preflight(self.repo, response.actions)


_APPLY_TIME = frozenset({"ERR_BASE_MISMATCH", "ERR_PATCH_APPLY_FAILED", "ERR_NON_UTF8_FILE"})


def preflight(repo: Path, actions: Any) -> None:
    """The bases against the blobs at HEAD (base_sha256), then the patch engine."""
    from papayu_git.apply import new_file_contents, sha256_hex
    from papayu_git.errors import PapayuError
    from papayu_git.git import run_git

    def read_blob(path: str) -> bytes | None:
        proc = run_git(["cat-file", "blob", f"HEAD:{path}"], cwd=repo, check=False, text=False)
        return proc.stdout if proc.returncode == 0 else None

    for action in actions:
        if action.base_sha256:
            blob = read_blob(action.path)
            if blob is not None and sha256_hex(blob) != action.base_sha256:
                raise PapayuError("ERR_BASE_MISMATCH", "sha256 at the branch tip differs", path=action.path)
    new_file_contents(actions, read_blob)


def shown_with_fallback(repo: Path, shown: dict[str, str]) -> dict[str, str]:
    """What the model copies base_sha256 from; a file shown without sha (non-UTF-8) is hashed
    from its blob, as a model that got the hash another way would."""
    from papayu_git.apply import sha256_hex

    class Shown(dict):  # type: ignore[type-arg]
        def __missing__(self, path: str) -> str:
            return sha256_hex((repo / path).read_bytes())

    return Shown(shown)


def run_scenario(scenario: Scenario, work: Path, out_dir: Path) -> Path:
    repo = make_repo(work / scenario.name.replace("/", "_"), scenario.repo_files())
    saved = {k: os.environ.get(k) for k in scenario.env}
    os.environ.update(scenario.env)
    try:
        rounds = Round(repo, scenario, plan_id=f"golden-{scenario.name.replace('/', '-')}")
        ids = {"plan": rounds.run("plan", scenario.plan(shown_with_fallback(repo, rounds.session.files_shown)))}
        if scenario.apply is not None:
            if scenario.between:
                scenario.between(repo)
            ids["apply"] = rounds.run("apply", scenario.apply(shown_with_fallback(repo, rounds.session.files_shown)))
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    return _convert(repo, ids[scenario.golden_of], out_dir / f"{scenario.name}.json", scenario.name)


def _papayu(repo: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", *args, "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"papayu {' '.join(args)}: no JSON (rc {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return data if isinstance(data, dict) else {}


def run_scenario_cli(scenario: Scenario, work: Path, out_dir: Path) -> Path:
    """The same scenario through the real `plan` / `apply` commands against ScriptedModel."""
    from papayu_git.golden import trace_mode
    from papayu_git.traces import load_traces, traces_dir

    repo = make_repo(work / scenario.name.replace("/", "_"), scenario.repo_files())
    first = scenario.plan(shown_with_fallback(repo, {}))
    final = (lambda shown: {**first, "context_requests": []}) if first.get("context_requests") else scenario.plan
    log = work / f"{scenario.name.replace('/', '_')}.log"
    log.write_text(scenario.log or "")
    with ScriptedModel([scenario.plan, final]) as model:
        env = {
            **scenario.env,
            "PAPAYU_LLM_PROVIDER": PROVIDER,
            "PAPAYU_LLM_BASE_URL": model.base_url,
            "PAPAYU_LLM_MODEL": MODEL,
            "PAPAYU_PROTOCOL_VERSION": str(scenario.protocol),
            "PAPAYU_PROTOCOL_FALLBACK_TO_V1": "0",
            "PAPAYU_TRACE_ENABLED": "1",
        }
        plan = _papayu(repo, env, "plan", scenario.goal, *(["--from-file", str(log)] if scenario.log else []))
        if scenario.apply is not None:
            if scenario.between:
                scenario.between(repo)
            model.answers = [scenario.apply]
            _papayu(repo, env, "apply", str(plan["plan_id"]), "--no-check", "-y")
    rounds = [
        t
        for t in load_traces(traces_dir(repo / ".git" / "papayu"))
        if trace_mode(t) == scenario.golden_of and "validated_json" in t
    ]
    if not rounds:
        raise SystemExit(f"{scenario.name}: no {scenario.golden_of} trace was written")
    return _convert(repo, str(rounds[-1]["trace_id"]), out_dir / f"{scenario.name}.json", scenario.name)


def _convert(repo: Path, trace_id: str, out: Path, name: str) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", "trace", "golden", trace_id, str(out)],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name}: trace golden failed:\n{proc.stdout}{proc.stderr}")
    return out


def generate(out_dir: Path, driver: str = "cli") -> list[Path]:
    run = run_scenario_cli if driver == "cli" else run_scenario
    with tempfile.TemporaryDirectory(prefix="papayu-golden-") as tmp:
        return [run(s, Path(tmp), out_dir) for s in SCENARIOS]


def main(argv: list[str]) -> int:
    from papayu_git import schemas

    schemas.main(["--write"])  # a changed schema also needs its generated validator (docs/CONTRIBUTING.md)
    driver = "validation" if "--driver=validation" in argv else "cli"
    paths = [a for a in argv if not a.startswith("--")]
    out_dir = Path(paths[0]) if paths else ROOT / "tests" / "golden"
    for path in generate(out_dir, driver):
        golden = json.loads(path.read_text())
        result = golden["result"]
        print(f"{path.relative_to(out_dir)}: {result['validation_outcome']} {result['error_code'] or ''}".rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
