"""`make demo`: papayu-git end to end on a built-in sample repository.

Validates a good and a bad plan, then runs the real transaction on a sample
project with a failing test: a wrong fix is rolled back (branch unchanged), the
right fix lands. (The LLM issue puts the model in front of the plans.)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "demo-work"


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def sh(*args: str, cwd: Path = WORK, check: bool = True) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(args), flush=True)
    proc = subprocess.run(args, cwd=cwd, text=True, capture_output=True)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo step failed: {' '.join(args)} (exit {proc.returncode})")
    return proc


def demo_validate(papayu: list[str]) -> None:
    step("A good plan validates")
    good = {"actions": [{"kind": "CREATE_FILE", "path": "hello.py", "content": "print('hi')\n"}],
            "summary": "add hello.py"}
    (WORK / "good.json").write_text(json.dumps(good))
    sh(*papayu, "validate", "good.json")
    step("A plan that writes into .git and a secret is rejected with ERR codes")
    bad = {"actions": [{"kind": "CREATE_FILE", "path": "src/.GIT/config", "content": "x"},
                       {"kind": "UPDATE_FILE", "path": ".env", "content": "TOKEN=1"}]}
    (WORK / "bad.json").write_text(json.dumps(bad))
    proc = sh(*papayu, "validate", "bad.json", check=False)
    assert proc.returncode == 1, "the bad plan must be rejected"
    step("The 12 golden traces of the original papa-yu replay with their recorded outcomes")
    traces = sorted(str(p) for p in (ROOT / "tests" / "golden" / "upstream").glob("v*/*.json"))
    sh(*papayu, "validate", *traces)



BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def sample_repo(name: str = "sample") -> Path:
    """A tiny project with a failing test, a local edit and an untracked note of the user's."""
    repo = WORK / name
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "Demo User"],
                 ["config", "user.email", "demo@example.com"], ["add", "-A"], ["commit", "-q", "-m", "calc"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "NOTES.md").write_text("my untracked notes\n")
    return repo


def patch_plan(new_line: str, summary: str) -> dict[str, object]:
    diff = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
            f"-    return a - b\n+    {new_line}\n")
    return {"actions": [{"kind": "PATCH_FILE", "path": "calc.py", "patch": diff,
                         "base_sha256": hashlib.sha256(BUGGY.encode()).hexdigest()}], "summary": summary}


def demo_apply(papayu: list[str]) -> None:
    repo = sample_repo()
    check = f"{sys.executable} -m pytest -q -p no:cacheprovider"
    sh("git", "config", "papayu.checkCommand", check, cwd=repo)
    step("The sample project's test fails")
    assert sh(*check.split(), cwd=repo, check=False).returncode != 0
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()

    step("A WRONG plan (a * b) is committed in a temporary worktree; the check fails there -> rolled back")
    (WORK / "wrong.json").write_text(json.dumps(patch_plan("return a * b", "use multiplication")))
    proc = sh(*papayu, "apply", str(WORK / "wrong.json"), cwd=repo, check=False)
    assert proc.returncode == 1, "the wrong plan must be rolled back"
    step("Your branch, working tree and untracked files are unchanged")
    sh("git", "log", "--oneline", cwd=repo)
    sh("git", "status", "--short", cwd=repo)
    assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() == head
    assert (repo / "calc.py").read_text() == BUGGY and (repo / "NOTES.md").exists()
    assert not sh("git", "branch", "--list", "papayu/*", cwd=repo).stdout.strip()

    step("The fix plan (a + b) passes the check in the worktree -> main is fast-forwarded")
    (WORK / "fix.json").write_text(json.dumps(patch_plan("return a + b", "fix add(): use addition")))
    sh(*papayu, "apply", str(WORK / "fix.json"), cwd=repo)
    sh("git", "log", "-1", "--format=%h %s%n%n%b", cwd=repo)
    assert "return a + b" in (repo / "calc.py").read_text() and (repo / "NOTES.md").exists()
    sh(*check.split(), cwd=repo)
    step("Plans and their states")
    sh(*papayu, "list", cwd=repo)


def demo_observability(papayu: list[str]) -> None:
    repo = WORK / "sample"
    step("Every apply left a trace (secrets masked); stats judge the v2 protocol over the last applies")
    sh(*papayu, "trace", "list", cwd=repo)
    sh(*papayu, "stats", "--last", "10", cwd=repo)
    step("Engineering memory: project defaults the model sees in ENGINEERING_MEMORY")
    sh(*papayu, "memory", "set", "project.test_roots", "tests", cwd=repo)
    sh(*papayu, "memory", "show", cwd=repo)
    sh("git", "checkout", "-q", "--", ".", cwd=repo)
    (repo / ".papa-yu" / "project.json").unlink()


def demo_hooks(papayu: list[str]) -> None:
    repo = WORK / "sample"
    step("The plain git pre-commit hook: an invalid plan file under .papa-yu/ cannot be committed")
    sh(*papayu, "hooks", "install", cwd=repo)
    (repo / ".papa-yu").mkdir(exist_ok=True)
    (repo / ".papa-yu" / "escape.json").write_text(json.dumps(
        {"actions": [{"kind": "CREATE_FILE", "path": "../outside.txt", "content": "x"}], "summary": "escape"}))
    sh("git", "add", ".papa-yu", cwd=repo)
    assert sh("git", "commit", "-q", "-m", "add a plan", cwd=repo, check=False).returncode != 0
    sh("git", "reset", "-q", cwd=repo)
    (repo / ".papa-yu" / "escape.json").unlink()


STRONGER_MODEL = """\
The embedded model (Gemma 3 270M) is tiny: papayu's validation and check are what keep it safe.
Point papayu at a stronger model for real work:
  OpenAI:        export PAPAYU_LLM_PROVIDER=openai OPENAI_API_KEY=sk-...  [PAPAYU_LLM_MODEL=gpt-4o-mini]
  Ollama:        export PAPAYU_LLM_PROVIDER=ollama PAPAYU_LLM_MODEL=qwen2.5-coder:7b
  llama.cpp/vLLM/LM Studio (OpenAI-compatible):
                 export PAPAYU_LLM_BASE_URL=http://127.0.0.1:8080/v1 PAPAYU_LLM_MODEL=<served model>
  (or the same keys in git config: git config papayu.llm.baseUrl ...; README: providers)"""


def demo_local_model(papayu: list[str]) -> None:
    """The model in front: plan -> apply on the embedded local model (issue 4 §6).

    The tiny model is often wrong; a rejected answer or a rolled-back fix is a valid ending:
    the point is that nothing reaches the user's branch unless the check passes."""
    import importlib.util
    import os

    step("The whole flow with a real model: the embedded local llama.cpp server (Gemma 3 270M)")
    if importlib.util.find_spec("llama_cpp") is None:
        print("papayu-git[local] is not installed here (make venv installs it); skipping the model step")
        print(STRONGER_MODEL)
        return
    repo = sample_repo("sample-llm")
    sh("git", "config", "papayu.checkCommand", f"{sys.executable} -m pytest -q -p no:cacheprovider", cwd=repo)
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPAYU_LLM_")}
    env.update(PAPAYU_LLM_MAX_TOKENS="400", PAPAYU_LLM_TIMEOUT_SEC="900", PAPAYU_LOG="1")
    goal = "fix the failing test tests/test_calc.py: add() must return a + b"
    print(f"$ git papayu fix {goal!r} -y    (no provider configured -> the local model is started)", flush=True)
    proc = subprocess.run([*papayu, "fix", goal, "-y"], cwd=repo, env=env, text=True, capture_output=True)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr[-6000:])
    landed = proc.returncode == 0 and sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() != head
    if landed:
        step("The model's fix passed the check in the worktree and landed")
        sh("git", "log", "-1", "--format=%h %s", cwd=repo)
    else:
        step("The model's answer was rejected, its change failed the check, or it edits the existing test "
             "(kept on papayu/<id> for review): nothing landed")
        assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() == head, "the branch must be unchanged"
        assert (repo / "calc.py").read_text() == BUGGY, "the working tree must be unchanged"
        sh("git", "status", "--short", cwd=repo)
    print()
    print(STRONGER_MODEL)


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    papayu = [sys.executable, "-m", "papayu_git"]
    demo_validate(papayu)
    demo_apply(papayu)
    demo_observability(papayu)
    demo_hooks(papayu)
    demo_local_model(papayu)
    print("\ndemo finished: bad plans rejected, the wrong fix rolled back, the right fix landed, "
          "and the local model's attempt ended cleanly")


if __name__ == "__main__":
    main()
