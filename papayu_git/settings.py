"""The one table of settings (docs/ARCHITECTURE.md, "Conventions"): env var, git config key, default, meaning.

Lookup order: environment variable, then `git config` of the repository, then the
default. The table in docs/REFERENCE.md is generated from SETTINGS (`python -m papayu_git.docs --write`).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import NamedTuple

from papayu_git.git import run_git


class Setting(NamedTuple):
    name: str
    env: str | None
    git_key: str | None
    default: str
    meaning: str


SETTINGS: list[Setting] = [
    Setting(
        "protocol_version",
        "PAPAYU_PROTOCOL_VERSION",
        "papayu.protocolVersion",
        "2",
        "protocol used for LLM responses (1 or 2)",
    ),
    Setting(
        "protocol_fallback_to_v1",
        "PAPAYU_PROTOCOL_FALLBACK_TO_V1",
        "papayu.protocolFallbackToV1",
        "1",
        "allow the single v2 -> v1 fallback in APPLY",
    ),
    Setting(
        "protected_paths",
        "PAPAYU_PROTECTED_PATHS",
        "papayu.protectedPaths",
        "",
        "extra protected patterns (comma-separated, gitignore-like) added to the built-in denylist",
    ),
    Setting(
        "test_patterns",
        "PAPAYU_TEST_PATTERNS",
        "papayu.testPatterns",
        "",
        "test files (comma-separated, gitignore-like) a plan may modify or delete only after review or with "
        "--allow-test-edits; memory project.test_roots wins; empty: the built-in list (`tests/**`, "
        "`**/test_*.py`, `**/*_test.go`, `**/*.spec.ts`, …)",
    ),
    Setting(
        "normalize_eol",
        "PAPAYU_NORMALIZE_EOL",
        "papayu.normalizeEol",
        "",
        "'lf' normalises CRLF to LF and adds a final newline",
    ),
    Setting(
        "rebase_stale",
        "PAPAYU_REBASE_STALE",
        "papayu.rebaseStale",
        "true",
        "an edit whose base changed at the tip since the plan lands by a 3-way merge from the version the "
        "model saw when that merges cleanly (docs/TRANSACTION.md, stale plans); false: refused with ERR_BASE_MISMATCH",
    ),
    Setting(
        "rebase_stale_depth",
        "PAPAYU_REBASE_STALE_DEPTH",
        "papayu.rebaseStaleDepth",
        "200",
        "how many commits, the tip first, are searched for the version a stale edit was written against "
        "(after the plan's base commit)",
    ),
    Setting(
        "check_command",
        "PAPAYU_CHECK_COMMAND",
        "papayu.checkCommand",
        "",
        "the check run on the plan's commit (isolated, sandboxed checkout) before landing",
    ),
    Setting(
        "check_timeout_sec",
        "PAPAYU_CHECK_TIMEOUT_SEC",
        "papayu.checkTimeoutSec",
        "900",
        "seconds before the check's whole process group is killed",
    ),
    Setting(
        "prewarm",
        "PAPAYU_PREWARM",
        "papayu.prewarm",
        "true",
        "while the model thinks, `plan` and `fix` prepare the check's checkout at the tip in a background "
        "process (writes only under .git/papayu/); false: the check prepares it when it starts",
    ),
    Setting(
        "prewarm_base",
        "PAPAYU_PREWARM_BASE",
        "papayu.prewarmBase",
        "true",
        "while the model thinks, the prewarm also runs the check on the tip (sandboxed, cached per tip): "
        "the base each plan's tests are compared with; false: the first apply on a tip runs it",
    ),
    Setting(
        "sandbox",
        "PAPAYU_SANDBOX",
        "papayu.sandbox",
        "auto",
        "auto: run the check under bubblewrap when it works here, else warn; required: refuse "
        "(ERR_SANDBOX_UNAVAILABLE) without it; off: never sandbox",
    ),
    Setting(
        "check_network",
        "PAPAYU_CHECK_NETWORK",
        "papayu.check.network",
        "false",
        "let the sandboxed check reach the network",
    ),
    Setting(
        "check_env_dirs",
        "PAPAYU_CHECK_ENV_DIRS",
        "papayu.check.envDirs",
        "",
        "more environment directories of the repository the check sees copy-on-write (comma-separated "
        "names, found next to the root and every manifest, or paths from the root); built in: .venv, venv, "
        "env, node_modules, target, .tox, .nox, .pixi, .yarn (or its cache and unplugged)",
    ),
    Setting(
        "check_include",
        "PAPAYU_CHECK_INCLUDE",
        "papayu.check.include",
        "",
        "ignored files the tests need, copied into the check read-only (comma-separated globs from the "
        "root, e.g. .env.test); their values are masked in everything papayu prints or stores",
    ),
    Setting(
        "check_junit",
        "PAPAYU_CHECK_JUNIT",
        "papayu.check.junit",
        "",
        "JUnit XML files the check writes (comma-separated globs from the root, `**` for any depth, e.g. "
        "reports/**/*.xml): read for a verdict per test, besides what papayu asks pytest, node --test, jest, "
        "vitest, cargo test and go test for; set, it replaces the Maven and Gradle reports papayu finds itself",
    ),
    Setting(
        "check_reinstall",
        "PAPAYU_CHECK_REINSTALL",
        "papayu.check.reinstall",
        "false",
        "tox and nox build and install the project into their environments in the check as they do run "
        "directly (needs the build backend and dependencies offline, or papayu.check.network); false: the "
        "environments are used as they are, and a copy of the project installed there is stood in for by the "
        "checkout's source",
    ),
    Setting(
        "check_local_ports",
        "PAPAYU_CHECK_LOCAL_PORTS",
        "papayu.check.localPorts",
        "",
        "loopback TCP ports relayed into the sandboxed check while its network stays off (comma-separated, "
        "e.g. 5432,6379 for a local database)",
    ),
    Setting(
        "check_tmp_mb",
        "PAPAYU_CHECK_TMP_MB",
        "papayu.check.tmpMB",
        "1024",
        "size of the check's private /tmp, and of its runners' report directory, in MiB",
    ),
    Setting(
        "check_select",
        "PAPAYU_CHECK_SELECT",
        "papayu.check.select",
        "observe",
        "off | observe | on: pytest checks run only the tests whose recorded inputs a plan changed (on), or "
        "run every test and record what that selection would have missed (observe; git papayu stats shows it)",
    ),
    Setting(
        "check_output_mb",
        "PAPAYU_CHECK_OUTPUT_MB",
        "papayu.check.outputMB",
        "32",
        "the check's log keeps at most this many MiB (its first and last halves; the cut is said)",
    ),
    Setting(
        "check_memory_mb",
        "PAPAYU_CHECK_MEMORY_MB",
        "papayu.check.memoryMB",
        "0",
        "data-segment limit of each check process in MiB (0: half of the machine's memory); "
        "files the check writes are limited to the same size",
    ),
    Setting(
        "check_allow_user_tree_links",
        "PAPAYU_CHECK_ALLOW_USER_TREE_LINKS",
        "papayu.check.allowUserTreeLinks",
        "false",
        "land on an unsandboxed check even when the project's environment links into your work tree "
        "(editable installs, workspace symlinks): the check may then have tested your code, not the plan's",
    ),
    Setting(
        "check_env",
        "PAPAYU_CHECK_ENV",
        "papayu.check.env",
        "",
        "extra environment variable names passed to the check (comma-separated; credentials never are)",
    ),
    Setting(
        "check_python_safe_path",
        "PAPAYU_CHECK_PYTHON_SAFE_PATH",
        "papayu.check.pythonSafePath",
        "auto",
        "PYTHONSAFEPATH=1 in the check (Python 3.11+: the working directory is not put first on sys.path, so "
        "a plan's top-level `pytest/` or `argparse.py` cannot stand in for the real one); auto: on unless the "
        "tip has its own module or package (not setup.py, conftest.py, tests/, …) at its root or a Python "
        "subproject's (a flat layout imports its code from there); true | false force it",
    ),
    Setting(
        "land_run_hooks",
        "PAPAYU_LAND_RUN_HOOKS",
        "papayu.land.runHooks",
        "false",
        "run your git hooks (post-merge; pre-push for `pr`) when papayu lands or pushes a plan's commit, "
        "except when it changes a file a hook may run or read (`.husky/`, `.githooks/`, the in-tree "
        "core.hooksPath, lefthook/pre-commit configs, package.json's hook keys); off: skipped, and said",
    ),
    Setting("trace", "PAPAYU_TRACE", "papayu.trace", "1", "write traces to .git/papayu/traces/"),
    Setting(
        "trace_raw",
        "PAPAYU_TRACE_RAW",
        "papayu.traceRaw",
        "0",
        "also store the raw model output in traces (secrets masked)",
    ),
    Setting("log", "PAPAYU_LOG", None, "", "print stderr events (EVENT key=value ...); -v does the same"),
    Setting(
        "context_max_files",
        "PAPAYU_CONTEXT_MAX_FILES",
        "papayu.context.maxFiles",
        "8",
        "most FILE/SEARCH/LOGS/ENV blocks sent to the model",
    ),
    Setting(
        "context_max_file_chars",
        "PAPAYU_CONTEXT_MAX_FILE_CHARS",
        "papayu.context.maxFileChars",
        "20000",
        "most characters of one file block",
    ),
    Setting(
        "context_max_total_chars",
        "PAPAYU_CONTEXT_MAX_TOTAL_CHARS",
        "papayu.context.maxTotalChars",
        "120000",
        "most characters of the whole context",
    ),
    Setting(
        "context_recent_commits",
        "PAPAYU_CONTEXT_RECENT_COMMITS",
        "papayu.context.recentCommits",
        "5",
        "the base context lists files changed in this many recent commits",
    ),
    Setting(
        "llm_provider",
        "PAPAYU_LLM_PROVIDER",
        "papayu.llm.provider",
        "",
        "openai | openai-compatible | ollama | local (empty: local unless a base URL is set)",
    ),
    Setting(
        "llm_base_url",
        "PAPAYU_LLM_BASE_URL",
        "papayu.llm.baseUrl",
        "",
        "base URL of the LLM API, e.g. https://api.openai.com/v1",
    ),
    Setting("llm_model", "PAPAYU_LLM_MODEL", "papayu.llm.model", "", "model name sent to the provider"),
    Setting(
        "llm_strict_json",
        "PAPAYU_LLM_STRICT_JSON",
        "papayu.llm.strictJson",
        "1",
        "send response_format json_schema (falls back when the server rejects it)",
    ),
    Setting("llm_mode", "PAPAYU_LLM_MODE", "papayu.llm.mode", "fix-plan", "chat | fixit | fix-plan"),
    Setting(
        "llm_timeout_sec",
        "PAPAYU_LLM_TIMEOUT_SEC",
        "papayu.llm.timeoutSec",
        "90",
        "seconds to wait for one model answer",
    ),
    Setting(
        "llm_api_key",
        "PAPAYU_LLM_API_KEY",
        None,
        "",
        "API key (environment only, else OPENAI_API_KEY; never stored in plans, traces or logs)",
    ),
    Setting(
        "llm_retries",
        "PAPAYU_LLM_RETRIES",
        "papayu.llm.retries",
        "3",
        "retries with exponential backoff on 429, 5xx and connection errors",
    ),
    Setting(
        "llm_backoff_sec",
        "PAPAYU_LLM_BACKOFF_SEC",
        "papayu.llm.backoffSec",
        "1",
        "first backoff delay in seconds (doubles per retry; Retry-After wins, capped at 30 s)",
    ),
    Setting(
        "llm_max_tokens",
        "PAPAYU_LLM_MAX_TOKENS",
        "papayu.llm.maxTokens",
        "0",
        "cap on max_tokens (0: 16384, or 4096 when the input is over 80k chars); small local models want ~1024",
    ),
    Setting(
        "llm_context_tokens",
        "PAPAYU_LLM_CONTEXT_TOKENS",
        "papayu.llm.contextTokens",
        "0",
        "the model's context window in tokens: papayu cuts the context until prompt and answer fit it; "
        "0: ask the server (llama.cpp /props, Ollama /api/show; the embedded model's is "
        "PAPAYU_LOCAL_N_CTX), and send requests unfitted when it does not say",
    ),
    Setting(
        "llm_ask_budget",
        "PAPAYU_LLM_ASK_BUDGET",
        "papayu.llm.askBudget",
        "2",
        "most clarifying questions per answer, 0..2 (memory user.ask_budget wins when set)",
    ),
    Setting(
        "llm_price",
        "PAPAYU_LLM_PRICE",
        "papayu.llm.price",
        "",
        "PROMPT,COMPLETION in USD per million tokens, e.g. 2.50,10: `stats` estimates what the model calls "
        "cost; git config papayu.llm.price.<provider> prices one provider (it wins); empty: no estimate",
    ),
    Setting(
        "candidates",
        "PAPAYU_CANDIDATES",
        "papayu.candidates",
        "",
        "the models `best-of` and `fix --candidates N` ask, comma-separated PROVIDER/MODEL[@BASE_URL] "
        "(openai/gpt-4o-mini,ollama/qwen2.5-coder:7b); keys come from the environment as for one model; "
        "empty: the configured model, sampled at rising temperatures with a different approach each",
    ),
    Setting(
        "candidates_judge",
        "PAPAYU_CANDIDATES_JUDGE",
        "papayu.candidates.judge",
        "",
        "a model (PROVIDER/MODEL[@BASE_URL]) that breaks a tie between equally ranked green candidates, "
        "shown their diffs unnamed and in random order; it never overrides the gate; empty: the lower number wins",
    ),
    Setting(
        "candidates_checks",
        "PAPAYU_CANDIDATES_CHECKS",
        "papayu.candidates.checks",
        "0",
        "best-of candidates checked at once, each in its own pooled checkout (0: two per CPU)",
    ),
    Setting(
        "local_model_path",
        "PAPAYU_LOCAL_MODEL",
        "papayu.local.model",
        "",
        "GGUF file for the embedded local provider (default: the packaged Gemma 3 270M)",
    ),
    Setting(
        "local_n_ctx",
        "PAPAYU_LOCAL_N_CTX",
        "papayu.local.nCtx",
        "8192",
        "context window of the embedded llama.cpp server, in tokens",
    ),
    Setting(
        "local_start_timeout_sec",
        "PAPAYU_LOCAL_START_TIMEOUT_SEC",
        "papayu.local.startTimeoutSec",
        "120",
        "seconds to wait for the embedded llama.cpp server to answer",
    ),
    Setting(
        "forge",
        "PAPAYU_FORGE",
        "papayu.forge.type",
        "",
        "github, gitlab or gitea for `pr` and `land --when-green` (empty: guessed from the remote's host)",
    ),
    Setting(
        "forge_api_url",
        "PAPAYU_FORGE_API_URL",
        "papayu.forge.apiUrl",
        "",
        "forge REST API base, e.g. https://git.example.com/api/v4 (empty: derived from the remote)",
    ),
    Setting(
        "forge_web_url",
        "PAPAYU_FORGE_WEB_URL",
        "papayu.forge.webUrl",
        "",
        "forge web base for the compare URL printed without a token (empty: https://<remote host>)",
    ),
    Setting(
        "checks_timeout_sec",
        "PAPAYU_CHECKS_TIMEOUT_SEC",
        "papayu.checksTimeoutSec",
        "3600",
        "`land --when-green`: give up (ERR_CHECKS_TIMEOUT) when checks stay pending this long",
    ),
    Setting(
        "checks_interval_sec",
        "PAPAYU_CHECKS_INTERVAL_SEC",
        "papayu.checksIntervalSec",
        "30",
        "`land --when-green`: seconds between polls of the forge's checks",
    ),
    # What an MCP client (a model) may ask for; the operator decides (docs/DESIGN.md, "MCP server").
    Setting(
        "mcp_allow_check",
        "PAPAYU_MCP_ALLOW_CHECK",
        "papayu.mcp.allowCheck",
        "false",
        "MCP apply_plan accepts `check` from the client; off: refused, the check resolves as the CLI's does "
        "without --check",
    ),
    Setting(
        "mcp_allow_no_check",
        "PAPAYU_MCP_ALLOW_NO_CHECK",
        "papayu.mcp.allowNoCheck",
        "false",
        "MCP apply_plan accepts `no_check`, and land_plan lands a plan no check passed on",
    ),
    Setting(
        "mcp_allow_test_edits",
        "PAPAYU_MCP_ALLOW_TEST_EDITS",
        "papayu.mcp.allowTestEdits",
        "false",
        "MCP apply_plan accepts `allow_test_edits`, and land_plan lands a plan that edits existing tests",
    ),
    Setting(
        "mcp_allow_deletions",
        "PAPAYU_MCP_ALLOW_DELETIONS",
        "papayu.mcp.allowDeletions",
        "false",
        "MCP apply_plan accepts `allow_deletions`, and land_plan lands a plan that deletes files",
    ),
    # Online research (docs/FEATURES.md and docs/DESIGN.md, "Online research").
    Setting(
        "agent_test_output",
        "PAPAYU_AGENT_TEST_OUTPUT",
        "papayu.agent.testOutput",
        "full",
        "what agent mode's run_tests and run tell the model: full (the output's tail, secrets and the "
        "values of the repository's protected and included files masked, base64 and hex too) or names "
        "(pass or fail, counts and the failing tests' names only)",
    ),
    Setting(
        "online_research",
        "PAPAYU_ONLINE_RESEARCH",
        "papayu.online.research",
        "0",
        "allow web research when a plan fails or the model asks for outside knowledge, and `research`",
    ),
    Setting(
        "online_auto_use_as_context",
        "PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT",
        "papayu.online.autoUseAsContext",
        "0",
        "put the research summary into the next planning call at once (else print it and the re-plan command)",
    ),
    Setting("search_provider", "PAPAYU_SEARCH_PROVIDER", "papayu.online.searchProvider", "tavily", "tavily or searxng"),
    Setting(
        "tavily_api_key",
        "PAPAYU_TAVILY_API_KEY",
        None,
        "",
        "Tavily API key (environment only; sent over https or to this machine only, never stored)",
    ),
    Setting(
        "tavily_url", "PAPAYU_TAVILY_URL", "papayu.online.tavilyUrl", "https://api.tavily.com/search", "Tavily endpoint"
    ),
    Setting(
        "searxng_url",
        "PAPAYU_SEARXNG_URL",
        "papayu.online.searxngUrl",
        "",
        "SearXNG base URL (its JSON format must be enabled), e.g. https://searx.example.org",
    ),
    Setting(
        "online_model", "PAPAYU_ONLINE_MODEL", "papayu.online.model", "", "model for summaries (empty: the plan's)"
    ),
    Setting(
        "online_max_sources", "PAPAYU_ONLINE_MAX_SOURCES", "papayu.online.maxSources", "5", "search results, 1..20"
    ),
    Setting("online_max_pages", "PAPAYU_ONLINE_MAX_PAGES", "papayu.online.maxPages", "4", "pages fetched, 1..10"),
    Setting(
        "online_page_max_bytes",
        "PAPAYU_ONLINE_PAGE_MAX_BYTES",
        "papayu.online.pageMaxBytes",
        "200000",
        "a larger page is refused (read as a stream, stopped at the cap)",
    ),
    Setting(
        "online_timeout_sec",
        "PAPAYU_ONLINE_TIMEOUT_SEC",
        "papayu.online.timeoutSec",
        "20",
        "seconds one search or one page fetch may take in all (connecting, redirects and a page that arrives "
        "slowly included)",
    ),
    Setting(
        "online_deadline_sec",
        "PAPAYU_ONLINE_DEADLINE_SEC",
        "papayu.online.deadlineSec",
        "60",
        "seconds the search and the page fetches of one research may take together (the summary is the "
        "model's call, under its own timeout)",
    ),
    Setting(
        "online_allow_hosts",
        "PAPAYU_ONLINE_ALLOW_HOSTS",
        "papayu.online.allowHosts",
        "",
        "comma-separated host[:port] exempt from the private-address block only (intranet docs)",
    ),
]

_BY_NAME = {s.name: s for s in SETTINGS}
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


@lru_cache(maxsize=8)
def _git_config(cwd: str) -> dict[str, str]:
    try:
        out = run_git(["config", "-z", "--list"], cwd=cwd, check=False).stdout
    except OSError:
        return {}
    values: dict[str, str] = {}
    for item in out.split("\0"):
        if item:
            key, _, value = item.partition("\n")
            values[key.lower()] = value
    return values


def forget_cached_config() -> None:
    """Read git config afresh on the next lookup: a long-running process (the MCP server) must see
    the operator's changes, above all one that takes a permission back."""
    _git_config.cache_clear()


def _config_key(cwd: str) -> str:
    """One `git config --list` per repository: `repo/`, `repo` and `repo/.git` share it."""
    path = cwd.rstrip("/") or "/"
    return os.path.dirname(path) if os.path.basename(path) == ".git" else path


def git_config_value(key: str, cwd: str | None = None) -> str | None:
    return _git_config(_config_key(cwd or os.getcwd())).get(key.lower())


def git_config_items(prefix: str, cwd: str | None = None) -> dict[str, str]:
    """Every `git config` value whose (lower-cased) key starts with ``prefix``, e.g. "papayu.logs."."""
    prefix = prefix.lower()
    return {k[len(prefix) :]: v for k, v in _git_config(cwd or os.getcwd()).items() if k.startswith(prefix)}


def by_name(name: str) -> Setting:
    return _BY_NAME[name]


def get(name: str, cwd: str | None = None) -> str:
    setting = _BY_NAME[name]
    if setting.env and os.environ.get(setting.env) is not None:
        return os.environ[setting.env]
    if setting.git_key:
        value = git_config_value(setting.git_key, cwd)
        if value is not None:
            return value
    return setting.default


def get_bool(name: str, cwd: str | None = None) -> bool:
    return get(name, cwd).strip().lower() in TRUE_WORDS


def get_int(name: str, cwd: str | None = None) -> int:
    raw = get(name, cwd)
    try:
        return int(raw)
    except ValueError:
        return int(_BY_NAME[name].default)


def markdown_table() -> str:
    rows = ["| setting | env var | git config | default | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        rows.append(f"| {s.name} | `{s.env or '-'}` | `{s.git_key or '-'}` | `{s.default}` | {s.meaning} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
