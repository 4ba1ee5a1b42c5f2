"""The check's checkout pool lives outside the user's work tree: a scanner walking the tree (Node's
`node --test`, which skips only node_modules; linters; editors' indexers) never finds papayu's copies
of the tests.

Found on jsdom/webidl-conversions: a direct `node --test` in the user's tree also ran the copies of
the tests in `.git/papayu/checkouts/slot-*/work/` (26.2 s against 13.1 s; docs/BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import apply_json, checkout_pool, make_repo, papayu, papayu_dir, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None or shutil.which("node") is None,
    reason=f"bwrap and node: {sandbox.unavailable_reason() or 'node is not installed'}",
)

LIB = "exports.twice = (n) => n * 2;\n"
TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { twice } = require('../lib');\ntest('twice', () => assert.strictEqual(twice(3), 6));\n"
)


def _node_test_count(repo: Path) -> int:
    """How many tests a direct `node --test` in the user's tree runs (Node's default patterns)."""
    proc = subprocess.run(["node", "--test"], cwd=repo, capture_output=True, text=True, timeout=120)
    counts = [line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("# tests ")]
    assert proc.returncode == 0 and counts, proc.stdout + proc.stderr
    return int(counts[0])


def test_a_direct_node_test_in_the_users_tree_finds_no_copy_of_papayus(tmp_path: Path) -> None:
    package = {"name": "calc", "scripts": {"test": "node --test"}}
    repo = make_repo(
        tmp_path / "repo", {"lib.js": LIB, "test/twice.test.js": TEST, "package.json": json.dumps(package)}
    )
    # What an older papayu left: its pool inside .git, one idle slot holding a copy of the tests.
    legacy = papayu_dir(repo) / "checkouts" / "slot-0" / "work" / "test"
    legacy.mkdir(parents=True)
    (legacy / "twice.test.js").write_text(TEST.replace("../lib", "../../../../../../lib"))
    assert _node_test_count(repo) == 2  # the copy is found: the problem

    plan = write_plan(tmp_path, [{"kind": "UPDATE_FILE", "path": "lib.js", "content": "// Doubling.\n" + LIB}])
    landed = apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert (landed["state"], landed["check"]["tests"]["counts"]["passed"]) == ("landed", 1), landed

    assert _node_test_count(repo) == 1  # the user's own test, once
    assert not (papayu_dir(repo) / "checkouts").exists()  # the idle legacy pool went with the check
    pool = checkout_pool(repo)
    assert (pool / "slot-0" / "work" / "test" / "twice.test.js").is_file()  # the slot, kept for the next check
    assert Path(os.path.expanduser("~")) in pool.parents and repo not in pool.parents
    assert (pool / "repository").read_text().strip() == str(papayu_dir(repo).resolve())
    found = [p for p in repo.rglob("twice.test.js")]
    assert found == [repo / "test" / "twice.test.js"]  # any scanner of the tree: one file

    assert papayu("gc", cwd=repo).returncode == 0
    assert not pool.exists()  # idle slots go, and the repository's pool with them
