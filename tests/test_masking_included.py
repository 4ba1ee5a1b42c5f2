"""An included file's secrets reach nothing papayu writes or sends, in any spelling the masker
knows (docs/DESIGN.md, "Masking").

`papayu.check.include` gives the check an ignored `.env.test` read-only; a plan's code can print
its values reversed, spaced out, split over lines or base64-encoded, and name a test after one.
Through the real CLI, the real sandboxed pytest and the scripted model: none of those spellings
is in stdout, stderr, the --json result, the plan records, the traces, the check logs, or what
the model is sent when the red check is retried. Ordinary words of short values stay as they are.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu, papayu_dir, patch_action, write_plan
from llm_server import ScriptedLLM, chat, plan_answer

from papayu_git.check import sandbox
from papayu_git.check.secret_files import secret_values, value_masker

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -rP -p no:cacheprovider"  # -rP: passing tests' output too
TOKEN = "tok-9f3Kq2LmZx7Wv4Rb8Nc1Hp"
ENV_TEST = f"API_TOKEN={TOKEN}\nMODE=fast\nREGION=north\nDB_NAME=testdata\n"
CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"
# The plan's code: add() prints the included token in four spellings, then breaks.
LEAKING_CALC = """import base64
from pathlib import Path


def _token():
    for line in Path(".env.test").read_text().splitlines():
        if line.startswith("API_TOKEN="):
            return line.partition("=")[2]
    return ""


def add(a, b):
    value = _token()
    half = len(value) // 2
    print("reversed", value[::-1])
    print("spaced", " ".join(value))
    print("split", value[:half])
    print(value[half:])
    print("base64", base64.b64encode(value.encode()).decode())
    raise AssertionError("leaked " + value[::-1] + " | " + " ".join(value))
"""
# A new test named after the reversed token: the name is what the verdict lines print.
LEAKING_TEST = """import pytest

from calc import _token


@pytest.mark.parametrize("value", [_token()[::-1]])
def test_named(value):
    assert value == "", value
"""


def forbidden() -> dict[str, str]:
    half = len(TOKEN) // 2
    return {
        "as is": TOKEN,
        "reversed": TOKEN[::-1],
        "spaced": " ".join(TOKEN),
        "reversed spaced": " ".join(TOKEN[::-1]),
        "first half": TOKEN[:half],
        "second half": TOKEN[half:],
        "base64": base64.b64encode(TOKEN.encode()).decode(),
        "json spaced": json.dumps(" ".join(TOKEN))[1:-1],
    }


def leaks(text: str) -> list[str]:
    return [name for name, spelling in forbidden().items() if spelling in text]


def _diff(old: str, new: str, path: str) -> str:
    minus = "".join(f"-{line}\n" for line in old.splitlines())
    plus = "".join(f"+{line}\n" for line in new.splitlines())
    return f"--- a/{path}\n+++ b/{path}\n@@ -1,{old.count(chr(10))} +1,{new.count(chr(10))} @@\n{minus}{plus}"


LEAKING_ACTIONS = [
    patch_action("calc.py", CALC.encode(), _diff(CALC, LEAKING_CALC, "calc.py")),
    {"kind": "CREATE_FILE", "path": "tests/test_named.py", "content": LEAKING_TEST},
]


@pytest.fixture
def included_repo(tmp_path: Path) -> Path:
    repo = make_repo(
        tmp_path / "repo",
        {".gitignore": ".env.test\n", "calc.py": CALC, "tests/test_calc.py": TESTS, "pyproject.toml": PYPROJECT},
    )
    (repo / ".env.test").write_text(ENV_TEST)
    git(repo, "config", "papayu.check.include", ".env.test")
    git(repo, "config", "papayu.check.command", PYTEST)
    return repo


def written(repo: Path) -> dict[str, str]:
    """Every file papayu wrote under .git/papayu that carries text: plans, traces, check logs, bases."""
    found = {}
    for sub in ("plans", "traces", "checks", "base"):
        for path in sorted((papayu_dir(repo) / sub).glob("*")):
            if path.is_file():
                found[f"{sub}/{path.name}"] = path.read_text(errors="replace")
    return found


def test_an_included_token_printed_in_any_spelling_reaches_no_output_record_or_model(
    included_repo: Path, llm: ScriptedLLM
) -> None:
    goal = "make add() use the token"
    answer = chat({"summary": "add() reads the token", "actions": LEAKING_ACTIONS})
    llm.script = [chat(plan_answer("add() needs the token")), answer] * 2
    proc = papayu("fix", goal, "-y", "--attempts", "2", "--json", cwd=included_repo, env=llm.env(), timeout=300)
    out = json.loads(proc.stdout)
    attempts = out["attempts"]
    assert [a["state"] for a in attempts] == ["rolled_back", "rolled_back"], proc.stderr
    assert {a["error_code"] for a in attempts} == {"ERR_CHECK_REGRESSION"}
    logs = {k: v for k, v in written(included_repo).items() if k.startswith("checks/")}
    # The plan's code ran and printed: the masked lines are in the log, the test named is in the verdict.
    shown = ("reversed ***\n", "spaced ***\n", "split ***\n***\n", "base64 ***")
    assert any(all(line in log for line in shown) for log in logs.values()), logs
    assert "tests/test_named.py::test_named[***]" in proc.stdout
    retried = json.dumps(llm.requests[2:])  # the second attempt: its plan and apply rounds
    assert "PREVIOUS ATTEMPT" in retried and "***" in retried
    found = {
        "stdout": leaks(proc.stdout),
        "stderr": leaks(proc.stderr),
        "retry request": leaks(retried),
        **{name: leaks(text) for name, text in written(included_repo).items()},
    }
    assert {where: what for where, what in found.items() if what} == {}


def test_apply_prints_and_records_no_spelling_of_an_included_token(included_repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, LEAKING_ACTIONS)
    for args in (("--json",), ()):
        proc = papayu("apply", str(plan), *args, cwd=included_repo)
        assert proc.returncode == 1, proc.stderr
        assert "ERR_CHECK_REGRESSION" in proc.stdout + proc.stderr
        assert "test_named[***]" in proc.stdout + proc.stderr
        assert leaks(proc.stdout) == [] and leaks(proc.stderr) == []
    assert {k: leaks(v) for k, v in written(included_repo).items() if leaks(v)} == {}


WORDS = "mode fast, region north, the test data; f a s t n o r t h"


def test_an_honest_plan_lands_with_ordinary_words_left_as_they_are(included_repo: Path, tmp_path: Path) -> None:
    """Short values are ordinary words (MIN_VALUE), and a longer one spread by prose ("test
    data" for "testdata") is no spread value: the check's output keeps them."""
    words = f"def test_words():\n    print({WORDS!r})\n"
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "tests/test_words.py", "content": words}])
    proc = papayu("apply", str(plan), "--json", cwd=included_repo)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["state"] == "landed", proc.stderr
    own_log = Path(out["check"]["own_log"]).read_text()  # the plan's new test runs in its own run
    assert WORDS in own_log and "***" not in own_log
    assert (included_repo / "tests/test_words.py").read_text() == words


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (WORDS, WORDS),
        ("MODE=fast\nREGION=north\nthe test database", "MODE=fast\nREGION=north\nthe test database"),
        (f"token {TOKEN[::-1]} spaced {' '.join(TOKEN)}.", "token *** spaced ***."),
        (f"split {TOKEN[:9]}\n{TOKEN[9:]}\nend", "split ***\n***\nend"),
        ("the testdata fixture", "the *** fixture"),  # as it is, a value of 8 characters is one
    ],
)
def test_spread_values_are_masked_and_prose_is_not(included_repo: Path, text: str, masked: str) -> None:
    assert value_masker(secret_values(included_repo))(text) == masked
