// papayu's hook in the check's node processes (docs/DESIGN.md, "What the check runs").
//
// Loaded through NODE_OPTIONS=--require in every node process of a check whose command runs jest
// or vitest (read on the tip, through its package scripts: check/scripts.py). In the process
// that is jest's or vitest's own command line, it adds the runner's machine-readable report to
// the arguments before the runner reads them, one file per process in papayu's report
// directory: jest `--json --outputFile=`, vitest its json reporter beside its usual output.
// Whatever else runs (npm, pnpm, the runners' workers, the code under test) is left alone, and
// so is a run given a report of its own (the same rules as check/results/runners.py). It never
// throws and prints nothing: a hook that fails leaves the run as it was, and the report papayu
// then misses is said.
//
// And papayu's shield as far as Node allows (docs/DESIGN.md, "The runtime shield"): in every node
// process of such a check, code of the checked tree (a stack frame in a file under
// PAPAYU_CHECK_ROOT, outside node_modules) may not load native code (process.dlopen, the internal
// bindings), switch V8's flags, open an inspector session, or write, rename or remove papayu's
// report directory. Each refusal throws in the code that asked and is written to the report
// directory (shield/node-<pid>.jsonl), which makes the run untrusted. Node has no audit hooks: what
// a module does to objects of its own realm (replacing a reporter's function, sending a forged
// message to jest's parent process) is not seen here.
"use strict";
(() => {
  try {
    const dir = process.env.PAPAYU_NODE_REPORTS;
    const wanted = (process.env.PAPAYU_NODE_RUNNERS || "").split(",");
    if (!dir || !require("node:worker_threads").isMainThread) return;
    let main = process.argv[1] || "";
    try {
      main = require("node:fs").realpathSync(main);
    } catch {
      // not a file: not a runner's entry point either
    }
    main = main.split(require("node:path").sep).join("/");
    const args = process.argv.slice(2);
    const flag = (arg) => arg.split("=")[0];
    const file = (runner) => `${dir}/${runner}-${process.pid}.json`;
    if (wanted.includes("jest") && /(^|\/)node_modules\/(jest|jest-cli)\/bin\/jest\.js$/.test(main)) {
      const own = ["--json", "--outputFile", "--watch", "--watchAll", "--listTests", "--showConfig", "--init"];
      if (!args.some((arg) => own.includes(flag(arg)))) {
        process.argv.push("--json", `--outputFile=${file("jest")}`);
      }
    } else if (wanted.includes("vitest") && /(^|\/)node_modules\/vitest\/vitest\.mjs$/.test(main)) {
      const command = args.find((arg) => !arg.startsWith("-"));
      if (["bench", "list", "init"].includes(command)) return;
      if (args.some((arg) => ["--outputFile", "--watch"].includes(flag(arg).split(".")[0]))) return;
      const reporters = args.some((arg) => flag(arg) === "--reporter") ? [] : ["--reporter=default"];
      process.argv.push(...reporters, "--reporter=json", `--outputFile.json=${file("vitest")}`);
    }
  } catch {
    // papayu's hook must never be why a check fails
  }
})();

(() => {
  const root = process.env.PAPAYU_CHECK_ROOT;
  const dir = process.env.PAPAYU_NODE_REPORTS;
  if (!root || !dir) return;
  let fs, path;
  try {
    fs = require("node:fs");
    path = require("node:path");
  } catch {
    return;
  }
  const own = { appendFileSync: fs.appendFileSync, mkdirSync: fs.mkdirSync };
  const prefix = root.endsWith("/") ? root : `${root}/`;
  const sink = `${dir}/shield/node-${process.pid}.jsonl`;
  const here = __filename;
  // The first frame of the checked tree on the stack ("lib/calc.js:3"), or "" when none, or when
  // that frame is in a dotfile or dot-directory: tool code the tip commits (yarn's release in
  // .yarn/releases, its .pnp.cjs), which a plan cannot change without being held for it
  // (docs/DESIGN.md, "What judges a plan").
  const repositoryFrame = () => {
    const stack = String(new Error().stack || "").split("\n").slice(1);
    for (const line of stack) {
      const found = /\(?(?:file:\/\/)?(\/[^():]+):(\d+):\d+\)?\s*$/.exec(line);
      if (!found || found[1] === here) continue;
      if (found[1].startsWith(prefix) && !found[1].includes("/node_modules/")) {
        const rel = found[1].slice(prefix.length);
        return rel.split("/").some((part) => part.startsWith(".")) ? "" : `${rel}:${found[2]}`;
      }
    }
    return "";
  };
  let busy = false; // writing a refusal: the hook's own writes pass
  const refuse = (what) => {
    if (busy) return;
    const where = repositoryFrame();
    if (!where) return;
    busy = true;
    try {
      own.mkdirSync(`${dir}/shield`, { recursive: true });
      own.appendFileSync(sink, `${JSON.stringify({ kind: "refused", what, where, test: "" })}\n`);
    } catch {
      // the refusal below still stops it
    } finally {
      busy = false;
    }
    throw new Error(`papayu's check refuses this: ${what} at ${where} (docs/DESIGN.md, 'The runtime shield')`);
  };
  const wrap = (owner, name, what) => {
    const original = owner && owner[name];
    if (typeof original !== "function") return;
    const guarded = function (...args) {
      refuse(typeof what === "function" ? what(args) : what);
      return original.apply(this, args);
    };
    try {
      Object.defineProperty(owner, name, { value: guarded, writable: false, configurable: false });
    } catch {
      // a property that cannot be redefined stays as it is
    }
  };
  const papayus = (target) => {
    try {
      const full = path.resolve(String(target instanceof URL ? target.pathname : target));
      return full === dir || full.startsWith(`${dir}/`);
    } catch {
      return false;
    }
  };
  try {
    wrap(process, "dlopen", "loads native code (process.dlopen)");
    wrap(process, "binding", "reaches node's internal bindings (process.binding)");
    wrap(process, "_linkedBinding", "reaches node's internal bindings (process._linkedBinding)");
    wrap(require("node:v8"), "setFlagsFromString", "switches V8's flags (v8.setFlagsFromString)");
    wrap(require("node:inspector").Session.prototype, "connect", "opens an inspector session");
    for (const name of ["openSync", "open", "writeFileSync", "writeFile", "appendFileSync", "createWriteStream",
      "rmSync", "rm", "unlinkSync", "unlink", "renameSync", "rename", "truncateSync", "truncate"]) {
      const original = fs[name];
      if (typeof original !== "function") continue;
      fs[name] = function (target, ...rest) {
        const given = rest[0];
        const flags = !["openSync", "open"].includes(name) ? "w" : typeof given === "string" ? given : "r";
        if (/[wa+]/.test(flags) && papayus(target)) refuse(`${name} on papayu's report directory`);
        if (name.startsWith("rename") && papayus(rest[0])) refuse(`${name} into papayu's report directory`);
        return original.call(this, target, ...rest);
      };
    }
  } catch {
    // papayu's hook must never be why a check fails
  }
})();
