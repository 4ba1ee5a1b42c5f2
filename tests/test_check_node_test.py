"""`node --test` behind `npm test` through the real CLI (`apply PLAN -y --json`) and the real
sandbox: every test named by its file, so two files with a test of the same name are two tests.

The project reproduces the layout of jsdom/webidl-conversions (verified there: 6976 tests read,
a plan breaking the `undefined` conversion rolled back naming exactly `test/undefined.js > WebIDL
undefined type > should return `undefined` for everything`, a comment-only plan landed;
docs/BENCHMARKS.md): `"test": "node --test"` with no pattern, a `lib/index.js`, one test file a
type under `test/`, describe() blocks with it()s, the same titles in several files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, papayu, write_plan

from papayu_git.check import sandbox

pytestmark = [
    pytest.mark.skipif(sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"),
    pytest.mark.skipif(toolchains.node_reporter_missing() is not None, reason=str(toolchains.node_reporter_missing())),
]

LIB = """\
"use strict";

exports.boolean = (value) => Boolean(value);

exports.undefined = () => {
  return undefined;
};

exports.DOMString = (value) => {
  if (typeof value === "symbol") {
    throw new TypeError("is a symbol, which cannot be converted to a string");
  }
  return String(value);
};
"""


def _test_file(kind: str, cases: dict[str, str]) -> str:
    body = "".join(f"  it({json.dumps(title)}, () => {{\n    {check}\n  }});\n" for title, check in cases.items())
    return (
        '"use strict";\nconst { describe, it } = require("node:test");\nconst assert = require("node:assert/strict");\n'
        f'const conversions = require("..");\n\ndescribe("WebIDL {kind} type", () => {{\n{body}}});\n'
    )


FILES = {
    "package.json": json.dumps({"name": "conversions", "main": "lib/index.js", "scripts": {"test": "node --test"}}),
    "lib/index.js": LIB,
    # The same titles in two files: one id each by file, two ids in all.
    "test/boolean.js": _test_file(
        "boolean",
        {
            "should return `false` for `undefined`": "assert.equal(conversions.boolean(undefined), false);",
            "should return `true` for `{}`": "assert.equal(conversions.boolean({}), true);",
        },
    ),
    "test/string.js": _test_file(
        "DOMString",
        {
            "should return `undefined` as a string": 'assert.equal(conversions.DOMString(undefined), "undefined");',
            "should throw for a symbol": "assert.throws(() => conversions.DOMString(Symbol()), TypeError);",
        },
    ),
    "test/undefined.js": _test_file(
        "undefined",
        {"should return `undefined` for everything": "assert.equal(conversions.undefined(null), undefined);"},
    ),
}
# Same describe() and it() titles in two files, which Node's TAP could not tell apart.
FILES["test/unrestricted.js"] = FILES["test/boolean.js"]

BROKEN = "test/undefined.js > WebIDL undefined type > should return `undefined` for everything"


def _apply(repo: Path, name: str, old: str, new: str) -> dict[str, Any]:
    text = (repo / "lib/index.js").read_text()
    assert old in text
    actions = [{"kind": "UPDATE_FILE", "path": "lib/index.js", "content": text.replace(old, new, 1)}]
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})


def test_node_test_behind_npm_test_is_judged_per_test_by_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", dict(FILES))
    git(repo, "config", "papayu.check.command", "npm test")
    tip = git(repo, "rev-parse", "HEAD").strip()

    broken = _apply(repo, "break", "  return undefined;", "  return null;")
    assert (broken["state"], broken["error"]["code"], broken["_rc"]) == ("rolled_back", "ERR_CHECK_REGRESSION", 1)
    tests = broken["check"]["tests"]
    assert tests["source"] == "node --test reporter" and not tests["collisions"], broken
    assert tests["counts"] == {"passed": 6, "failed": 1, "skipped": 0, "error": 0}
    assert broken["check"]["verdict"]["broken"] == [BROKEN] and broken["check"]["verdict"]["missing"] == []
    assert f"newly failing: {BROKEN}" in broken["error"]["reason"]
    assert git(repo, "rev-parse", "HEAD").strip() == tip

    # A test of one file of two with the same titles: only that file's is named.
    boolean = _apply(repo, "break-boolean", "Boolean(value)", "value === undefined ? true : Boolean(value)")
    assert boolean["check"]["verdict"]["broken"] == [
        "test/boolean.js > WebIDL boolean type > should return `false` for `undefined`",
        "test/unrestricted.js > WebIDL boolean type > should return `false` for `undefined`",
    ], boolean

    comment = _apply(
        repo, "comment", "exports.undefined = () => {", "// Every value is undefined.\nexports.undefined = () => {"
    )
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 7


# --- ids reported more than once: one group, its worst outcome, its count (docs/DESIGN.md) ---------

VERSIONS = """\
"use strict";

exports.accepts = (version) => {
  if (Number(version.split(".")[0]) < 4) {
    throw new Error(`fastify ${version} is too old`);
  }
  return true;
};
"""

# fastify/fastify-plugin's test/test.js: two tests of one title in one file.
SAME_TITLES = """\
"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { accepts } = require("..");

test("should check the fastify version", () => {
  assert.ok(accepts("4.0.0"));
});

test("should check the fastify version", () => {
  assert.throws(() => accepts("2.0.0"), /too old/);
});

test("should accept a newer major", () => {
  assert.ok(accepts("5.1.0"));
});
"""

# A test file another test file imports: Node runs its tests in both processes, under its name.
SHARED = """\
"use strict";
const test = require("node:test");
const assert = require("node:assert");
const { accepts } = require("..");

test("rejects a major below 4", () => {
  assert.throws(() => accepts("3.9.9"), /too old/);
});
"""
IMPORTS_SHARED = """\
"use strict";
require("./shared.test.js");
const test = require("node:test");
const assert = require("node:assert");
const { accepts } = require("..");

test("accepts 4", () => assert.ok(accepts("4.2.0")));
"""
NO_CHECK = "    return true; // every version is accepted\n"


def _plan(repo: Path, name: str, old: str, new: str) -> Path:
    text = (repo / "index.js").read_text()
    assert old in text
    actions = [{"kind": "UPDATE_FILE", "path": "index.js", "content": text.replace(old, new, 1)}]
    return write_plan(repo.parent, actions, summary=name, name=f"{name}.json")


@pytest.mark.parametrize(
    ("files", "command", "broken"),
    [
        pytest.param(
            {"test/test.js": SAME_TITLES},
            "node --test",
            "test/test.js > should check the fastify version",
            id="two-tests-of-one-title-in-one-file",
        ),
        pytest.param(
            {"test/shared.test.js": SHARED, "test/main.test.js": IMPORTS_SHARED},
            "npm test",
            "test/shared.test.js > rejects a major below 4",
            id="one-files-tests-reported-twice",
        ),
    ],
)
def test_an_id_reported_twice_is_one_group_named_when_one_of_it_breaks(
    tmp_path: Path, files: dict[str, str], command: str, broken: str
) -> None:
    package = {"name": "plugin", "main": "index.js", "scripts": {"test": "node --test"}}
    repo = make_repo(tmp_path / "repo", {"package.json": json.dumps(package), "index.js": VERSIONS, **files})
    git(repo, "config", "papayu.check.command", command)
    tip = git(repo, "rev-parse", "HEAD").strip()
    env = {"PAPAYU_PROTOCOL_VERSION": "1"}

    # Breaks only the test that wants an old version refused: one of its group's reports.
    plan = _plan(repo, "break", "    throw new Error(`fastify ${version} is too old`);\n", NO_CHECK)
    data = apply_json(repo, plan, "-y", env=env)
    assert (data["state"], data["error"]["code"], data["_rc"]) == ("rolled_back", "ERR_CHECK_REGRESSION", 1), data
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == [broken] and verdict["missing"] == [], verdict
    assert not any("crashed" in line for line in verdict["lines"]), verdict["lines"]
    assert data["check"]["tests"]["collisions"] == [f"{broken}: by node --test reporter twice"]
    assert git(repo, "rev-parse", "HEAD").strip() == tip
    # What a user reads: the test named, no crash said.
    shown = papayu("apply", str(plan), "-y", cwd=repo, env=env)
    assert shown.returncode == 1 and f"newly failing: {broken}" in shown.stdout + shown.stderr, shown.stderr
    assert "crashed" not in shown.stdout + shown.stderr

    comment = _plan(repo, "comment", "exports.accepts =", "// The major version decides.\nexports.accepts =")
    landed = apply_json(repo, comment, "-y", env=env)
    assert (landed["state"], landed["_rc"]) == ("landed", 0), landed
    group = "1 test id(s) the tip's own suite reports more than once are each judged as one group"
    assert landed["check"]["verdict"]["lines"][0].startswith(group), landed["check"]["verdict"]
    assert landed["check"]["verdict"]["passed"] == 3  # each test of the group counts
