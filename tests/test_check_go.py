"""A Go workspace through the real CLI (`apply PLAN -y --json`) and the real sandbox: an ignored
go.work carried into the check, a subtest named after `t.TempDir()` matched run to run, go's test
cache reused as in the user's own runs.

Reproduces charmbracelet/x (an ignored go.work of 19 modules; 1271 tests read; its `term` and
`ansi/kitty` tests make temporary files, and go's test cache keys a result on the variables a
test read: the check's TMPDIR, which the user's shell does not set, reran them every check; now
they are `(cached)` there as in the user's own `go test -json`; docs/BENCHMARKS.md). Here: two modules, one with a
table of subtests named after a temporary directory, one whose test makes a temporary file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, papayu, write_plan

from papayu_git.check import sandbox

pytestmark = [
    pytest.mark.skipif(sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"),
    pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed"),
]

CALC = """\
package calc

// Add returns a plus b.
func Add(a, b int) int { return a + b }

// Twice returns n doubled.
func Twice(n int) int { return n * 2 }
"""

CALC_TEST = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("2 + 3")
	}
}

func TestTwice(t *testing.T) {
	// Each run's subtest is named after its own temporary directory.
	t.Run(t.TempDir(), func(t *testing.T) {
		if Twice(4) != 8 {
			t.Fatal("twice 4")
		}
	})
}
"""

TEXT = 'package text\n\nimport "strings"\n\n// Shout upper-cases s.\nfunc Shout(s string) string { return strings.ToUpper(s) }\n'

TEXT_TEST = """\
package text

import (
	"os"
	"testing"
)

func TestShoutFile(t *testing.T) {
	file, err := os.CreateTemp("", "shout")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file.Name())
	if Shout("hi") != "HI" {
		t.Fatal("shout")
	}
}
"""


def _go_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}  # as the user's shell: none set
    return {**env, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"}


def _apply(repo: Path, name: str, old: str, new: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    text = (repo / "calc/calc.go").read_text()
    assert old in text
    actions = [{"kind": "UPDATE_FILE", "path": "calc/calc.go", "content": text.replace(old, new, 1)}]
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", env=env or {**_go_env(), "PAPAYU_PROTOCOL_VERSION": "1"})


@pytest.mark.slow
def test_a_go_workspace_is_judged_per_test_with_its_test_cache(tmp_path: Path) -> None:
    files = {
        "calc/go.mod": "module example.com/calc\n\ngo 1.21\n",
        "calc/calc.go": CALC,
        "calc/calc_test.go": CALC_TEST,
        "text/go.mod": "module example.com/text\n\ngo 1.21\n",
        "text/text.go": TEXT,
        "text/text_test.go": TEXT_TEST,
        ".gitignore": "go.work\ngo.work.sum\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    (repo / "go.work").write_text("go 1.21\n\nuse (\n\t./calc\n\t./text\n)\n")
    # The user's run as gotestsum and the editors' Go integrations make it: the results go's test
    # cache keeps are per set of flags, and the check's are -json's.
    direct = subprocess.run(["go", "test", "-json", "work"], cwd=repo, env=_go_env(), capture_output=True, text=True)
    assert direct.returncode == 0, direct.stdout + direct.stderr
    git(repo, "config", "papayu.check.command", "go test work")
    tip = git(repo, "rev-parse", "HEAD").strip()

    broken = _apply(repo, "break", "return a + b", "return a - b")
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["tests"]["source"] == "go test -json", broken
    assert broken["check"]["verdict"]["broken"] == ["example.com/calc.TestAdd"], broken
    assert broken["check"]["verdict"]["missing"] == []  # the TempDir-named subtest is matched
    assert git(repo, "rev-parse", "HEAD").strip() == tip
    log = Path(broken["check"]["log"]).read_text()
    assert "carried: go.work" in log
    # The test that made a temporary file kept its cached result: the check's variables are the user's.
    assert "example.com/text\t(cached)" in log, log

    comment = _apply(repo, "comment", "// Twice returns n doubled.", "// Twice returns n doubled: n + n.")
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] >= 3
    assert comment["check"]["verdict"]["missing"] == []


# --- gotestsum: its go test -json file, asked for through its own variable wherever it runs ------

MAKEFILE = "test:\n\tgotestsum --format testname -- ./...\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    ["gotestsum --format pkgname -- ./...", "make test"],
    ids=["gotestsum-itself", "gotestsum-behind-make"],
)
def test_gotestsum_is_judged_per_test_from_its_json_file(tmp_path: Path, command: str) -> None:
    try:
        tools = toolchains.gotestsum()
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    files = {
        "go.mod": "module example.com/calc\n\ngo 1.21\n",
        "calc/calc.go": CALC,
        "calc/calc_test.go": CALC_TEST,
        "Makefile": MAKEFILE,
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", command)
    go = {**_go_env(), "GOCACHE": toolchains.TOOL_ENV["GOCACHE"]}  # the machine's build cache: warm
    env = {**go, "PATH": f"{tools}:{go['PATH']}", "PAPAYU_PROTOCOL_VERSION": "1"}
    tip = git(repo, "rev-parse", "HEAD").strip()

    doctor = papayu("doctor", "--json", cwd=repo, env=env)
    [item] = [i for i in json.loads(doctor.stdout)["checks"] if i["name"] == "check command"]
    if command.startswith("gotestsum"):
        assert "gotestsum's go test -json events (GOTESTSUM_JSONFILE)" in item["data"]["readers"], item
    else:
        assert "gotestsum's go test -json events too" in item["data"]["readers"], item

    broken = _apply(repo, "break", "return a + b", "return a - b", env)
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["tests"]["source"] == "gotestsum jsonfile", broken
    assert broken["check"]["verdict"]["broken"] == ["example.com/calc/calc.TestAdd"], broken
    assert not broken["check"]["verdict"]["exit_code_only"]
    assert git(repo, "rev-parse", "HEAD").strip() == tip

    comment = _apply(repo, "comment", "// Twice returns n doubled.", "// Twice returns n doubled: n + n.", env)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] >= 2
    assert comment["check"]["verdict"]["missing"] == []
