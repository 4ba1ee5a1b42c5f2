"""Node's assertion modules sealed against the code they judge (docs/DESIGN.md, "The runtime
shield"), through the real CLI (`apply PLAN -y --json`), real `node --test` behind `npm test`, the
real sandbox.

A plan's code that replaces what node:assert, node:assert/strict or node:test export (the
assertion the tip's tests call becomes a no-op, and a broken function passes) is refused in the
process, and the run is untrusted with the plan's file:line named: spelled as a computed-name
assignment, an `Object.defineProperty` on assert/strict, and `Object.assign` from an ES module.
The hook before this seal let each of them land. Next to them, honest projects land: tests using
assert and node:test's `mock.method` as usual, ES modules importing assert's functions by name,
and a library in node_modules that wraps assert.strictEqual before the tests run.

A second part runs the hook itself in plain node processes (no CLI, no sandbox), for the spellings
and the routes around the stack that do not need a whole check to show.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import (
    apply_actions,
    apply_why,
    assert_landed,
    assert_untrusted,
    git,
    head_of,
    make_repo,
    update_action,
)

from papayu_git.check import sandbox

HOOK = Path(__file__).resolve().parent.parent / "papayu_git" / "check" / "results" / "node_reports.cjs"


pytestmark = pytest.mark.skipif(
    toolchains.node_reporter_missing() is not None, reason=str(toolchains.node_reporter_missing())
)
needs_sandbox = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"
)

CALC = """\
function add(a, b) {
  return a + b;
}

function mul(a, b) {
  return a * b;
}

module.exports = { add, mul };
"""
ADD_TEST = """\
const assert = require("node:assert");
const { test } = require("node:test");
const { add } = require("../calc");

test("add", () => {
  assert.strictEqual(add(2, 3), 5);
});
"""
MUL_TEST = """\
const assert = require("node:assert/strict");
const { test } = require("node:test");
const { mul } = require("../calc");

test("mul", () => {
  assert.equal(mul(2, 3), 6);
});
"""
# A test spying on the code through node:test's mock, as honest suites do.
SPY_TEST = """\
const assert = require("node:assert");
const { test, mock } = require("node:test");
const calc = require("../calc");

test("add is called once", () => {
  const spy = mock.method(calc, "add");
  calc.add(1, 2);
  assert.strictEqual(spy.mock.callCount(), 1);
  mock.restoreAll();
});
"""
# The attack of the issue: the assertion the tip's test calls made a no-op, its name joined at run
# time, with the bug it hides.
COMPUTED = """\
const a = require("node:" + "assert");
a["strict" + "Equal"] = () => {};

function add(a2, b) {
  return a2 + b + 1;
}

function mul(a2, b) {
  return a2 * b;
}

module.exports = { add, mul };
"""
DEFINED = CALC.replace(
    "function add", 'Object.defineProperty(require("assert/strict"), "equal", { value: () => {} });\n\nfunction add'
).replace("a * b", "a * b + 1")


def _project(tmp_path: Path, files: dict[str, str], script: str = "node --test") -> Path:
    manifest = {"name": "calc", "private": True, "scripts": {"test": script}}
    repo = make_repo(
        tmp_path / "repo", {".gitignore": "node_modules/\n", "package.json": json.dumps(manifest), **files}
    )
    git(repo, "config", "papayu.check.command", "npm test")
    return repo


def _apply(repo: Path, name: str, path: str, content: str) -> dict[str, Any]:
    return apply_actions(repo, name, [update_action(path, content)])


@needs_sandbox
@pytest.mark.parametrize(
    ("source", "named"),
    [
        (COMPUTED, ("calc.js:2", "replaces node:assert's strictEqual")),
        (DEFINED, ("calc.js:1", "redefines node:assert/strict's equal (Object.defineProperty)")),
    ],
    ids=["computed-name-assignment", "define-property-on-assert-strict"],
)
def test_code_replacing_an_assertion_under_node_test_is_refused_and_named(
    tmp_path: Path, source: str, named: tuple[str, ...]
) -> None:
    repo = _project(tmp_path, {"calc.js": CALC, "test/add.test.js": ADD_TEST, "test/mul.test.js": MUL_TEST})
    head = head_of(repo)
    data = _apply(repo, "seal", "calc.js", source)
    assert_untrusted(repo, data, head, *named)


ESM_CALC = "export function add(a, b) {\n  return a + b;\n}\n"
# The tip's test holds assert's default export, which the plan's module changes under it.
ESM_TEST = """\
import assert from "node:assert";
import { test } from "node:test";
import { add } from "../calc.js";

test("add", () => {
  assert.deepStrictEqual([add(2, 3)], [5]);
});
"""
ESM_ASSIGN = 'import assert from "node:assert";\n\nObject.assign(assert, { deepStrictEqual() {} });\n\n' + (
    ESM_CALC.replace("a + b", "a - b")
)


@needs_sandbox
def test_an_es_module_replacing_an_assertion_is_refused_and_named(tmp_path: Path) -> None:
    repo = _project(tmp_path, {"calc.js": ESM_CALC, "test/add.test.js": ESM_TEST})
    manifest = json.loads((repo / "package.json").read_text())
    (repo / "package.json").write_text(json.dumps({**manifest, "type": "module"}))
    git(repo, "commit", "-qam", "an ES module project")
    head = head_of(repo)
    data = _apply(repo, "esm", "calc.js", ESM_ASSIGN)
    assert_untrusted(repo, data, head, "calc.js:3", "replaces node:assert's deepStrictEqual")


# A library the project installed, preloaded by its test script, wrapping assert.strictEqual
# (counting calls) before any test runs: its write stands, and ES modules' named imports see it.
WRAPPER = """\
const assert = require("node:assert");
const original = assert.strictEqual;
let calls = 0;
assert.strictEqual = function strictEqual(...args) {
  calls += 1;
  return original.apply(this, args);
};
Object.defineProperty(assert, "calls", { get: () => calls });
"""
WRAPPED_TEST = """\
import assert, { strictEqual } from "node:assert";
import { test } from "node:test";
import calc from "../calc.js";

test("the library's assertion is the one in use", () => {
  strictEqual(calc.add(2, 3), 5);
  assert.strictEqual(calc.mul(2, 3), 6);
  assert.ok(assert.calls >= 2, `wrapped calls: ${assert.calls}`);
});
"""
SUB = "function sub(a, b) {\n  return a - b;\n}\n\nmodule.exports = { add, mul, sub };"


@needs_sandbox
def test_honest_projects_using_assert_mock_and_a_wrapping_library_land(tmp_path: Path) -> None:
    files = {"calc.js": CALC, "test/add.test.js": ADD_TEST, "test/mul.test.js": MUL_TEST}
    files |= {"test/spy.test.js": SPY_TEST, "test/wrapped.test.mjs": WRAPPED_TEST}
    repo = _project(tmp_path, files, "node --test --require ./node_modules/wrapper/index.js")
    (repo / "node_modules" / "wrapper").mkdir(parents=True)
    (repo / "node_modules" / "wrapper" / "index.js").write_text(WRAPPER)
    data = _apply(repo, "sub", "calc.js", CALC.replace("module.exports = { add, mul };", SUB))
    assert_landed(repo, data)
    tests = data["check"]["tests"]
    assert tests["counts"] == {"passed": 4, "failed": 0, "skipped": 0, "error": 0}, apply_why(data)
    assert tests["source"] == "node --test reporter", apply_why(data)  # the wrapped test among the four
    # And a plan breaking the code is still judged by those assertions.
    broken = _apply(repo, "broken", "calc.js", CALC.replace("a * b", "a * b + 1"))
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), apply_why(broken)
    assert "test/mul.test.js > mul" in broken["check"]["verdict"]["broken"], apply_why(broken)


# --- the hook in plain node processes ------------------------------------------------------------


def _hooked(
    tmp_path: Path, source: str, name: str = "probe.cjs", *options: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Runs ``source`` as a file of a checked tree under papayu's hook: node's result, and what
    the shield wrote."""
    root, reports = tmp_path / "tree", tmp_path / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(source)
    env = {**os.environ, "PAPAYU_CHECK_ROOT": str(root), "PAPAYU_NODE_REPORTS": str(reports)}
    env["NODE_OPTIONS"] = f"--require {HOOK}"
    proc = subprocess.run(["node", *options, name], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    return proc, "".join(p.read_text() for p in sorted(reports.glob("shield/*.jsonl")))


def _refusals(written: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in written.splitlines()]


@pytest.mark.parametrize(
    ("name", "source", "what", "where"),
    [
        (
            "probe.cjs",
            "const a = require('assert');\nReflect.set(a, 'deepStrictEqual', () => {});\n",
            "replaces node:assert's deepStrictEqual",
            "probe.cjs:2",
        ),
        (
            "probe.cjs",
            "const a = require('assert');\nObject.defineProperties(a, { ok: { value() {} } });\n",
            "redefines node:assert's ok (Object.defineProperties)",
            "probe.cjs:2",
        ),
        (
            "probe.cjs",
            "require('assert').__defineGetter__('AssertionError', () => Error);\n",
            "redefines node:assert's AssertionError (__defineGetter__)",
            "probe.cjs:1",
        ),
        ("probe.cjs", "const t = require('node:test');\nt.it = () => {};\n", "replaces node:test's it", "probe.cjs:2"),
        (
            "probe.cjs",
            "const t = require('node:test');\nObject.defineProperty(t, 'mock', { value: {} });\n",
            "redefines node:test's mock (Object.defineProperty)",
            "probe.cjs:2",
        ),
        (
            "probe.cjs",
            "const { describe } = require('node:test');\ndescribe.only = describe.skip;\n",
            "replaces node:test's describe's only",
            "probe.cjs:2",
        ),
        (
            "lib/probe.mjs",
            "import * as m from 'node:assert/strict';\n\nm.default.notEqual = () => {};\n",
            "replaces node:assert/strict's notEqual",
            "lib/probe.mjs:3",
        ),
        # code compiled from a string is placed where it was compiled, whoever calls it later
        (
            "probe.cjs",
            "const f = new Function('a', 'a.ok = () => {}');\nsetTimeout(f, 0, require('assert'));\n",
            "replaces node:assert's ok",
            "probe.cjs:1",
        ),
        # a prototype the shield reads with, replaced first: it reads with its own
        (
            "probe.cjs",
            "String.prototype.startsWith = () => false;\nrequire('assert').ok = () => {};\n",
            "replaces node:assert's ok",
            "probe.cjs:2",
        ),
        (
            "probe.cjs",
            "Error.prepareStackTrace = () => [];\nrequire('assert').ok = () => {};\n",
            "replaces node:assert's ok",
            "probe.cjs:2",
        ),
    ],
    ids=[
        "reflect-set",
        "define-properties",
        "define-getter",
        "test-it",
        "test-mock",
        "describe-only",
        "esm-namespace",
        "new-function",
        "string-prototype",
        "prepare-stack-trace",
    ],
)
def test_each_spelling_of_replacing_an_export_is_refused_where_it_was_written(
    tmp_path: Path, name: str, source: str, what: str, where: str
) -> None:
    proc, written = _hooked(tmp_path, source, name)
    assert proc.returncode != 0 and "papayu's check refuses this" in proc.stderr, proc
    assert _refusals(written) == [{"kind": "refused", "what": what, "where": where, "test": ""}]


@pytest.mark.parametrize(
    ("source", "where"),
    [
        # nothing of the checked tree on the stack: a built-in node's event loop calls
        (
            "const a = require('assert');\nsetTimeout(Object.assign, 0, a, { ok() {} });\n",
            "a function node's event loop called, with no file on the stack",
        ),
        (
            "Promise.resolve('fs').then(process.binding);\n",
            "a function node's event loop called, with no file on the stack",
        ),
        # a stack the shield cannot read is not taken for a library's
        (
            "Object.defineProperty(Error, 'stackTraceLimit', { value: 0, writable: false, configurable: false });\n"
            "require('assert').ok = () => {};\n",
            "a stack hidden from papayu",
        ),
    ],
    ids=["event-loop-builtin", "event-loop-binding", "hidden-stack"],
)
def test_a_write_the_shield_cannot_place_is_refused(tmp_path: Path, source: str, where: str) -> None:
    proc, written = _hooked(tmp_path, source)
    assert proc.returncode != 0, proc
    [record] = _refusals(written)
    assert record["kind"] == "refused" and record["where"].startswith(where), record


def test_reading_the_sealed_modules_is_as_before(tmp_path: Path) -> None:
    """ESM named imports see the originals after a refused write; an object inheriting from an
    export gets its own property; the list of loaded modules still reads; nothing is printed."""
    source = """\
import assert, { strictEqual, deepStrictEqual } from "node:assert";
import { test, it, mock } from "node:test";

let refused = false;
try {
  assert.strictEqual = () => {};
} catch {
  refused = true;
}
const child = Object.create(assert);
child.ok = 1;
const list = process.moduleLoadList;
console.log(JSON.stringify([
  refused, strictEqual === assert.strictEqual, strictEqual.name, deepStrictEqual === assert.deepStrictEqual,
  child.ok, typeof assert.ok, it === test, typeof mock.method,
  list.includes("NativeModule assert"), Array.isArray(list),
]));
"""
    proc, written = _hooked(tmp_path, source, "probe.mjs")
    assert proc.returncode == 0 and proc.stderr == "", proc
    assert json.loads(proc.stdout) == [True, True, "strictEqual", True, 1, "function", True, "function", True, True]
    assert [r["what"] for r in _refusals(written)] == ["replaces node:assert's strictEqual"]

    quiet, nothing = _hooked(tmp_path / "quiet", "require('assert'); require('node:test');\n", "quiet.cjs")
    assert (quiet.returncode, quiet.stdout, quiet.stderr, nothing) == (0, "", "", "")


def test_a_librarys_own_writes_stand_behind_the_seal(tmp_path: Path) -> None:
    """A library preloaded before the tests (no frame of the checked tree on its stack) wraps
    and redefines exports; what it wrote is what everyone reads, and nothing is refused."""
    library = tmp_path / "tree" / "node_modules" / "wrapper" / "index.js"
    library.parent.mkdir(parents=True)
    library.write_text(
        WRAPPER + "Object.defineProperty(assert, 'deepEqual', { value: assert.deepStrictEqual });\n"
        "process.binding('util');\n"
    )
    source = """\
import assert, { strictEqual } from "node:assert";

strictEqual(1, 1);
assert.strictEqual(2, 2);
console.log(assert.calls, assert.deepEqual === assert.deepStrictEqual, strictEqual === assert.strictEqual);
"""
    proc, written = _hooked(tmp_path, source, "probe.mjs", "--require", str(library))
    assert (proc.returncode, proc.stdout, written) == (0, "2 true true\n", ""), proc
