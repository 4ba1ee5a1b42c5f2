"""The one table of settings (docs/ARCHITECTURE.md, "Conventions"; docs/REFERENCE.md, "Settings").

A setting is named by its git config key, one family per concern (`papayu.check.*` for the
check, `papayu.forge.*` for the forge, ...), and its environment variable is derived from the
key by one rule, `env_name`: papayu.check.timeoutSec -> PAPAYU_CHECK_TIMEOUT_SEC. Lookup order:
a command-line flag where the caller has one, the environment variable, `git config` of the
repository, the default; `resolve` says which of them won. Names a setting had before keep
working, each with a one-line notice naming the new one, once per process; the new name wins
when both are set. A `papayu.*` key of git config that no setting has is said too (with the
nearest real key), never silently ignored. This module never prints: notices go to the sink the
CLI installs (`notices_to`). The table in docs/REFERENCE.md is generated from SETTINGS
(`python -m papayu_git.docs --write`).
"""

from __future__ import annotations

import difflib
import os
import re
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from papayu_git.git import run_git

PREFIX = "papayu."


def env_name(key: str) -> str:
    """The environment variable of a git config key: dots and the humps of camelCase become
    underscores, all upper-cased (papayu.check.tmpMB -> PAPAYU_CHECK_TMP_MB)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace(".", "_").upper()


def setting_name(key: str) -> str:
    """The name code looks a setting up by: its environment variable without PAPAYU_, lower-cased."""
    return env_name(key).removeprefix("PAPAYU_").lower()


class Setting(NamedTuple):
    key: str  # the git config key; the name and the environment variable derive from it
    default: str
    meaning: str
    old: tuple[str, ...] = ()  # names it had (git config keys and environment variables), still read
    git: bool = True  # False: environment only (credentials, the log switch)

    @property
    def name(self) -> str:
        return setting_name(self.key)

    @property
    def env(self) -> str:
        return env_name(self.key)

    @property
    def git_key(self) -> str | None:
        return self.key if self.git else None

    @property
    def old_envs(self) -> tuple[str, ...]:
        return tuple(n for n in self.old if "." not in n)

    @property
    def old_keys(self) -> tuple[str, ...]:
        return tuple(n for n in self.old if "." in n)


class Section(NamedTuple):
    """A family of keys the user names (`papayu.logs.<source>`): every key under ``prefix`` is known."""

    prefix: str  # ends with "."
    meaning: str
    old: tuple[str, ...] = ()  # prefixes it had


SETTINGS: list[Setting] = [
    Setting(
        "papayu.protocol.version", "2", "protocol used for LLM responses (1 or 2)", old=("papayu.protocolVersion",)
    ),
    Setting(
        "papayu.protocol.fallbackToV1",
        "1",
        "allow the single v2 -> v1 fallback in APPLY",
        old=("papayu.protocolFallbackToV1",),
    ),
    Setting(
        "papayu.protectedPaths",
        "",
        "extra protected patterns (comma-separated, gitignore-like) added to the built-in denylist",
    ),
    Setting(
        "papayu.testPatterns",
        "",
        "test files (comma-separated, gitignore-like) a plan may modify or delete only after review or with "
        "--allow-test-edits; memory project.test_roots wins; empty: the built-in list (`tests/**`, "
        "`**/test_*.py`, `**/*_test.go`, `**/*.spec.ts`, …)",
    ),
    Setting("papayu.normalizeEol", "", "'lf' normalises CRLF to LF and adds a final newline"),
    Setting(
        "papayu.stale.rebase",
        "true",
        "an edit whose base changed at the tip since the plan lands by a 3-way merge from the version the "
        "model saw when that merges cleanly (docs/TRANSACTION.md, stale plans); false: refused with ERR_BASE_MISMATCH",
        old=("papayu.rebaseStale", "PAPAYU_REBASE_STALE"),
    ),
    Setting(
        "papayu.stale.searchDepth",
        "200",
        "how many commits, the tip first, are searched for the version a stale edit was written against "
        "(after the plan's base commit)",
        old=("papayu.rebaseStaleDepth", "PAPAYU_REBASE_STALE_DEPTH"),
    ),
    Setting(
        "papayu.check.command",
        "",
        "the check run on the plan's commit (isolated, sandboxed checkout) before landing",
        old=("papayu.checkCommand",),
    ),
    Setting(
        "papayu.check.timeoutSec",
        "900",
        "seconds before the check's whole process group is killed",
        old=("papayu.checkTimeoutSec",),
    ),
    Setting(
        "papayu.check.prewarm",
        "true",
        "while the model thinks, `plan` and `fix` prepare the check's checkout at the tip in a background "
        "process (writes only under .git/papayu/); false: the check prepares it when it starts",
        old=("papayu.prewarm", "PAPAYU_PREWARM"),
    ),
    Setting(
        "papayu.check.prewarmBase",
        "true",
        "while the model thinks, the prewarm also runs the check on the tip (sandboxed, cached per tip): "
        "the base each plan's tests are compared with; false: the first apply on a tip runs it",
        old=("papayu.prewarmBase", "PAPAYU_PREWARM_BASE"),
    ),
    Setting(
        "papayu.check.sandbox",
        "auto",
        "auto: run the check under bubblewrap when it works here, else warn; required: refuse "
        "(ERR_SANDBOX_UNAVAILABLE) without it; off: never sandbox",
        old=("papayu.sandbox", "PAPAYU_SANDBOX"),
    ),
    Setting("papayu.check.network", "false", "let the sandboxed check reach the network"),
    Setting(
        "papayu.check.envDirs",
        "",
        "more environment directories of the repository the check sees copy-on-write (comma-separated "
        "names, found next to the root and every manifest, or paths from the root); built in: .venv, venv, "
        "env, node_modules, target, .tox, .nox, .pixi, .yarn (or its cache and unplugged)",
    ),
    Setting(
        "papayu.check.include",
        "",
        "ignored files the tests need, copied into the check read-only (comma-separated globs from the "
        "root, e.g. .env.test); their values are masked in everything papayu prints or stores",
    ),
    Setting(
        "papayu.check.junit",
        "",
        "JUnit XML files the check writes (comma-separated globs from the root, `**` for any depth, e.g. "
        "reports/**/*.xml): read for a verdict per test, besides what papayu asks pytest, node --test, jest, "
        "vitest, cargo test and go test for; set, it replaces the Maven and Gradle reports papayu finds itself",
    ),
    Setting(
        "papayu.check.reinstall",
        "false",
        "tox and nox build and install the project into their environments in the check as they do run "
        "directly (needs the build backend and dependencies offline, or papayu.check.network); false: the "
        "environments are used as they are, and a copy of the project installed there is stood in for by the "
        "checkout's source",
    ),
    Setting(
        "papayu.check.localPorts",
        "",
        "loopback TCP ports relayed into the sandboxed check while its network stays off (comma-separated, "
        "e.g. 5432,6379 for a local database)",
    ),
    Setting(
        "papayu.check.tmpMB", "1024", "size of the check's private /tmp, and of its runners' report directory, in MiB"
    ),
    Setting(
        "papayu.check.select",
        "on",
        "on | off: a pytest check runs first the tests a plan's change reaches and those red on the tip, "
        "stops there when one breaks, else runs the rest (on); off: the suite in its own order. Every plan "
        "lands on the whole suite either way (observe, its old value, reads as on)",
    ),
    Setting(
        "papayu.check.outputMB",
        "32",
        "the check's log keeps at most this many MiB (its first and last halves; the cut is said)",
    ),
    Setting(
        "papayu.check.memoryMB",
        "0",
        "data-segment limit of each check process in MiB (0: half of the machine's memory); "
        "files the check writes are limited to the same size",
    ),
    Setting(
        "papayu.check.allowUserTreeLinks",
        "false",
        "land on an unsandboxed check even when the project's environment links into your work tree "
        "(editable installs, workspace symlinks): the check may then have tested your code, not the plan's",
    ),
    Setting(
        "papayu.check.env",
        "",
        "extra environment variable names passed to the check (comma-separated; credentials never are)",
    ),
    Setting(
        "papayu.check.pythonSafePath",
        "auto",
        "PYTHONSAFEPATH=1 in the check (Python 3.11+: the working directory is not put first on sys.path, so "
        "a plan's top-level `pytest/` or `argparse.py` cannot stand in for the real one); auto: on unless the "
        "tip has its own module or package (not setup.py, conftest.py, tests/, …) at its root or a Python "
        "subproject's (a flat layout imports its code from there); true | false force it",
    ),
    Setting(
        "papayu.land.runHooks",
        "false",
        "run your git hooks (post-merge; pre-push for `pr`) when papayu lands or pushes a plan's commit, "
        "except when it changes a file a hook may run or read (`.husky/`, `.githooks/`, the in-tree "
        "core.hooksPath, lefthook/pre-commit configs, package.json's hook keys); off: skipped, and said",
    ),
    Setting("papayu.trace.enabled", "1", "write traces to .git/papayu/traces/", old=("papayu.trace", "PAPAYU_TRACE")),
    Setting(
        "papayu.trace.raw", "0", "also store the raw model output in traces (secrets masked)", old=("papayu.traceRaw",)
    ),
    Setting("papayu.log", "", "print stderr events (EVENT key=value ...); -v does the same", git=False),
    Setting("papayu.context.maxFiles", "8", "most FILE/SEARCH/LOGS/ENV blocks sent to the model"),
    Setting("papayu.context.maxFileChars", "20000", "most characters of one file block"),
    Setting("papayu.context.maxTotalChars", "120000", "most characters of the whole context"),
    Setting("papayu.context.recentCommits", "5", "the base context lists files changed in this many recent commits"),
    Setting(
        "papayu.llm.provider", "", "openai | openai-compatible | ollama | local (empty: local unless a base URL is set)"
    ),
    Setting("papayu.llm.baseUrl", "", "base URL of the LLM API, e.g. https://api.openai.com/v1"),
    Setting("papayu.llm.model", "", "model name sent to the provider"),
    Setting("papayu.llm.strictJson", "1", "send response_format json_schema (falls back when the server rejects it)"),
    Setting("papayu.llm.mode", "fix-plan", "chat | fixit | fix-plan"),
    Setting(
        "papayu.llm.timeoutSec",
        "",
        "seconds to wait for one model answer (empty: 90; 900 for the embedded model, on this machine's CPU)",
    ),
    Setting(
        "papayu.llm.apiKey",
        "",
        "API key (environment only, else OPENAI_API_KEY; never stored in plans, traces or logs)",
        git=False,
    ),
    Setting("papayu.llm.retries", "3", "retries with exponential backoff on 429, 5xx and connection errors"),
    Setting(
        "papayu.llm.backoffSec",
        "1",
        "first backoff delay in seconds (doubles per retry; Retry-After wins, capped at 30 s)",
    ),
    Setting(
        "papayu.llm.maxTokens",
        "0",
        "cap on max_tokens (0: 16384, or 4096 when the input is over 80k chars); small local models want ~1024",
    ),
    Setting(
        "papayu.llm.contextTokens",
        "0",
        "the model's context window in tokens: papayu cuts the context until prompt and answer fit it, and "
        "starts the embedded llama.cpp server with it (0 there: 8192); 0: ask the server (llama.cpp /props, "
        "Ollama /api/show), and send requests unfitted when it does not say",
        old=("papayu.local.nCtx", "PAPAYU_LOCAL_N_CTX"),
    ),
    Setting(
        "papayu.llm.askBudget", "2", "most clarifying questions per answer, 0..2 (memory user.ask_budget wins when set)"
    ),
    Setting(
        "papayu.llm.price",
        "",
        "PROMPT,COMPLETION in USD per million tokens, e.g. 2.50,10: `stats` estimates what the model calls "
        "cost; git config papayu.llm.providerPrice.<provider> prices one provider (it wins); empty: no estimate",
    ),
    Setting(
        "papayu.candidates.models",
        "",
        "the models `best-of` and `fix --candidates N` ask, comma-separated PROVIDER/MODEL[@BASE_URL] "
        "(openai/gpt-4o-mini,ollama/qwen2.5-coder:7b); keys come from the environment as for one model; "
        "empty: the configured model, sampled at rising temperatures with a different approach each",
        old=("papayu.candidates", "PAPAYU_CANDIDATES"),
    ),
    Setting(
        "papayu.candidates.judge",
        "",
        "a model (PROVIDER/MODEL[@BASE_URL]) that breaks a tie between equally ranked green candidates, "
        "shown their diffs unnamed and in random order; it never overrides the gate; empty: the lower number wins",
    ),
    Setting(
        "papayu.candidates.checks",
        "0",
        "best-of candidates checked at once, each in its own pooled checkout (0: two per CPU)",
    ),
    Setting("papayu.local.model", "", "GGUF file for the embedded local provider (default: the packaged Gemma 3 270M)"),
    Setting("papayu.local.startTimeoutSec", "120", "seconds to wait for the embedded llama.cpp server to answer"),
    Setting(
        "papayu.forge.type",
        "",
        "github, gitlab or gitea for `pr` and `land --when-green` (empty: guessed from the remote's host)",
        old=("PAPAYU_FORGE",),
    ),
    Setting(
        "papayu.forge.apiUrl",
        "",
        "forge REST API base, e.g. https://git.example.com/api/v4 (empty: the remote's scheme, host, port and "
        "sub-path with /api/v3 (GitHub Enterprise), /api/v4 (GitLab) or /api/v1 (Gitea); https://api.github.com "
        "for github.com)",
    ),
    Setting(
        "papayu.forge.webUrl",
        "",
        "forge web base for the compare URL printed without a token (empty: the remote's scheme, host, port "
        "and sub-path; https for ssh remotes)",
    ),
    Setting(
        "papayu.forge.repository",
        "",
        "the repository on the forge as owner/name (GitLab: group/subgroup/project); empty: read from the "
        "remote's URL, whose path before it is the forge's sub-path",
    ),
    Setting(
        "papayu.forge.land",
        "merge",
        "`land --when-green` of a plan with a pull request: merge (through the forge's API, head pinned to the "
        "checked commit; the local branch then follows the forge) or local (a local fast-forward; the pull "
        "request is closed with a comment naming the landed commit)",
    ),
    Setting(
        "papayu.forge.requiredChecks",
        "",
        "checks `land --when-green` waits for besides those the forge says the target branch requires "
        "(comma-separated names; globs on Gitea); what a token that may not read the protection must be told",
    ),
    Setting(
        "papayu.forge.ciTimeoutSec",
        "3600",
        "`land --when-green`: give up (ERR_CHECKS_TIMEOUT, or the forge's error if it is down then) when the "
        "required checks stay pending this long",
        old=("papayu.checksTimeoutSec", "PAPAYU_CHECKS_TIMEOUT_SEC"),
    ),
    Setting(
        "papayu.forge.ciIntervalSec",
        "30",
        "`land --when-green`: seconds between polls of the forge's checks",
        old=("papayu.checksIntervalSec", "PAPAYU_CHECKS_INTERVAL_SEC"),
    ),
    # What an MCP client (a model) may ask for; the operator decides (docs/DESIGN.md, "MCP server").
    Setting(
        "papayu.mcp.allowCheck",
        "false",
        "MCP apply_plan accepts `check` from the client; off: refused, the check resolves as the CLI's does "
        "without --check",
    ),
    Setting(
        "papayu.mcp.allowNoCheck",
        "false",
        "MCP apply_plan accepts `no_check`, and land_plan lands a plan no check passed on",
    ),
    Setting(
        "papayu.mcp.allowTestEdits",
        "false",
        "MCP apply_plan accepts `allow_test_edits`, and land_plan lands a plan that edits existing tests",
    ),
    Setting(
        "papayu.mcp.allowDeletions",
        "false",
        "MCP apply_plan accepts `allow_deletions`, and land_plan lands a plan that deletes files",
    ),
    # Online research (docs/FEATURES.md and docs/DESIGN.md, "Online research").
    Setting(
        "papayu.agent.testOutput",
        "full",
        "what agent mode's run_tests and run tell the model: full (the output's tail, secrets and the "
        "values of the repository's protected and included files masked, base64 and hex too) or names "
        "(pass or fail, counts and the failing tests' names only)",
    ),
    Setting(
        "papayu.online.research",
        "0",
        "allow web research when a plan fails or the model asks for outside knowledge, and `research`",
    ),
    Setting(
        "papayu.online.autoUseAsContext",
        "0",
        "put the research summary into the next planning call at once (else print it and the re-plan command)",
    ),
    Setting("papayu.online.searchProvider", "tavily", "tavily or searxng", old=("PAPAYU_SEARCH_PROVIDER",)),
    Setting(
        "papayu.online.tavilyApiKey",
        "",
        "Tavily API key (environment only; sent over https or to this machine only, never stored)",
        old=("PAPAYU_TAVILY_API_KEY",),
        git=False,
    ),
    Setting("papayu.online.tavilyUrl", "https://api.tavily.com/search", "Tavily endpoint", old=("PAPAYU_TAVILY_URL",)),
    Setting(
        "papayu.online.searxngUrl",
        "",
        "SearXNG base URL (its JSON format must be enabled), e.g. https://searx.example.org",
        old=("PAPAYU_SEARXNG_URL",),
    ),
    Setting("papayu.online.model", "", "model for summaries (empty: the plan's)"),
    Setting("papayu.online.maxSources", "5", "search results, 1..20"),
    Setting("papayu.online.maxPages", "4", "pages fetched, 1..10"),
    Setting("papayu.online.pageMaxBytes", "200000", "a larger page is refused (read as a stream, stopped at the cap)"),
    Setting(
        "papayu.online.timeoutSec",
        "20",
        "seconds one search or one page fetch may take in all (connecting, redirects and a page that arrives "
        "slowly included)",
    ),
    Setting(
        "papayu.online.deadlineSec",
        "60",
        "seconds the search and the page fetches of one research may take together (the summary is the "
        "model's call, under its own timeout)",
    ),
    Setting(
        "papayu.online.allowHosts",
        "",
        "comma-separated host[:port] exempt from the private-address block only (intranet docs)",
    ),
]

SECTIONS: list[Section] = [
    Section("papayu.logs.", "a log file agent mode's read_logs may read, by source name: `papayu.logs.<source> PATH`"),
    Section(
        "papayu.llm.providerPrice.",
        "PROMPT,COMPLETION in USD per million tokens for one provider: `papayu.llm.providerPrice.<provider>`",
        old=("papayu.llm.price.",),
    ),
    Section("papayu.project.", "overrides a key of .papa-yu/project.json (Engineering memory, below)"),
    Section("papayu.user.", "overrides a key of your preferences file (Engineering memory, below)"),
]

_BY_NAME = {s.name: s for s in SETTINGS}
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


class Origin(StrEnum):
    """Where a setting's value came from (the check command adds its own: check/command.py)."""

    FLAG = "flag"
    ENV = "environment"
    GIT_CONFIG = "git config"
    DEFAULT = "default"


class Resolved(NamedTuple):
    value: str
    source: str  # as the user would name it: --check, PAPAYU_CHECK_COMMAND, git config papayu.check.command, default
    origin: Origin


# --- notices: said once per process per name, by whoever installed a sink (the CLI: output) ---

_notice_lock = threading.Lock()
_noticed: set[str] = set()
_pending: list[str] = []
_sink: Callable[[str], None] | None = None


def notice(name: str, text: str) -> None:
    """Say ``text`` about ``name`` once in this process: to the sink, or kept until one is installed."""
    with _notice_lock:
        if name in _noticed:
            return
        _noticed.add(name)
        sink = _sink
        if sink is None:
            _pending.append(text)
    if sink is not None:
        sink(text)


def notices_to(sink: Callable[[str], None] | None) -> None:
    """Send notices to ``sink`` from now on, the ones kept so far first (None: keep them again)."""
    global _sink
    with _notice_lock:
        _sink = sink
        kept = list(_pending) if sink is not None else []
        if kept:
            _pending.clear()
    if sink is not None:
        for text in kept:
            sink(text)


def forget_notices() -> None:
    """Tests: every name may be said again."""
    with _notice_lock:
        _noticed.clear()
        _pending.clear()


def _said_old(old: str, new: str, winner: str) -> None:
    if winner == old:
        notice(old, f"{old} is deprecated: use {new} (it was read this time)")
    else:
        notice(old, f"{old} is deprecated and ignored: {winner} is set and wins (use {new})")


# --- git config ---------------------------------------------------------------------------


class _ConfigRead(NamedTuple):
    values: dict[str, str]  # by key, lower-cased
    keys: tuple[str, ...]  # as git prints them: a subsection (`filter.<name>.smudge`) keeps its case
    at: float  # time.monotonic() of the read


@lru_cache(maxsize=8)
def _git_config(cwd: str) -> _ConfigRead:
    at = time.monotonic()
    try:
        out = run_git(["config", "-z", "--list"], cwd=cwd, check=False).stdout
    except OSError:
        return _ConfigRead({}, (), at)
    values: dict[str, str] = {}
    keys = []
    for item in out.split("\0"):
        if item:
            key, _, value = item.partition("\n")
            values[key.lower()] = value
            keys.append(key)
    _say_unknown(values)
    return _ConfigRead(values, tuple(keys), at)


def forget_cached_config() -> None:
    """Read git config afresh on the next lookup: a long-running process (the MCP server) must see
    the operator's changes, above all one that takes a permission back."""
    _git_config.cache_clear()


def _config_key(cwd: str) -> str:
    """One `git config --list` per repository: `repo/`, `repo` and `repo/.git` share it."""
    path = cwd.rstrip("/") or "/"
    return os.path.dirname(path) if os.path.basename(path) == ".git" else path


def _config(cwd: str | None) -> dict[str, str]:
    return _git_config(_config_key(cwd or os.getcwd())).values


def git_config_keys(prefix: str, cwd: str | None = None, *, within: float) -> list[str]:
    """The `git config` keys, as git prints them, whose lower-cased form starts with ``prefix``
    (e.g. "filter."), from a read at most ``within`` seconds old: the one this process made when
    it started, or a new one when that is older (a landing after a check that took minutes)."""
    key = _config_key(cwd or os.getcwd())
    read = _git_config(key)
    if time.monotonic() - read.at > within:
        _git_config.cache_clear()
        read = _git_config(key)
    prefix = prefix.lower()
    return [name for name in read.keys if name.lower().startswith(prefix)]


def git_config_value(key: str, cwd: str | None = None) -> str | None:
    return _config(cwd).get(key.lower())


def git_config_items(prefix: str, cwd: str | None = None) -> dict[str, str]:
    """Every `git config` value whose (lower-cased) key starts with ``prefix``, e.g. "papayu.logs."."""
    prefix = prefix.lower()
    return {k[len(prefix) :]: v for k, v in _config(cwd).items() if k.startswith(prefix)}


def section_items(prefix: str, cwd: str | None = None) -> dict[str, str]:
    """The keys of the section ``prefix`` (SECTIONS) with their values, its old prefixes' too: a key
    set under both names takes the new one's value; each old one is said."""
    section = next(s for s in SECTIONS if s.prefix == prefix)
    found = git_config_items(prefix, cwd)
    for old in section.old:
        for name, value in git_config_items(old, cwd).items():
            winner = old + name if name not in found else prefix + name
            _said_old(old + name, prefix + name, winner)
            found.setdefault(name, value)
    return found


def _known_keys() -> dict[str, str]:
    """Every papayu key git config may hold, lower-cased, with the name to suggest for it."""
    known = {}
    for setting in SETTINGS:
        if setting.git:
            known[setting.key.lower()] = setting.key
        known.update({old.lower(): setting.key for old in setting.old_keys})
    return known


def _say_unknown(values: dict[str, str]) -> None:
    """A `papayu.*` key no setting or section has is said, with the nearest real key: a misspelt
    `papayu.check.comand` must not pass for "not set"."""
    known = _known_keys()
    prefixes = tuple(p.lower() for s in SECTIONS for p in (s.prefix, *s.old))
    for key in values:
        if not key.startswith(PREFIX) or key in known or key.startswith(prefixes):
            continue
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
        hint = f"; did you mean {known[close[0]]}?" if close else " (docs/REFERENCE.md lists them)"
        notice(key, f"git config {key} is not a papayu setting and is ignored{hint}")


# --- lookups ------------------------------------------------------------------------------


def by_name(name: str) -> Setting:
    return _BY_NAME[name]


def resolve(name: str, cwd: str | None = None, *, flag: str | None = None, flag_name: str = "") -> Resolved:
    """The value of setting ``name`` and where it came from: ``flag`` (the caller's command-line
    value, named ``flag_name``) when given, else the environment, else git config, else the
    default; in the environment and in git config the current name before the old ones."""
    setting = _BY_NAME[name]
    if flag is not None:
        return Resolved(flag, flag_name or "flag", Origin.FLAG)
    found: Resolved | None = None
    winner = ""
    layers = (
        (Origin.ENV, (setting.env, *setting.old_envs), setting.env),
        (Origin.GIT_CONFIG, (setting.key, *setting.old_keys) if setting.git else (), setting.key),
    )
    for origin, names, current in layers:
        for n in names:
            value = os.environ.get(n) if origin is Origin.ENV else git_config_value(n, cwd)
            if value is None:
                continue
            if found is None:
                found = Resolved(value, n if origin is Origin.ENV else f"git config {n}", origin)
                winner = n
            if n != current:
                _said_old(n, current, winner)
    return found or Resolved(setting.default, "default", Origin.DEFAULT)


def get(name: str, cwd: str | None = None) -> str:
    return resolve(name, cwd).value


def get_bool(name: str, cwd: str | None = None) -> bool:
    return get(name, cwd).strip().lower() in TRUE_WORDS


def get_int(name: str, cwd: str | None = None) -> int:
    raw = get(name, cwd)
    try:
        return int(raw)
    except ValueError:
        return int(_BY_NAME[name].default)
