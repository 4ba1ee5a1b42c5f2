"""Start-up stays cheap (docs/DESIGN.md, "Start-up and cost"): building any `--help` imports click
and no heavy library, and the commands that never talk to a model never load the big feature
stacks, neither at import nor while they run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import git, make_repo, patch_action, write_plan

from papayu_git import paths

HEAVY = [
    "pygit2",
    "httpx",
    "httpcore",
    "jsonschema",
    "fastjsonschema",
    "unidiff",
    "mcp",
    "mcp_types",
    "anyio",
    "trafilatura",
]

# The model client and planner, research and its page reader, the MCP server, agent mode, the
# embedded model, and the libraries only they use.
FEATURE_STACKS = [
    "papayu_git.llm",
    "papayu_git.research",
    "papayu_git.webfetch",
    "papayu_git.mcp_server",
    "papayu_git.agent",
    "papayu_git.agent_tools",
    "papayu_git.agent_workspace",
    "httpx",
    "httpcore",
    "mcp",
    "mcp_types",
    "anyio",
    "pydantic",
    "trafilatura",
    "lxml",
    "xllamacpp",
]

# Runs the CLI like the console script, then reports what the interpreter loaded on the way.
PROBE = """
import json, os, sys
from papayu_git import cli

def report(code):
    loaded = set(sys.modules)
    found = lambda names: sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in loaded))
    with open(os.environ["STARTUP_PROBE_OUT"], "w") as out:
        paths = sys.modules.get("papayu_git.paths")  # the path-pattern lists it compiled
        compiled = sorted(len(p) for p in paths._COMPILED) if paths else []
        ours = sorted(m for m in loaded if m.startswith("papayu_git."))
        json.dump({"code": code, "heavy": found(%r), "stacks": found(%r), "patterns": compiled, "ours": ours}, out)

try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    report(exc.code)
    raise
report(None)
""" % (HEAVY, FEATURE_STACKS)


def probe(*args: str, cwd: Path | None = None, preamble: str = "") -> dict[str, Any]:
    """`papayu ARGS` in a fresh interpreter: exit code, stdout, stderr, the heavy libraries and
    feature stacks in sys.modules once the command has finished, the sizes of the path-pattern
    lists (paths.py) it compiled, and papayu's modules it loaded."""
    out = Path(os.environ["HOME"]) / "startup-probe.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", preamble + PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "STARTUP_PROBE_OUT": str(out)},
    )
    assert out.exists(), f"papayu {' '.join(args)} did not finish: {proc.stderr[-3000:]}"
    return {**json.loads(out.read_text()), "stdout": proc.stdout, "stderr": proc.stderr}


def test_root_help_imports_no_heavy_library() -> None:
    result = probe("--help")
    assert result["code"] == 0
    assert "validate" in result["stdout"] and "Usage:" in result["stdout"]
    assert result["heavy"] == []


def test_every_command_help_imports_no_heavy_library() -> None:
    from papayu_git.cli import LAZY_COMMANDS

    for name in LAZY_COMMANDS:
        result = probe(name, "--help")
        assert result["code"] == 0 and "Usage:" in result["stdout"], name
        assert result["heavy"] == [], f"`papayu {name} --help` imports {result['heavy']}"


def test_apply_help_loads_the_command_and_not_the_transaction() -> None:
    """`apply --help` is click and commands/apply.py: the transaction and the repository load
    when a plan is applied (bench/apply_bench.py holds it under 4x `python -c pass`)."""
    script = (
        "import sys\nfrom papayu_git import cli\n"
        "try:\n    cli.main(['apply', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('papayu_git.')), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "Usage:" in proc.stdout, proc.stderr[-2000:]
    loaded = proc.stderr.strip().splitlines()[-1]
    for module in ("papayu_git.transaction", "papayu_git.housekeeping", "papayu_git.objects", "papayu_git.landing"):
        assert f"'{module}'" not in loaded, loaded


def test_the_probe_would_notice_a_heavy_import() -> None:
    assert probe("--help", preamble="import jsonschema\n")["heavy"] == ["jsonschema"]


CALC = "def add(a, b):\n    return a - b\n"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"


def create(tmp_path: Path, name: str) -> str:
    action = {"kind": "CREATE_FILE", "path": f"{name}.txt", "content": f"{name}\n"}
    return str(write_plan(tmp_path, [action], f"add {name}", name=f"{name}.json"))


def test_commands_that_never_ask_a_model_load_no_feature_stack(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fix = str(write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), FIX)], "fix add", name="fix.json"))
    runs: dict[str, dict[str, Any]] = {}

    def run(*args: str) -> dict[str, Any]:
        result = probe(*args, cwd=repo)
        assert result["code"] == 0, f"papayu {' '.join(args)}: {result['stderr'][-2000:]}"
        runs[" ".join(args)] = result
        return result

    notes = json.loads(run("apply", create(tmp_path, "notes"), "--check", "true", "--review", "--json")["stdout"])
    assert notes["state"] == "review" and notes["check"]["passed"]
    run("land", notes["plan_id"])
    assert json.loads(run("apply", fix, "--no-check", "--json")["stdout"])["state"] == "landed"
    assert git(repo, "show", "main:calc.py") == CALC.replace("a - b", "a + b")
    assert git(repo, "show", "main:notes.txt") == "notes\n"
    other = json.loads(run("apply", create(tmp_path, "other"), "--no-check", "--review", "--json")["stdout"])
    assert other["plan_id"] in run("list")["stdout"]
    assert "other.txt" in run("show", other["plan_id"])["stdout"]
    assert "+other" in run("diff", other["plan_id"])["stdout"]
    run("drop", other["plan_id"])
    assert git(repo, "branch", "--list", f"papayu/{other['plan_id']}") == ""
    run("validate", fix)
    assert other["trace_id"] in run("trace", "list")["stdout"]
    run("trace", "show", other["trace_id"])
    run("stats")
    run("gc")
    run("hooks", "install")
    assert (repo / ".git/hooks/pre-commit").is_file()
    assert "calc.py" in run("context", "add() in calc.py subtracts")["stdout"]
    run("memory", "show")
    run("--help")

    loaded = {command: result["stacks"] for command, result in runs.items() if result["stacks"]}
    assert loaded == {}, f"commands that never ask a model loaded feature stacks: {loaded}"


def test_apply_of_a_plan_with_actions_never_imports_pygit2(tmp_path: Path) -> None:
    """Commit and fast-forward go through git plumbing (repository.py, objects.py): pygit2's
    ~45 ms is for commands that walk history or build the check's trees (docs/DESIGN.md, "Start-up
    and cost"). Nor does `apply --no-check` load what only `land ID` and `gc` use."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fix = str(write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), FIX)], "fix add", name="fix.json"))
    landed = probe("apply", fix, "--no-check", "--json", cwd=repo)
    assert json.loads(landed["stdout"])["state"] == "landed", landed["stderr"][-2000:]
    assert git(repo, "show", "main:calc.py") == CALC.replace("a - b", "a + b")
    kept = probe("apply", create(tmp_path, "notes"), "--no-check", "--review", "--json", cwd=repo)
    assert json.loads(kept["stdout"])["state"] == "review", kept["stderr"][-2000:]
    assert landed["heavy"] == [] and kept["heavy"] == [], (landed["heavy"], kept["heavy"])
    plan_id = json.loads(kept["stdout"])["plan_id"]
    forced = probe("land", plan_id, "--force", cwd=repo)
    assert forced["code"] == 0 and "papayu_git.checked" in forced["ours"], forced["stderr"][-2000:]
    assert git(repo, "show", "main:notes.txt") == "notes\n"
    said = probe("apply", create(tmp_path, "said"), "--no-check", cwd=repo)  # the report for a human
    assert said["code"] == 0 and "landed plan" in said["stdout"], said["stderr"][-2000:]
    # What only `land ID` (the recorded check's verdict), `gc` (the check's pool) and a plan that
    # did not land (its next steps) need.
    for module in ("papayu_git.checked", "papayu_git.worktree", "papayu_git.check", "papayu_git.retry"):
        assert all(module not in run["ours"] for run in (landed, kept, said)), module
    assert "papayu_git.worktree" in probe("gc", cwd=repo)["ours"]


def test_the_probe_would_notice_a_feature_stack(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    result = probe("list", cwd=repo, preamble="import papayu_git.research\n")
    assert result["code"] == 0
    assert {"papayu_git.research", "papayu_git.webfetch"} <= set(result["stacks"])


def test_apply_compiles_only_the_path_patterns_a_plan_could_match(tmp_path: Path) -> None:
    """Protected paths, test files, runner configs, startup hooks and runner shadows are pattern
    lists whose regexes cost ~4 ms to compile: a plan whose paths hold none of their patterns' text
    lands without compiling them; one that writes `.env` compiles the protected list and is refused."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fix = str(write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), FIX)], "fix add", name="fix.json"))
    landed = probe("apply", fix, "--no-check", "--json", cwd=repo)
    assert json.loads(landed["stdout"])["state"] == "landed", landed["stderr"][-2000:]
    assert landed["patterns"] == []
    env = {"kind": "CREATE_FILE", "path": "sub/.env", "content": "TOKEN=x\n"}
    secret = str(write_plan(tmp_path, [env], "add env", name="env.json"))
    refused = probe("apply", secret, "--no-check", "--json", cwd=repo)
    assert refused["code"] == 1 and "ERR_PROTECTED_PATH" in refused["stdout"], refused["stdout"][-2000:]
    assert refused["patterns"] == [len(paths.DEFAULT_PROTECTED)]
    assert git(repo, "ls-tree", "-r", "--name-only", "main").split() == ["calc.py"]
    assert git(repo, "show", "main:calc.py") == CALC.replace("a - b", "a + b")


def test_the_program_loads_without_the_collector_walking_what_it_loads(tmp_path: Path) -> None:
    """The console scripts and `python -m papayu_git` enter through __main__.main, which sets the
    collector's first threshold before click and papayu load: an apply then runs a collection or
    two, where cli.main entered directly runs ~25 (counted from the script's first line)."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    report = (
        "import atexit, gc, json, sys\n"
        "before = [s['collections'] for s in gc.get_stats()]\n"
        "atexit.register(lambda: print(json.dumps([gc.get_threshold()[0], "
        "[s['collections'] - b for s, b in zip(gc.get_stats(), before)]]), file=sys.stderr))\n"
    )
    counts = {}
    for entry in ("papayu_git.__main__", "papayu_git.cli"):
        plan = str(write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), FIX)], "fix", name=f"{entry}.json"))
        run = f"sys.argv = ['papayu', 'apply', {plan!r}, '--no-check', '--json']\nfrom {entry} import main\nmain()\n"
        proc = subprocess.run(
            [sys.executable, "-c", report + run], cwd=repo, capture_output=True, text=True, timeout=120
        )
        assert json.loads(proc.stdout)["state"] == "landed", proc.stderr[-2000:]
        counts[entry] = json.loads(proc.stderr.strip().splitlines()[-1])
        git(repo, "reset", "-q", "--hard", "HEAD~1")
    threshold, (young, middle, old) = counts["papayu_git.__main__"]
    assert threshold == 50_000 and young <= 3 and middle == old == 0, counts
    assert counts["papayu_git.cli"][0] == 700 and counts["papayu_git.cli"][1][0] >= 15, counts
