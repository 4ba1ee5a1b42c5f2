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
