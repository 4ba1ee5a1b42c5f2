// papayu's reporter for Node's test runner (docs/DESIGN.md, "What the check runs": node --test).
//
// Given to every `node --test` of a check through NODE_OPTIONS (`--test-reporter=` this file,
// `--test-reporter-destination=stdout`), when the command or a package script it runs has one
// and names no reporter of its own: the option reaches the runner wherever a script starts it,
// and only the runner's own process loads a reporter (its test files' processes report to it).
// Its output is the one Node would have printed (TAP when stdout is no terminal before Node 23,
// else spec), produced by that reporter; beside it, each test's result goes into a file of its
// own process in papayu's report directory, one JSON object a line, with the test's file:
// Node's TAP names no file, and its JUnit names none before Node 22, so two files with a test of
// the same name were one id. It never throws on papayu's part: a record it cannot write is lost,
// and the report papayu then misses is said.
"use strict";

const fs = require("node:fs");
const { Readable } = require("node:stream");

const MESSAGE_CHARS = 2000;

function opened() {
  const dir = process.env.PAPAYU_NODE_REPORTS;
  if (!dir) return -1;
  try {
    return fs.openSync(`${dir}/node-test-${process.pid}.jsonl`, "a");
  } catch {
    return -1;
  }
}

function message(details) {
  const error = details && details.error;
  if (!error) return "";
  const cause = error.cause !== undefined ? error.cause : error;
  const text = cause && cause.stack ? String(cause.stack) : String(cause);
  return text.slice(0, MESSAGE_CHARS);
}

// The open tests of each file, by nesting (their names, and whether a subtest of theirs
// reported): a result's id is its file, its ancestors and its name.
function recorder(out) {
  const open = new Map();
  return (event) => {
    const data = event.data || {};
    const file = data.file || "";
    const tests = open.get(file) || [];
    open.set(file, tests);
    if (event.type === "test:start") {
      tests.length = data.nesting;
      tests[data.nesting] = { name: data.name, parent: false };
      return;
    }
    if (event.type !== "test:pass" && event.type !== "test:fail") return;
    const details = data.details || {};
    const error = details.error || {};
    const own = tests[data.nesting];
    if (data.nesting > 0 && tests[data.nesting - 1]) tests[data.nesting - 1].parent = true;
    // A suite, or a test with subtests, fails when they do: those are named. One that failed on
    // its own (a hook, an error around its subtests) is kept.
    const parent = details.type === "suite" || (own && own.name === data.name && own.parent);
    if (parent && (event.type === "test:pass" || error.failureType === "subtestsFailed")) return;
    const names = tests.slice(0, data.nesting).map((test) => (test ? test.name : ""));
    let outcome = event.type === "test:fail" ? "failed" : "passed";
    if (data.skip !== undefined || data.todo !== undefined) outcome = "skipped";
    const record = { file, path: [...names, data.name], outcome };
    if (outcome === "failed") record.message = message(details);
    try {
      fs.writeSync(out, `${JSON.stringify(record)}\n`);
    } catch {
      // a full report directory: what is missing is said by papayu
    }
  };
}

module.exports = async function* papayuReporter(source) {
  const out = opened();
  const record = out >= 0 ? recorder(out) : () => {};
  async function* events() {
    for await (const event of source) {
      try {
        record(event);
      } catch {
        // papayu's part must never change the run
      }
      yield event;
    }
  }
  const reporters = require("node:test/reporters");
  const major = Number(process.versions.node.split(".")[0]);
  const usual = major >= 23 || process.stdout.isTTY ? reporters.spec : reporters.tap;
  const isStream = typeof usual === "function" && usual.prototype && typeof usual.prototype._transform === "function";
  const shown = isStream ? Readable.from(events()).pipe(new usual()) : usual(events());
  for await (const chunk of shown) yield chunk;
};
