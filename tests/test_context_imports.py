"""What a failing test brings into the context, through the real CLI, on a src/ layout shaped like
pallets/itsdangerous: the modules the named test imports (the one named like it and the one
changed last first, every imported one in), and in a retry every file the failure's traceback
names, also when that frame sits past the part of a long traceback the model is shown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, papayu, stored_plans
from llm_server import Reply, ScriptedLLM, chat, plan_answer, shown_files

from papayu_git.check import sandbox

GOAL = "fix the failing test tests/test_pkg/test_timed.py"
# timed.loads goes through clock.age, which has the bug and is long: pytest prints the innermost
# function's source whole, so the line naming clock.py comes at the end of a long failure.
FILLER = "".join(f"    # step {n}: the age is counted in whole seconds of the signer's clock\n" for n in range(60))
LAYOUT = {
    "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['src', 'tests']\n",
    "src/pkg/__init__.py": "",
    "src/pkg/exc.py": "class Expired(Exception):\n    pass\n",
    "src/pkg/signer.py": "def sign(value):\n    return f'{value}.sig'\n",
    "src/pkg/encoding.py": "def want_bytes(s):\n    return s.encode() if isinstance(s, str) else s\n",
    "src/pkg/clock.py": f"def age(now, then):\n{FILLER}    return now.seconds - then\n",
    "src/pkg/timed.py": (
        "from pkg.clock import age\nfrom pkg.exc import Expired\n\n\n"
        "def loads(signed, now, then, max_age):\n    if age(now, then) > max_age:\n"
        "        raise Expired(signed)\n    return signed\n"
    ),
    "tests/test_pkg/__init__.py": "",
    "tests/test_pkg/test_signer.py": "from pkg.signer import sign\n\n\ndef test_sign():\n    assert sign('a')\n",
    "tests/test_pkg/test_timed.py": (
        "from pkg.encoding import want_bytes\nfrom pkg.exc import Expired\nfrom pkg.signer import sign\n"
        "from pkg.timed import loads\nfrom test_pkg.test_signer import test_sign\n\n\n"
        "def test_max_age():\n    assert loads(want_bytes(sign('v')), now=20, then=10, max_age=15) == b'v.sig'\n"
    ),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "pkg", LAYOUT)
    (repo / "src/pkg/timed.py").write_text(LAYOUT["src/pkg/timed.py"] + "# retouched last\n")
    git(repo, "commit", "-qam", "timed: touch it last")
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider")
    return repo


def shown(repo: Path, goal: str = GOAL) -> tuple[dict[str, dict[str, Any]], str]:
    """The FILE blocks `context GOAL --json` would send, by path, and the context's text."""
    proc = papayu("context", goal, "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    return {b["path"]: b for b in data["blocks"] if b["kind"] == "FILE"}, data["context"]


def test_the_named_test_brings_every_module_it_imports_the_one_named_like_it_first(project: Path) -> None:
    files, text = shown(project)
    imported = {"src/pkg/timed.py", "src/pkg/exc.py", "src/pkg/signer.py", "src/pkg/encoding.py"}
    assert {"tests/test_pkg/test_timed.py", *imported} <= files.keys(), sorted(files)
    assert files["src/pkg/timed.py"]["priority"] == 1  # named like the test and changed last: up front
    assert "def loads(signed, now, then, max_age):" in text
    # Path parts of the named test are not test names to search for: no unrelated test files.
    assert not any(p.startswith("tests/") and p != "tests/test_pkg/test_timed.py" for p in files), sorted(files)


def test_a_module_the_test_imports_is_in_even_when_nothing_is_named_like_the_test(project: Path) -> None:
    git(project, "mv", "tests/test_pkg/test_timed.py", "tests/test_pkg/test_expiry.py")
    git(project, "commit", "-qm", "rename")
    files, _text = shown(project, "fix the failing test tests/test_pkg/test_expiry.py")
    assert {"src/pkg/timed.py", "src/pkg/exc.py", "src/pkg/signer.py", "src/pkg/encoding.py"} <= files.keys()


@pytest.mark.skipif(sandbox.unavailable_reason() is not None, reason="bwrap does not work here")
def test_a_retry_brings_the_file_its_failure_names_deep_in_a_long_traceback(project: Path, llm: ScriptedLLM) -> None:
    def comment(body: dict[str, Any]) -> Reply:  # a change that fixes nothing: the check stays red
        diff = "--- a/src/pkg/exc.py\n+++ b/src/pkg/exc.py\n@@ -1,2 +1,2 @@\n-class Expired(Exception):\n+class Expired(Exception):  # expired\n     pass\n"
        base = shown_files(body)["src/pkg/exc.py"]
        return chat(
            {
                "summary": "comment",
                "actions": [{"kind": "PATCH_FILE", "path": "src/pkg/exc.py", "patch": diff, "base_sha256": base}],
            }
        )

    llm.script = [chat(plan_answer("look at timed")), comment]
    first = papayu("fix", GOAL, "-y", "--attempts", "1", cwd=project, env=llm.env(), timeout=300)
    assert "ERR_CHECK_FIXES_NOTHING" in first.stderr, first.stderr
    assert "src/pkg/clock.py" not in shown_files(
        llm.requests[0]
    )  # not imported by the test: only the traceback names it
    failure = stored_plans(project)[-1]["extra"]["apply"]["check"]["failures"]
    message = next(iter(failure.values()))
    assert "src/pkg/clock.py:" not in message[:1_500]  # not in the head of it the model used to be shown
    llm.script = [chat(plan_answer("still red"))]
    papayu("retry", stored_plans(project)[-1]["id"], "-y", cwd=project, env=llm.env(), timeout=300)
    sent = llm.requests[2]
    assert "PREVIOUS ATTEMPT" in sent["messages"][-1]["content"]
    assert "src/pkg/clock.py" in shown_files(sent), sorted(shown_files(sent))
    assert "src/pkg/clock.py:62: AttributeError" in sent["messages"][-1]["content"]  # the log's tail is sent
