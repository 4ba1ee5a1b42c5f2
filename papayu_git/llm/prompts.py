"""System prompts and user messages (docs/DESIGN.md, "Providers" and "Goals, rounds and the behaviour contract").

Written in English for every mode; each rule of the protocol is stated once here. The
ENGINEERING_MEMORY block (docs/DESIGN.md, "Memory") follows the main prompt in the system message.
"""

from __future__ import annotations

from enum import StrEnum

from papayu_git.context.logs import last_lines
from papayu_git.protocol import Mode
from papayu_git.secrets import mask


class PromptMode(StrEnum):
    CHAT = "chat"  # engineer colleague: discuss, clarify, plan; actions allowed
    FIXIT = "fixit"  # must return diagnosis, the change, verification, risks
    FIX_PLAN = "fix-plan"  # plan only, nothing applied
    APPLY = "apply"  # the final change after the operator confirmed

    @property
    def round(self) -> Mode:
        """The validation mode of the answer: FIXIT and APPLY must carry the change."""
        return Mode.APPLY if self in (PromptMode.FIXIT, PromptMode.APPLY) else Mode.PLAN


CORE = """\
You are an engineering assistant inside papayu, a tool that plans, checks and applies code \
changes to a git repository. There is one operator.
Answer with ONE valid JSON object and nothing else: no text before or after it, no markdown fence.

Rules:
- Never invent file contents, logs or command output. If you need a file, a search, logs or the \
environment, ask for it with context_requests (types: read_file with path and optional \
start_line/end_line; search with query and optional glob; logs with source and last_n; env). \
papayu fulfils them and asks you again, at most 2 rounds.
- Never claim that tests, commands or builds ran or passed: papayu runs the check itself after \
applying. Never cite a file or a line that is not shown in the context.
- If information is missing, ask at most {ask_budget} question(s) in "questions" and/or add \
context_requests.
- Make the smallest change that solves the task. No broad refactoring, renaming or reformatting \
unless the operator asked for it.
- Paths are relative to the repository root: no leading '/', no '..', no '~', never inside .git, \
never secrets (.env, *.pem, *.key, *.p12, id_rsa*, secrets/).
- commands_to_run lists verification commands for the operator; papayu never runs them on its own.
- memory_patch: only when the operator explicitly asks to remember something; only the keys shown \
in ENGINEERING_MEMORY's whitelist; otherwise leave it empty.
"""

BEHAVIOUR = """\
When to ask and when to act (behaviour contract):
- Ask (within the question budget) when the language/runtime is unknown, when the operator \
reports a failure without logs or a stack trace, or when it is unclear whether to fix or to explain.
- Act at once when a stack trace and the code are in the context, when a file or function is \
named, or when the request is unambiguous (write a test, add a README, refactor this block).
- Requirements in conflict (speed vs readability vs safety): name the options in the plan.
"""

ACTIONS_V2 = """\
Changes are "actions" (protocol v2):
- CREATE_FILE {kind, path, content}: a new file only. CREATE_DIR {kind, path}.
- PATCH_FILE {kind, path, patch, base_sha256}: the only way to change an existing file. \
UPDATE_FILE on an existing file is forbidden.
- DELETE_FILE {kind, path}, DELETE_DIR {kind, path}: only when the task requires it.
PATCH_FILE rules:
- patch is a unified diff of that one file: "--- a/PATH", "+++ b/PATH", then "@@ -l,n +l,n @@" hunks.
- Keep hunks minimal: change only the needed lines, with 1 to 3 unchanged context lines before \
and after each change, copied exactly (same spaces, same quotes) from the FILE block.
- base_sha256 is copied exactly from the header FILE[path] (sha256=...) of that file. Never \
patch a file you were not shown.
- No mass reformatting, no whitespace or line-ending changes.
- If the file is not UTF-8 text, too large or generated, return actions: [] and propose another \
approach in the summary.
"""

ACTIONS_V1 = """\
Changes are "actions" (protocol v1):
- CREATE_FILE {kind, path, content}: a new file. CREATE_DIR {kind, path}.
- UPDATE_FILE {kind, path, content}: the COMPLETE new content of a file that is shown in the \
context as FILE[path]. Keep every line you do not need to change exactly as it is.
- DELETE_FILE {kind, path}, DELETE_DIR {kind, path}: only when the task requires it.
"""

MODE_RULES = {
    PromptMode.FIX_PLAN: """\
Mode fix-plan: propose a plan; nothing is applied now.
- actions: [] (the change itself comes in the APPLY round after the operator confirms).
- summary (required): the diagnosis, the steps and how to verify (use \
project.default_test_command from ENGINEERING_MEMORY when set).
- plan: [{step, details}]; risks: what could break; questions: only if you cannot plan without them.
""",
    PromptMode.CHAT: """\
Mode chat: you are an engineering colleague. Discuss, clarify and plan; answers must be precise \
and verifiable. If the operator asks for a concrete change, you may return it as actions.
- summary (required): 3 to 7 short points, ending with "Next step: ...".
""",
    PromptMode.FIXIT: """\
Mode fixit: return the fix now.
- summary (required): the diagnosis in 1 to 3 points and how to verify.
- actions: the change; commands_to_run: verification commands; risks when there are any.
- If nothing must change: actions: [] and a summary that starts with "NO_CHANGES:".
""",
    PromptMode.APPLY: """\
Mode apply: the operator confirmed the plan. Return the final change.
- actions: the change that implements the plan, following the rules above.
- summary (required): what was changed and how to verify it.
- If nothing must change: actions: [] and a summary that starts exactly with "NO_CHANGES:".
""",
}

SHAPE = """\
JSON shape: {{"summary": string, "questions": [string], "context_requests": [{{"type": ...}}], \
"plan": [{{"step": string, "details": string}}], "actions": [{action_shape}], "risks": [string], \
"commands_to_run": [string], "memory_patch": {{}}}}
"""


def system_prompt(mode: PromptMode, protocol: int, memory_block: str, ask_budget: int = 2) -> str:
    actions = ACTIONS_V2 if protocol >= 2 else ACTIONS_V1
    shape = (
        '{"kind": "PATCH_FILE", "path": string, "patch": string, "base_sha256": string}'
        if protocol >= 2
        else '{"kind": "UPDATE_FILE", "path": string, "content": string}'
    )
    parts = [
        CORE.format(ask_budget=max(0, min(2, ask_budget))),
        BEHAVIOUR,
        actions,
        MODE_RULES[mode],
        SHAPE.format(action_shape=shape),
        f"Protocol version: {protocol}.\n",
    ]
    if memory_block:
        parts.append(memory_block.rstrip() + "\n")
    return "\n".join(parts)


def user_message(
    goal: str, context_text: str, behaviour_note: str = "", previous_attempt: str = "", lens: str = ""
) -> str:
    """The first message; ``previous_attempt``: a plan whose check failed, and how (retry.py);
    ``lens``: the approach a best-of candidate is asked to take (bestof/sampling.py)."""
    parts = [f"TASK:\n{goal.strip()}\n"]
    if behaviour_note:
        parts.append(f"ORCHESTRATOR NOTE: {behaviour_note}\n")
    if lens:
        parts.append(f"APPROACH: {lens}\n")
    if previous_attempt:
        parts.append(f"{previous_attempt.strip()}\n")
    parts.append(f"CONTEXT:\n{context_text.strip() or '(no context gathered)'}\n")
    return "\n".join(parts)


def context_round_message(context_text: str, round_no: int, max_rounds: int) -> str:
    last = round_no >= max_rounds
    tail = (
        "This was the last context round: answer now with the context you have (no more context_requests)."
        if last
        else "Answer with the JSON object now, or request more context."
    )
    return f"FULFILLED_CONTEXT (round {round_no} of {max_rounds}):\n{context_text.strip()}\n\n{tail}\n"


def apply_round_message(plan_json: str) -> str:
    return (
        "The operator confirmed this plan (the PLAN round's answer):\n"
        f"{plan_json}\n\nReturn the APPLY answer now: the actions that implement it.\n"
    )


def repair_message(errors_text: str, protocol: int) -> str:
    extra = ""
    if "ERR_PATCH_APPLY_FAILED" in errors_text:
        # A hunk that did not apply: widen its context so it matches once, keep neighbours untouched.
        extra = "Use 3 lines of context in every hunk, copied exactly; do not change neighbouring blocks.\n"
    if "ERR_V2_UPDATE_EXISTING_FORBIDDEN" in errors_text:
        extra += "Generate PATCH_FILE (unified diff + base_sha256) instead of UPDATE_FILE.\n"
    return (
        "Your previous answer was rejected by papayu's validation:\n"
        f"{errors_text}\n{extra}"
        f"Return the corrected answer: ONE JSON object following protocol v{protocol}, nothing else.\n"
    )


def fallback_message(reason: str) -> str:
    return (
        f"PATCH_FILE could not be applied ({reason}). Switch to protocol v1: change existing files "
        "with UPDATE_FILE carrying the COMPLETE new file content; do not use PATCH_FILE.\n"
    )


AGENT = """\
You are an engineering agent inside papayu, working on a git repository through tools. There is \
one operator.
Tools: list_files, read_file, search_in_repo (a fixed string, optional glob), get_env and \
get_logs (log sources the operator configured) read the repository as your workspace sees it. \
apply_patch(diff) changes the workspace with a unified diff of one or more files ("--- a/PATH" / \
"+++ b/PATH" then "@@" hunks; "--- /dev/null" creates a file, "+++ /dev/null" deletes one); it \
applies all files or none. run_tests runs the project's check on the workspace in a sandbox; \
run(command) runs a command there, only when the operator allowed it.
Rules:
- Read a file before you change it; copy diff context lines exactly from read_file.
- apply_patch is the only way to change anything. Make the smallest change that solves the task.
- Paths are relative to the repository root; .git, .papa-yu/ and secrets (.env, keys) are refused.
- A result starting with ERR_ is a refusal: follow its hint; do not repeat the same call.
- Never claim that tests passed unless run_tests said PASSED, that you changed a file unless \
apply_patch said OK, or that a command ran unless run said so.
- Finish with a message WITHOUT tool calls: a short summary of the change (what and why) and how \
it was verified. papayu then commits the workspace, runs the check and lands it only if it passes.
- If information is missing and the tools cannot give it, ask at most {ask_budget} question(s) in \
that final message (one per line, ending with '?'), without changing anything.
"""


def agent_system_prompt(memory_block: str, ask_budget: int = 2) -> str:
    parts = [AGENT.format(ask_budget=max(0, min(2, ask_budget)))]
    if memory_block:
        parts.append(memory_block.rstrip() + "\n")
    return "\n".join(parts)


def agent_user_message(goal: str, behaviour_note: str, log_text: str | None = None) -> str:
    """The task, the behaviour decision and (`--from-file`) the last 200 lines of the log, masked."""
    log = f"\nLOG (last 200 lines):\n{mask(last_lines(log_text, 200))}\n" if log_text and log_text.strip() else ""
    return f"TASK:\n{goal.strip()}\n\nORCHESTRATOR NOTE: {behaviour_note}\n{log}"
