"""One exception root and the one table of error codes (docs/DESIGN.md, "The protocol and its validation").

Every rejection carries an ``ERR_*`` code, the path it concerns (may be empty)
and a hint. The hint is written for two readers: the user, and the model in the
one repair retry, which sends it back verbatim (docs/DESIGN.md, "Providers").
"""

from __future__ import annotations

import re
from typing import NamedTuple


class ErrorSpec(NamedTuple):
    meaning: str
    hint: str


# code -> (meaning, repair hint). The table in docs/REFERENCE.md is generated from this dict.
ERROR_CODES: dict[str, ErrorSpec] = {
    # --- input / JSON ------------------------------------------------------------
    "ERR_INPUT_TOO_LARGE": ErrorSpec(
        "the response or file is larger than papayu reads",
        "Return one compact JSON object; keep file contents under 1 MiB each.",
    ),
    "ERR_JSON_INVALID": ErrorSpec("the text is not JSON", "Return exactly one valid JSON object, no text outside it."),
    "ERR_JSON_TRUNCATED": ErrorSpec(
        "the JSON ends before it is complete", "The JSON was cut off: return a shorter, complete JSON object."
    ),
    "ERR_JSON_TRAILING_GARBAGE": ErrorSpec(
        "more JSON or punctuation follows the JSON value", "Return a single JSON value with nothing after it."
    ),
    "ERR_JSON_TOO_DEEP": ErrorSpec(
        "the JSON is nested deeper than any valid response",
        "Return a flat object: actions are objects directly inside the actions array.",
    ),
    "ERR_JSON_DUPLICATE_KEY": ErrorSpec(
        "a key appears twice in one JSON object (a reader may see the first value, json keeps the last)",
        "Write each key once per object; merge the two values into one.",
    ),
    "ERR_JSON_NUMBER_TOO_LARGE": ErrorSpec(
        "an integer in the JSON has more than 4,300 digits",
        "No number in a response needs that many digits; write it as a string or drop it.",
    ),
    "ERR_JSON_INVALID_UNICODE": ErrorSpec(
        "a string holds an unpaired UTF-16 surrogate (e.g. \\ud800), which has no UTF-8 form",
        "Write characters directly or as a complete surrogate pair (\\ud83d\\ude00); never half of one.",
    ),
    "ERR_SCHEMA": ErrorSpec(
        "the JSON does not match the response schema",
        "Follow the schema: an object with 'actions' (kind, path, content | patch+base_sha256), "
        "'summary', 'context_requests', 'memory_patch'.",
    ),
    "ERR_WRONG_FILE_KIND": ErrorSpec(
        "the file is valid JSON of another kind than the hook (or --kind) expects",
        "Move the file where files of its kind live (docs/FEATURES.md: pre-commit hooks), or fix its content.",
    ),
    "ERR_FILE_NOT_FOUND": ErrorSpec(
        "the file does not exist or cannot be read", "Check the path; run 'git papayu list' to see stored plans."
    ),
    # --- paths -------------------------------------------------------------------
    "ERR_PATH_EMPTY": ErrorSpec("the path is empty", "Give a relative path such as 'src/app.py'."),
    "ERR_PATH_ABSOLUTE": ErrorSpec(
        "the path is absolute (/, //, C:/, C:\\, UNC)",
        "Use a path relative to the repository root, without a leading slash or drive.",
    ),
    "ERR_PATH_HOME": ErrorSpec("the path starts with '~'", "Use a path relative to the repository root."),
    "ERR_PATH_TRAVERSAL": ErrorSpec("the path has a '..' segment", "Use a path inside the repository, without '..'."),
    "ERR_PATH_DOT_SEGMENT": ErrorSpec(
        "the path has a '.' or empty segment", "Write the path without './' and without '//'."
    ),
    "ERR_PATH_CONTROL_CHAR": ErrorSpec("the path contains a NUL or control character", "Use a plain printable path."),
    "ERR_PATH_TOO_LONG": ErrorSpec("the path is longer than 240 characters", "Use a shorter path."),
    "ERR_PATH_GIT_DIR": ErrorSpec(
        "the path is inside .git (any letter case, any depth, or a name macOS or Windows opens as "
        ".git: '.git.', 'git~1', '.git::$INDEX_ALLOCATION', '.g\\u200cit')",
        "Never touch .git; edit working files only.",
    ),
    "ERR_PATH_GIT_ALIAS": ErrorSpec(
        "a name macOS or Windows opens as .gitmodules, .gitattributes, .gitignore or .mailmap without "
        "being that exact name ('.GITMODULES', '.gitattributes.', 'gitmod~1')",
        "Write these files under their exact lower-case names, or choose another name.",
    ),
    "ERR_PATH_NTFS_STREAM": ErrorSpec(
        "a path segment contains ':' (on Windows a stream of another file, e.g. 'a.txt:hidden')",
        "Use a path without ':'.",
    ),
    "ERR_PATH_INVISIBLE_CHAR": ErrorSpec(
        "the path contains an invisible or direction-changing Unicode character (bidi control, "
        "direction mark, zero-width character, BOM, line/paragraph separator) or a lone surrogate",
        "Use visible characters only: invisible ones make a path look like another.",
    ),
    "ERR_PATH_THROUGH_SYMLINK": ErrorSpec(
        "the path is, or goes through, a symbolic link",
        "Edit the link's target file by its real path inside the repository.",
    ),
    "ERR_PATH_IN_SUBMODULE": ErrorSpec(
        "the path is inside a git submodule", "Change submodules in their own repository."
    ),
    "ERR_PROTECTED_PATH": ErrorSpec(
        "the path is protected (.env, keys, certificates, secrets/)",
        "Do not create, change or delete secrets; describe the change in the summary instead.",
    ),
    "ERR_PATH_PAPAYU_CONFIG": ErrorSpec(
        "plan actions cannot write .papa-yu/ (the project's check command and engineering memory)",
        "Leave .papa-yu/ alone; propose memory changes in memory_patch, and the check is the user's to set.",
    ),
    # --- actions -----------------------------------------------------------------
    "ERR_ACTION_CONFLICT": ErrorSpec(
        "one path gets incompatible actions (e.g. CREATE+UPDATE, DELETE+PATCH, duplicates)",
        "Give each path exactly one action.",
    ),
    "ERR_PATH_COLLISION": ErrorSpec(
        "a file and a directory of the plan collide, or two paths differ only in letter case or "
        "Unicode normalization (one file on macOS and Windows)",
        "A path cannot be both a file and a directory, and names must differ by more than case; "
        "use the exact spelling of the existing path or rename one of them.",
    ),
    "ERR_TOO_MANY_ACTIONS": ErrorSpec("more than 200 actions", "Split the change; at most 200 actions."),
    "ERR_CONTENT_NUL": ErrorSpec("file content contains a NUL byte", "Only text files; no NUL bytes."),
    "ERR_PSEUDO_BINARY": ErrorSpec(
        "more than 10% of the content is non-printable", "Only text content; no binary data."
    ),
    "ERR_FILE_TOO_LARGE": ErrorSpec("one file's content is over 1 MiB", "Keep each file under 1 MiB."),
    "ERR_TOTAL_TOO_LARGE": ErrorSpec("all contents together are over 5 MiB", "Keep the whole change under 5 MiB."),
    "ERR_PATCH_NOT_UNIFIED": ErrorSpec(
        "PATCH_FILE.patch is not a unified diff",
        "Send a unified diff: '--- a/path', '+++ b/path', then '@@ -l,n +l,n @@' hunks.",
    ),
    "ERR_PATCH_UNSUPPORTED": ErrorSpec(
        "the diff changes a file mode, makes a symlink, renames, deletes or is binary",
        "A PATCH_FILE only edits text lines of its one file; use CREATE_FILE/DELETE_FILE for "
        "new or removed files; papayu never changes modes or makes symlinks.",
    ),
    "ERR_BASE_SHA256_INVALID": ErrorSpec(
        "base_sha256 is not 64 lowercase hex digits",
        "Copy base_sha256 exactly from the FILE[path] (sha256=...) header.",
    ),
    "ERR_NON_UTF8_FILE": ErrorSpec(
        "the target file is binary or not UTF-8; PATCH_FILE cannot apply",
        "Do not patch this file; return a PLAN (actions: []) and propose another approach.",
    ),
    "ERR_EMPTY_APPLY": ErrorSpec(
        "an APPLY response has no actions and its summary does not start with NO_CHANGES:",
        "Return the actions, or actions: [] with a summary starting with 'NO_CHANGES:'.",
    ),
    "ERR_NO_CHANGES_WITH_ACTIONS": ErrorSpec(
        "the summary says NO_CHANGES but the response carries actions",
        "Either return the actions with a summary of what they change, or actions: [] with a summary "
        "starting with 'NO_CHANGES:'; never both.",
    ),
    "ERR_UPDATE_WITHOUT_BASE": ErrorSpec(
        "UPDATE_FILE for a file that was not read in PLAN",
        "Request the file with context_requests (read_file) first, then update it.",
    ),
    "ERR_V2_UPDATE_EXISTING_FORBIDDEN": ErrorSpec(
        "protocol v2 forbids UPDATE_FILE on an existing file",
        "Generate PATCH_FILE (unified diff + base_sha256) instead of UPDATE_FILE.",
    ),
    "ERR_BASE_MISMATCH": ErrorSpec(
        "the file changed since it was shown to the model (sha256 differs)",
        "Re-read the file (new PLAN) and use the new sha256 as base_sha256.",
    ),
    "ERR_PATCH_APPLY_FAILED": ErrorSpec(
        "a hunk of the patch does not match the file",
        "Copy context lines exactly from the FILE block; use 3 context lines; do not touch neighbouring blocks.",
    ),
    "ERR_CREATE_EXISTS": ErrorSpec(
        "CREATE_FILE for a path that already exists", "Use PATCH_FILE to change an existing file."
    ),
    "ERR_DELETE_MISSING": ErrorSpec(
        "DELETE_FILE/DELETE_DIR for a path that does not exist", "Delete only existing paths."
    ),
    "ERR_PATCH_MISSING_FILE": ErrorSpec(
        "PATCH_FILE/UPDATE_FILE for a file that does not exist", "Use CREATE_FILE for new files."
    ),
    "ERR_CONTEXT_REQUEST_INVALID": ErrorSpec(
        "a context_request is malformed",
        "Each request: {type: read_file|search|logs|env, path|query|source as required}.",
    ),
    "ERR_CONTEXT_ROUNDS_EXCEEDED": ErrorSpec(
        "more than 2 rounds of context_requests", "Answer with the context you have: a plan, questions, or NO_CHANGES."
    ),
    "ERR_MEMORY_KEY_NOT_ALLOWED": ErrorSpec(
        "memory_patch key is not in the whitelist",
        "Only user.* / project.* keys listed in ENGINEERING_MEMORY may be patched.",
    ),
    "ERR_MEMORY_TYPE": ErrorSpec(
        "memory_patch value has the wrong type", "Use the documented type (e.g. ask_budget 0..2 integer)."
    ),
    "ERR_MEMORY_SECRET": ErrorSpec(
        "the memory value looks like a secret (API key, token, password); papayu never stores secrets",
        "Keep secrets in environment variables or a credential store, not in engineering memory.",
    ),
    "ERR_PROJECT_INVALID": ErrorSpec(
        ".papa-yu/project.json does not match its schema", "See schemas/project.json for keys and types."
    ),
    "ERR_PREFERENCES_INVALID": ErrorSpec(
        "preferences.json does not match its schema", "See schemas/preferences.json for keys and types."
    ),
    "ERR_GOLDEN_INVALID": ErrorSpec("the golden trace does not match its schema", "See schemas/golden_trace.json."),
    "ERR_GOLDEN_MISMATCH": ErrorSpec(
        "replaying the golden trace gives a different outcome than recorded",
        "Fix the regression, or regenerate the golden trace (docs/CONTRIBUTING.md: golden update policy).",
    ),
    "ERR_TRACE_NOT_FOUND": ErrorSpec("no readable trace with that id", "Run 'git papayu trace list' to see trace ids."),
    # --- git / transaction ------------------------------------------------------
    "ERR_NOT_A_GIT_REPO": ErrorSpec("not inside a git repository", "Run papayu inside a git work tree."),
    "ERR_NO_COMMITS": ErrorSpec(
        "the repository has no commit yet; papayu builds on a commit",
        "Make a first commit (git commit --allow-empty -m init), then run papayu again.",
    ),
    "ERR_WORKTREE_MISSING": ErrorSpec(
        "the target branch is checked out in a worktree whose directory is gone",
        "Run 'git worktree prune' (or restore that directory), then run papayu again ('git papayu land ID').",
    ),
    "ERR_DETACHED_HEAD": ErrorSpec(
        "HEAD is detached; papayu lands on a branch", "Check out a branch, or pass --onto BRANCH."
    ),
    "ERR_BRANCH_NOT_FOUND": ErrorSpec("the target branch does not exist", "Check the name with 'git branch'."),
    "ERR_BRANCH_MOVED": ErrorSpec(
        "the target branch moved while the plan was applied",
        "Run the apply again, or pass --rebase to re-apply on the new tip.",
    ),
    "ERR_DIRTY_WORKTREE": ErrorSpec(
        "files the plan touches have uncommitted changes",
        "Commit or stash those files ('git stash'), then run 'git papayu land ID'.",
    ),
    "ERR_OPERATION_IN_PROGRESS": ErrorSpec(
        "a merge, rebase, cherry-pick or revert is in progress on the target branch",
        "Finish or abort it (e.g. 'git merge --abort', 'git rebase --abort'), then run 'git papayu land ID'.",
    ),
    "ERR_NOT_RETRYABLE": ErrorSpec(
        "retry was asked for a plan whose check did not fail",
        "Only a plan rolled back (or held) by its check can be retried; see 'git papayu show ID' for its state.",
    ),
    "ERR_PLAN_NOT_LANDED": ErrorSpec(
        "undo was asked for a plan that did not land",
        "See 'git papayu show ID' for its state; a kept branch is dropped with 'git papayu drop ID'.",
    ),
    "ERR_CHECK_FAILED": ErrorSpec(
        "the check command failed; nothing landed",
        "Read the output tail above; 'git papayu retry ID' asks the model again with this failure; "
        "'git papayu doctor --check' if the tip fails the same way; --keep-failed keeps the branch.",
    ),
    "ERR_CHECK_REGRESSION": ErrorSpec(
        "a test that passed on the tip fails or is missing when the tip's tests run on the plan's code "
        "(or that run crashed or left no results); nothing landed",
        "'git papayu retry ID' asks the model again, telling it which tests broke and how (their output is "
        "in the check log); 'git papayu show ID' shows the change; --keep-failed keeps the branch.",
    ),
    "ERR_CHECK_NEW_TESTS_FAIL": ErrorSpec(
        "tests fail in the plan's own tree that did not fail on the tip: its new tests, tests in files "
        "approved with --allow-test-edits, or tip tests its test changes break; nothing landed",
        "'git papayu retry ID' asks the model again with the failing tests' output (also in the check log); "
        "'git papayu show ID' shows the change.",
    ),
    "ERR_CHECK_RESULTS_UNTRUSTED": ErrorSpec(
        "the check's per-test results cannot be trusted: a report was rewritten after its runner "
        "ended, ids were reported twice, a result source of the tip's run is missing or a new one "
        "appeared, or tests failed while the check exited 0; nothing landed",
        "The plan's code runs inside the test process: read the reasons above and the check log; a "
        "plan that prints a runner's lines, rewrites reports or exits early does not land.",
    ),
    "ERR_CHECK_FIXES_NOTHING": ErrorSpec(
        "the tip's check was already red and the plan fixes none of its failing tests (and breaks none); "
        "kept on papayu/<id> for review",
        "'git papayu retry ID' asks the model again, aimed at the failing tests named above; or review it "
        "('git papayu show ID') and land it anyway: 'git papayu land ID --force'.",
    ),
    "ERR_NO_CHECK": ErrorSpec(
        "no check command was found, so nothing landed automatically; the commit is kept on papayu/<id>",
        "Review it with 'git papayu show ID' and land it with 'git papayu land ID --force'; or set a check "
        "(git config papayu.check.command CMD, or --check CMD) and apply again; or pass --no-check.",
    ),
    "ERR_TEST_EDITS_HELD": ErrorSpec(
        "the plan modifies or deletes existing tests, or changes how tests run, so it stopped at review (kept on papayu/<id>)",
        "Read the test changes ('git papayu show ID'), then 'git papayu land ID'; --allow-test-edits lands "
        "such plans without asking.",
    ),
    "ERR_JUDGE_EDITS_HELD": ErrorSpec(
        "tests pass only with the plan's own versions of files that judge it (test data, expected values, "
        "build or check scripts, runner configs), not with the tip's, so it stopped at review (kept on papayu/<id>)",
        "Read what the plan changes besides its code ('git papayu show ID'), then 'git papayu land ID' if it is "
        "right; --allow-test-edits lets the plan's own run judge such changes.",
    ),
    "ERR_TESTS_REMOVED_HELD": ErrorSpec(
        "the plan removes tests that pass on the tip (a deleted or renamed test file), so it stopped at review "
        "(kept on papayu/<id>); -y confirms deletions, not the removal of a test",
        "Check that the tests it names should go ('git papayu show ID'), then 'git papayu land ID'; "
        "--allow-test-edits lands such plans without asking.",
    ),
    "ERR_RUNNER_REACH_HELD": ErrorSpec(
        "the plan reaches past what its check can judge: its code names the test runner's internals, hooks, "
        "os._exit, other frames, gc, /proc/self, the report or sys.modules (read with its strings folded), a new "
        "test module runs code at import or rewrites the code it tests, it adds a binary the check would load, "
        "or it changes how git converts files at checkout; so it stopped at review (kept on papayu/<id>)",
        "Read the lines it names ('git papayu show ID'); code under test runs inside the test process and could "
        "forge its verdict. 'git papayu land ID' if they are harmless.",
    ),
    "ERR_CHECK_ENV_LINKED": ErrorSpec(
        "the check ran unsandboxed while the project's environment links into your work tree (editable "
        "installs, workspace symlinks), so it may have tested your code instead of the plan's; kept on papayu/<id>",
        "Review it ('git papayu show ID') and run 'git papayu land ID'; or make the sandbox work ('git papayu "
        "doctor'); or set papayu.check.allowUserTreeLinks=true.",
    ),
    "ERR_SANDBOX_UNAVAILABLE": ErrorSpec(
        "papayu.check.sandbox=required, but the check cannot be sandboxed here",
        "Run 'git papayu doctor'; install bubblewrap and allow user namespaces, or set papayu.check.sandbox=auto.",
    ),
    "ERR_CONFIG_INVALID": ErrorSpec(
        "a papayu setting has a value papayu does not understand",
        "Fix the setting named in the path (git config or its PAPAYU_* variable); see the settings table.",
    ),
    "ERR_CHECK_TIMEOUT": ErrorSpec(
        "the check command ran past PAPAYU_CHECK_TIMEOUT_SEC and was killed",
        "Raise PAPAYU_CHECK_TIMEOUT_SEC or give a faster --check command; if the plan made the tests hang, "
        "'git papayu retry ID' asks the model again.",
    ),
    "ERR_BRANCH_CHANGED_SINCE_CHECK": ErrorSpec(
        "papayu/<id> is not the commit its recorded check ran on (amended or moved since)",
        "Apply the plan again to check a fresh commit ('git papayu apply ID --review'), or review "
        "this one with 'git papayu show ID' and pass --force to use it unchecked.",
    ),
    "ERR_CHECK_NOT_PASSED": ErrorSpec(
        "the recorded check of papayu/<id> failed or timed out (a --keep-failed branch)",
        "Read the check log named above and the diff ('git papayu show ID'); 'git papayu retry ID' asks the "
        "model for a better plan; or land the red commit anyway: 'git papayu land ID --force' (pr: --force too).",
    ),
    "ERR_NOT_CHECKED": ErrorSpec(
        "no check ran on papayu/<id> (--no-check, no check command found, or no plan record)",
        "Review it with 'git papayu show ID', then 'git papayu land ID --force'; or configure a check "
        "('git config papayu.check.command CMD') and apply the plan again.",
    ),
    "ERR_DELETE_NOT_CONFIRMED": ErrorSpec(
        "the plan deletes files and that was not confirmed", "Pass -y, or answer yes."
    ),
    "ERR_MCP_NOT_ALLOWED": ErrorSpec(
        "the MCP client asked for something only the operator may allow (a check command, no check, "
        "test edits, deletions), or to land a plan held for one of them",
        "Leave the argument out; the operator can allow it with the setting named above, or a human "
        "reviews and lands the plan with the CLI ('git papayu show ID', 'git papayu land ID').",
    ),
    "ERR_PLAN_NOT_FOUND": ErrorSpec("no stored plan with that id", "Run 'git papayu list' to see plan ids."),
    "ERR_NOTHING_TO_LAND": ErrorSpec(
        "the plan has no papayu/<id> branch to land: it was rolled back, dropped, undone, landed or never applied",
        "Apply it instead: 'git papayu apply ID' commits it, runs the check and lands it when it passes.",
    ),
    "ERR_PLAN_ID_INVALID": ErrorSpec(
        "a plan record's id is not of the form papayu generates (YYYYMMDD-HHMMSS-xxxxxx)",
        "Keep the id papayu wrote, or apply the record's 'response' alone as a response file (it gets a new id).",
    ),
    "ERR_PLAN_RECORD_INVALID": ErrorSpec(
        "a plan record has a field of the wrong type",
        "Keep the record as papayu wrote it, or apply its 'response' alone as a response file.",
    ),
    "ERR_LOCKED": ErrorSpec("another papayu process holds the lock", "Wait for it, or run 'git papayu gc'."),
    "ERR_GIT_COMMAND": ErrorSpec("a git command failed", "Read git's message above; the repository is unchanged."),
    # --- LLM -------------------------------------------------------------------
    "ERR_LLM_CONFIG": ErrorSpec(
        "the LLM provider is not configured correctly",
        "Set PAPAYU_LLM_BASE_URL and PAPAYU_LLM_MODEL (README: providers).",
    ),
    "ERR_LLM_AUTH": ErrorSpec("the LLM server refused the API key", "Check PAPAYU_LLM_API_KEY / OPENAI_API_KEY."),
    "ERR_LLM_INSECURE_KEY": ErrorSpec(
        "an API key would cross plain http to another machine",
        "Use an https:// base URL (plain http only to this machine), or unset the key.",
    ),
    "ERR_LLM_HTTP": ErrorSpec("the LLM server answered with an error", "Read the status above; check the model name."),
    "ERR_LLM_RATE_LIMITED": ErrorSpec("the LLM server kept answering 429", "Wait and retry."),
    "ERR_LLM_TIMEOUT": ErrorSpec("the LLM did not answer in time", "Raise PAPAYU_LLM_TIMEOUT_SEC."),
    "ERR_LLM_CONNECT": ErrorSpec(
        "cannot connect to the LLM server", "Is the server running? Check PAPAYU_LLM_BASE_URL."
    ),
    "ERR_LLM_SERVER_DIED": ErrorSpec(
        "the model server died while papayu used it (killed by a signal, crashed, or closed a request "
        "mid-answer and stopped listening)",
        "Read the server's log (the embedded server's is named above, with the signal's fix); then retry.",
    ),
    "ERR_LLM_CONTEXT_WINDOW": ErrorSpec(
        "the request does not fit the model's context window, even with the context cut to its minimum",
        "Give the model a larger window (PAPAYU_LLM_CONTEXT_TOKENS, llama-server -c, Ollama num_ctx) and tell papayu "
        "(PAPAYU_LLM_CONTEXT_TOKENS), or point the goal at fewer files.",
    ),
    "ERR_LLM_INVALID_RESPONSE": ErrorSpec(
        "the model's answer is still invalid after the repair retry",
        "Try a stronger model (README: providers) or rephrase the goal.",
    ),
    "ERR_LLM_NO_TOOLS": ErrorSpec(
        "the LLM provider or model cannot call tools (agent mode needs function calling)",
        "Use 'git papayu fix' instead, or a provider and model that support tool calls (README: providers).",
    ),
    "ERR_LLM_LOCAL_UNAVAILABLE": ErrorSpec(
        "the embedded local model is not installed",
        "pip install 'papayu-git[local]', or configure PAPAYU_LLM_BASE_URL.",
    ),
    # --- best of N (docs/DESIGN.md, "Best of N") -----------------------------------
    "ERR_BEST_OF_NO_GREEN": ErrorSpec(
        "no candidate passed the gate; nothing landed",
        "Read why each lost ('git papayu show RUN'); retry the best red one with its failures "
        "('git papayu retry ID'), or ask again with a clearer goal or another model.",
    ),
    "ERR_BEST_OF_TIMEOUT": ErrorSpec(
        "the run's --timeout passed before this candidate was answered and checked",
        "Raise --timeout, ask for fewer candidates, or use --first-green.",
    ),
    "ERR_BUDGET_EXHAUSTED": ErrorSpec(
        "the run's --budget-tokens was spent (or reserved by requests under way): no more model requests",
        "Raise --budget-tokens, or ask for fewer candidates.",
    ),
    "ERR_RUN_NOT_FOUND": ErrorSpec(
        "no best-of run (or no candidate of it) with that id",
        "Use the run id best-of printed (best-YYYYMMDD-HHMMSS-xxxxxx, or a unique prefix), and RUN:N for its "
        "candidate N; the runs are in .git/papayu/runs/.",
    ),
    "ERR_JUDGE_INVALID": ErrorSpec(
        "the judge model's answer named none of the tied candidates",
        'Answer with one JSON object {"choice": "A", "reason": "..."} naming one of the labels shown.',
    ),
    # --- agent mode (docs/DESIGN.md, "Agent mode") ---------------------------------
    "ERR_AGENT_BAD_ARGUMENTS": ErrorSpec(
        "a tool call's arguments are not a JSON object of the tool's parameters (unknown key, wrong type, "
        "out of range)",
        "Send the arguments as one JSON object with exactly the parameters the tool declares.",
    ),
    "ERR_AGENT_UNKNOWN_TOOL": ErrorSpec(
        "the model called a tool papayu does not offer",
        "Call only the tools listed in the request: list_files, read_file, search_in_repo, get_env, get_logs, "
        "apply_patch, run_tests, run.",
    ),
    "ERR_AGENT_RUN_REFUSED": ErrorSpec(
        "the model asked to run a command, which needs the operator's --run-proposed",
        "Use run_tests (the project's check); the operator allows other commands with --run-proposed.",
    ),
    "ERR_AGENT_MAX_STEPS": ErrorSpec(
        "the agent still called tools after --max-steps model turns; nothing was committed",
        "Raise --max-steps, or narrow the goal (name the file or the failing test).",
    ),
    # --- forge -------------------------------------------------------------------
    "ERR_PUSH_FAILED": ErrorSpec("git push failed", "Check the remote and your credentials."),
    "ERR_FORGE_INSECURE_TOKEN": ErrorSpec(
        "the forge token would cross plain http to another machine",
        "Use an https:// API URL (PAPAYU_FORGE_API_URL); plain http only to this machine.",
    ),
    "ERR_FORGE_UNKNOWN": ErrorSpec("cannot tell the forge from the remote URL", "Pass --forge github|gitlab|gitea."),
    "ERR_FORGE_AUTH": ErrorSpec(
        "the forge refused the token (missing, expired, or not allowed to do this)",
        "Check the forge's own token variable: GH_TOKEN or GITHUB_TOKEN, GITLAB_TOKEN, GITEA_TOKEN.",
    ),
    "ERR_FORGE_NOT_FOUND": ErrorSpec(
        "the forge does not know that repository, branch or pull request",
        "Check the remote URL; set papayu.forge.repository (owner/name) or papayu.forge.apiUrl if they are guessed wrong.",
    ),
    "ERR_FORGE_HTTP": ErrorSpec("the forge answered with an error", "Read the status above and retry."),
    "ERR_FORGE_UNREACHABLE": ErrorSpec(
        "the forge's API did not answer (connection refused, name not resolved, timed out)",
        "Is the forge up at the URL shown? Else set papayu.forge.apiUrl (PAPAYU_FORGE_API_URL).",
    ),
    "ERR_FORGE_MERGE_REFUSED": ErrorSpec(
        "the forge refused to merge the pull request (not mergeable, a requirement unmet, a method not allowed); "
        "nothing landed",
        "Read the forge's reason above; fix it on the forge, or land locally with papayu.forge.land=local.",
    ),
    "ERR_FORGE_MERGE_CONFLICT": ErrorSpec(
        "the forge's pull request head or target moved, or they conflict (HTTP 409); nothing landed",
        "Look at the pull request on the forge; re-plan on the new tip if the target moved.",
    ),
    "ERR_FORGE_MERGE_DIVERGED": ErrorSpec(
        "the forge merged the pull request, but its target branch is not the checked tree on the local tip; "
        "the local branch was not moved",
        "Fetch the forge's branch and check it before taking it: git pull --ff-only, then your check.",
    ),
    "ERR_REMOTE_UNREACHABLE": ErrorSpec(
        "the git remote did not answer (down, wrong host or port)", "Check the remote's URL: git remote -v."
    ),
    "ERR_REMOTE_AUTH": ErrorSpec(
        "the git remote refused papayu's credentials",
        "Check that 'git ls-remote REMOTE' works without a prompt (credential helper, ssh key).",
    ),
    "ERR_PR_NOT_PUSHED": ErrorSpec(
        "the remote does not have the local papayu/<id> commit, so its checks are not about it",
        "Run 'git papayu pr ID' to push it, then wait for CI.",
    ),
    "ERR_CHECKS_RED": ErrorSpec("the forge's checks failed; nothing landed", "Fix the failure and push again."),
    "ERR_CHECKS_TIMEOUT": ErrorSpec("the forge's checks stayed pending too long", "Run land --when-green again later."),
    "ERR_REMOTE_NOT_FOUND": ErrorSpec("the git remote does not exist", "Check 'git remote -v' or pass --remote NAME."),
    "ERR_HOOK_EXISTS": ErrorSpec(
        "another pre-commit hook is installed; papayu will not overwrite it silently",
        "Pass --chain to run it before papayu's checks, or --force to replace it (a backup is kept).",
    ),
    "ERR_HOOK_NOT_INSTALLED": ErrorSpec(
        "papayu's pre-commit hook is not installed here", "Nothing to remove; see 'git papayu hooks install'."
    ),
    # --- online research ---------------------------------------------------------
    "ERR_ONLINE_DISABLED": ErrorSpec(
        "online research is off", "Set PAPAYU_ONLINE_RESEARCH=1 (or git config papayu.online.research true)."
    ),
    "ERR_FETCH_BLOCKED": ErrorSpec(
        "a web page was not fetched: the URL, its address, a redirect or the answer broke a fetch rule",
        "Only public http(s) pages are read; name an intranet host in PAPAYU_ONLINE_ALLOW_HOSTS.",
    ),
    "ERR_SEARCH_FAILED": ErrorSpec(
        "the web search failed or returned nothing usable",
        "Check PAPAYU_ONLINE_SEARCH_PROVIDER, PAPAYU_ONLINE_TAVILY_API_KEY or PAPAYU_ONLINE_SEARXNG_URL.",
    ),
    "ERR_RESEARCH_INVALID": ErrorSpec(
        "the model's research summary is not a valid {answer_md, sources, confidence} object",
        "Return one JSON object with answer_md, sources [{url, title}] from the fetched pages, confidence.",
    ),
    "ERR_RESEARCH_NOT_FOUND": ErrorSpec(
        "no stored research has that id", "See .git/papayu/research/ or run 'git papayu research QUERY'."
    ),
    # --- catch-all ---------------------------------------------------------------
    "ERR_USAGE": ErrorSpec("the command line is wrong", "See --help."),
    "ERR_INTERRUPTED": ErrorSpec(
        "interrupted (Ctrl-C or a termination signal) before the command finished",
        "Nothing landed and your branch is as before; run the command again.",
    ),
    "ERR_INTERNAL": ErrorSpec("an internal bug in papayu", "Please report it with the trace file named above."),
}


class PapayuError(Exception):
    """The one exception root. ``code`` must be a key of ERROR_CODES."""

    exit_code = 1

    def __init__(self, code: str, reason: str = "", *, path: str = "", hint: str | None = None) -> None:
        if code not in ERROR_CODES:
            raise KeyError(f"unknown error code {code!r}")
        self.code = code
        self.path = path
        self.reason = reason or ERROR_CODES[code].meaning
        self.hint = ERROR_CODES[code].hint if hint is None else hint
        super().__init__(self.format())

    def format(self) -> str:
        return format_error(self.code, self.reason, self.hint, where=f"at {self.path}" if self.path else "")

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "path": self.path, "reason": self.reason, "hint": self.hint}


class ValidationFailed(PapayuError):
    """Several problems found at once; the first one gives the code and the exit status."""

    def __init__(self, errors: list[PapayuError]) -> None:
        assert errors, "ValidationFailed needs at least one error"
        self.errors = errors
        first = errors[0]
        super().__init__(first.code, first.reason, path=first.path, hint=first.hint)

    def format(self) -> str:
        return "\n".join(e.format() for e in getattr(self, "errors", [])) or super().format()


def format_error(code: str, reason: str, hint: str = "", *, where: str = "") -> str:
    """The one way an error is printed: `ERR_CODE at WHERE: reason (hint)`, the code first, so
    that every error reads (and greps) alike whatever it concerns; ``where`` is "at PATH" or the
    stage it came from ("at the check"), "" for none."""
    head = f"{code} {where}" if where else code
    return f"{head}: {reason}" + (f" ({hint})" if hint else "")


def hint_for(code: str, plan_id: str) -> str:
    """The table's hint for ``code`` with the real plan id in its commands ('git papayu land ID')."""
    return re.sub(r"\bID\b", plan_id, ERROR_CODES[code].hint)


def repair_text(errors: list[PapayuError]) -> str:
    """The message sent to the model in the repair retry: one line per problem."""
    return "\n".join(f"- {e.code} at {e.path or '<response>'}: {e.reason}. Fix: {e.hint}" for e in errors)
