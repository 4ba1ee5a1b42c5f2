"""yarn berry's Plug'n'Play through the real CLI (`apply PLAN -y --json`) and the real sandbox: the
ignored install (`.pnp.cjs`, its loader, `.yarn/install-state.gz`) is carried into the check and
yarn's package cache is laid over it, so `yarn test` runs there and its runner is read per test.

Verified on arcanis/clipanion (yarn 4.4.1 from its committed `yarnPath`, `.yarn/*` and `.pnp.*`
ignored but for the release, jest with ts-jest under PnP: 69 tests of `yarn test tests/specs/core
tests/specs/run` read; a plan narrowing BATCH_REGEX rolled back naming exactly `tests/specs/core.
test.ts > Core > should extract booleans from batch options`, a comment landed; docs/BENCHMARKS.md).
Before, yarn refused in the check: "The project ... doesn't seem to have been installed". Here:
the same layout with a package from the registry in the project's own `.yarn/cache`, tested by
`node --test` behind `yarn test`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"
)

LIB = "const isNumber = require('is-number');\n\nexports.twice = (n) => (isNumber(n) ? n * 2 : NaN);\n"
TESTS = {
    "test/twice.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { twice } = require('../lib');\ntest('twice', () => assert.strictEqual(twice(3), 6));\n",
    "test/nan.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { twice } = require('../lib');\ntest('not a number', () => assert.ok(Number.isNaN(twice('x'))));\n",
}


def test_a_yarn_plug_n_play_project_runs_in_the_check_and_is_read_per_test(tmp_path: Path) -> None:
    try:
        release = toolchains.yarn_release()
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    version = toolchains.YARN_VERSION
    package = {
        "name": "twice",
        "packageManager": f"yarn@{version}",
        "scripts": {"test": "node --test"},
        "dependencies": {"is-number": "7.0.0"},
    }
    files = {
        "package.json": json.dumps(package, indent=2) + "\n",
        ".yarnrc.yml": f"yarnPath: .yarn/releases/yarn-{version}.cjs\nenableGlobalCache: false\n",
        ".gitignore": "/.yarn/*\n!/.yarn/releases\n/.pnp.*\n",
        f".yarn/releases/yarn-{version}.cjs": release.read_text(),
        "lib.js": LIB,
        **TESTS,
    }
    repo = make_repo(tmp_path / "repo", files)
    try:
        toolchains.yarn_install(repo)
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    git(repo, "add", "yarn.lock")
    git(repo, "commit", "-q", "-m", "lockfile")
    assert (repo / ".pnp.cjs").is_file() and not (repo / "node_modules").exists()
    # `yarn` on PATH, as a user's global yarn: it hands over to the project's release.
    local = Path(os.environ["HOME"]) / ".local" / "bin"
    local.mkdir(parents=True)
    shutil.copyfile(release, local / "yarn")
    (local / "yarn").chmod(0o755)
    git(repo, "config", "papayu.check.command", "yarn test")
    env = {"PATH": f"{local}{os.pathsep}{os.environ['PATH']}", "PAPAYU_PROTOCOL_VERSION": "1"}

    def apply(name: str, content: str) -> dict[str, Any]:
        plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": "lib.js", "content": content}], name=name)
        return apply_json(repo, plan, "-y", env=env)

    broken = apply("break.json", LIB.replace("n * 2", "n * 3"))
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["tests"]["source"] == "node --test reporter", broken
    assert broken["check"]["verdict"]["broken"] == ["test/twice.test.js > twice"], broken
    log = Path(broken["check"]["log"]).read_text()
    assert "carried: .pnp.cjs" in log and "carried: .yarn/install-state.gz" in log
    comment = apply("comment.json", "// Doubles numbers.\n" + LIB)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 2
