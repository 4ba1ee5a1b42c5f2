"""The agent's tools (docs/DESIGN.md, "Agent mode"): strict arguments, the context rules, results as text.

Every refusal or failure is a result (`ERR_CODE: reason` + hint), never an exception: the model
reads it and tries something else. Reads follow the context rules (paths.check_path, protected
paths refused, secrets masked); list and search leave out .gitignore'd files; long results are
cut at --max-tool-output with a note saying so. Commands run only in a pooled, sandboxed checkout
of a commit of the workspace, never in the user's working tree. Every result is masked with the
values of the files that hold the repository's secrets too (check/secret_files.py): a test the model writes
can print a tracked protected file, base64-encoded or not. With papayu.agent.testOutput=names,
run_tests and run say only pass or fail and which tests failed.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import settings
from papayu_git.check import CheckCommand, CheckResult, run_check
from papayu_git.check.results import EXIT_CODE_ONLY, summary
from papayu_git.check.sandbox import resolve
from papayu_git.check.secret_files import repository_masker
from papayu_git.context import logs, search
from papayu_git.context.basetree import Blob
from papayu_git.context.files import file_block, repo_relative
from papayu_git.errors import ERROR_CODES, PapayuError, ValidationFailed
from papayu_git.housekeeping import dead_check
from papayu_git.paths import is_protected, pattern_regex
from papayu_git.secrets import mask, mask_data
from papayu_git.worktree import acquire_checkout, release_checkout

if TYPE_CHECKING:
    import pygit2

    from papayu_git.agent_workspace import Workspace
    from papayu_git.context.session import ContextSession
    from papayu_git.transaction import ApplyOptions

# JSON types of the tools' parameters (schemas/agent_tools.json, the one definition of them).
_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool}
MAX_ARGUMENT_CHARS = 4 * 1024 * 1024


@dataclass
class Step:
    turn: int
    tool: str
    arguments: Any
    ok: bool
    code: str | None
    result_chars: int
    truncated: bool
    ms: float

    def record(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "tool": self.tool,
            "arguments": _clipped(mask_data(self.arguments)),
            "ok": self.ok,
            "code": self.code,
            "result_chars": self.result_chars,
            "truncated": self.truncated,
            "ms": round(self.ms, 2),
        }


@dataclass
class Evidence:
    """What really happened, for the behaviour contract on the final message."""

    patched: bool = False
    tests_passed: bool = False
    tests_ran: bool = False
    ran: bool = False
    runs: list[dict[str, Any]] = field(default_factory=list)


class Tools:
    def __init__(
        self,
        workspace: Workspace,
        repo: pygit2.Repository,
        root: Path,
        pdir: Path,
        plan_id: str,
        options: ApplyOptions,
        max_output: int,
        definitions: list[dict[str, Any]],
    ) -> None:
        self.schemas = {d["function"]["name"]: d["function"].get("parameters") or {} for d in definitions}
        self.ws, self.repo, self.root, self.pdir, self.plan_id = workspace, repo, root, pdir, plan_id
        self.options, self.max_output = options, max_output
        self.evidence = Evidence()
        self.steps: list[Step] = []
        self._session: ContextSession | None = None
        self._check: tuple[CheckCommand | None, str] | None = None
        self._ignored: dict[str, bool] = {}
        self._mask: Callable[[str], str] | None = None
        self.output_names_only = settings.get("agent_test_output", str(root)).strip().lower() == "names"
        self.handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            "list_files": self.list_files,
            "read_file": self.read_file,
            "search_in_repo": self.search_in_repo,
            "get_env": self.get_env,
            "get_logs": self.get_logs,
            "apply_patch": self.apply_patch,
            "run_tests": self.run_tests,
            "run": self.run,
        }

    # --- dispatch -------------------------------------------------------------------------
    def call(self, turn: int, name: str, arguments: str) -> str:
        started = time.perf_counter()
        args: Any = arguments
        try:
            if name not in self.handlers or name not in self.schemas:
                raise PapayuError("ERR_AGENT_UNKNOWN_TOOL", f"no tool {name[:80]!r}")
            args = parse_arguments(name, arguments, self.schemas[name])
            text, code = self.handlers[name](args), None
        except ValidationFailed as exc:
            text, code = failure(exc.errors[0], more=len(exc.errors) - 1), exc.errors[0].code
        except PapayuError as exc:
            text, code = failure(exc), exc.code
        except OSError as exc:  # a file or process the tool needed: the model hears of it, the run goes on
            text, code = failure(PapayuError("ERR_INTERNAL", f"{type(exc).__name__}: {exc}")), "ERR_INTERNAL"
        shown, truncated = self.limit(self.mask(text))
        self.steps.append(
            Step(turn, name, args, code is None, code, len(text), truncated, (time.perf_counter() - started) * 1000)
        )
        return shown

    def mask(self, text: str) -> str:
        """``text`` masked for the model and the stored conversation, file values included (read once)."""
        if self._mask is None:
            self._mask = repository_masker(self.root)
        return self._mask(text)

    def limit(self, text: str) -> tuple[str, bool]:
        if len(text) <= self.max_output:
            return text, False
        note = f"\n...[truncated: {len(text)} characters, the first {self.max_output} shown; narrow the request]..."
        return text[: max(0, self.max_output - len(note))] + note, True

    # --- reading --------------------------------------------------------------------------
    def _path(self, raw: str) -> str:
        return repo_relative(raw, self.root, self.ws.protected)

    def _ignored_path(self, path: str) -> bool:
        if path not in self._ignored:
            try:
                self._ignored[path] = bool(self.repo.path_is_ignored(path))
            except Exception:  # pygit2 raises its own errors for odd names: treat as not ignored
                self._ignored[path] = False
        return self._ignored[path]

    def _visible(self, path: str) -> bool:
        return not is_protected(path, self.ws.protected) and not self._ignored_path(path)

    def list_files(self, args: dict[str, Any]) -> str:
        root = args.get("root", ".")
        prefix = self._path(root) if root.strip(" /.") else ""
        limit = args.get("max_results", 200)
        globs = _globs(args.get("glob", ""))
        if prefix and self.ws.kind(prefix) == "file":
            under = [prefix]
        else:
            under = [p for p in self.ws.paths() if not prefix or p.startswith(prefix + "/")]
        if not under:
            raise PapayuError("ERR_FILE_NOT_FOUND", "no files there", path=prefix, hint="list_files without root.")
        shown: list[str] = []
        more = 0
        for path in under:
            if (globs and not _matches(globs, path)) or not self._visible(path):
                continue
            if len(shown) >= limit:
                more += 1
                continue
            status = self.ws.status(path)
            shown.append(f"{path}  ({'new' if status == 'A' else 'modified'})" if status else path)
        where = prefix or "the repository root"
        head = f"{len(shown)} file(s) under {where} (protected and .gitignore'd files left out):"
        tail = f"\n...[{more} more; narrow root or glob, or raise max_results]..." if more else ""
        return head + "\n" + "\n".join(shown) + tail

    def read_file(self, args: dict[str, Any]) -> str:
        path = self._path(args["path"])
        data = self.ws.read(path)
        if data is None:
            kind = self.ws.kind(path)
            if kind == "dir":
                raise PapayuError("ERR_FILE_NOT_FOUND", "a directory", path=path, hint="Use list_files with this path.")
            if kind in ("link", "submodule"):
                raise PapayuError("ERR_FILE_NOT_FOUND", f"a {kind}, not a file", path=path, hint="Read its target.")
            deleted = " (deleted in the workspace)" if self.ws.status(path) == "D" else ""
            raise PapayuError("ERR_FILE_NOT_FOUND", f"no such file{deleted}", path=path, hint="Use list_files.")
        start, end = args.get("start_line"), args.get("end_line")
        ranges = [(start or 1, end or (start or 1) + 199)] if start or end else []
        if start and end and end < start:
            raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"end_line {end} is before start_line {start}")
        text = file_block(Blob(path, data), ranges=ranges, priority=0, requested=True, dirty=False).render()
        masked = mask(text)
        note = (
            "\n...[secret-looking values masked as ***; keep such lines out of diff context]..."
            if masked != text
            else ""
        )
        limit = args.get("max_chars", len(masked))
        if len(masked) > limit:
            cut = masked[:limit].count("\n")
            note += f"\n...[cut at {limit} characters (line ~{cut}); read on with start_line]..."
            masked = masked[:limit]
        return masked + note

    def search_in_repo(self, args: dict[str, Any]) -> str:
        query = search.SearchQuery(
            args["query"],
            args.get("glob", ""),
            args.get("case_sensitive", False),
            args.get("max_results", search.DEFAULT_MAX_RESULTS),
        )
        matches, error = search.grep(self.session().tree, query, self.ws.protected)
        if error:
            raise PapayuError("ERR_GIT_COMMAND", f"search failed: {error}")
        found = [m for m in matches if m[0] not in self.ws.overlay and self._visible(m[0])]
        found += self._search_overlay(query)
        found.sort(key=lambda m: (m[0], m[1]))
        found = found[: query.max_results]
        if not found:
            return f"no matches for {query.query!r}"
        body = "\n".join(f"{p}:{n}: {t[: search.MAX_LINE_CHARS]}" for p, n, t in found)
        return mask(f"{len(found)} match(es){' (limit reached)' if len(found) >= query.max_results else ''}:\n{body}")

    def _search_overlay(self, query: search.SearchQuery) -> list[tuple[str, int, str]]:
        globs = _globs(query.glob)
        needle = query.query if query.case_sensitive else query.query.casefold()
        out = []
        for path, data in self.ws.overlay.items():
            if data is None or b"\0" in data[:8000] or not self._visible(path):
                continue
            if globs and not _matches(globs, path):
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if needle in (line if query.case_sensitive else line.casefold()):
                    out.append((path, number, line))
        return out

    def session(self) -> ContextSession:
        if self._session is None:
            from papayu_git.context.session import ContextSession

            self._session = ContextSession(self.root, self.ws.tip)
        return self._session

    def get_env(self, args: dict[str, Any]) -> str:
        return mask(self.session().env().render())

    def get_logs(self, args: dict[str, Any]) -> str:
        sources = logs.configured_sources(self.root)
        if args.get("source", "").lower() not in sources:
            names = ", ".join(sorted(sources)) or "none (the operator sets git config papayu.logs.<source> PATH)"
            raise PapayuError(
                "ERR_AGENT_BAD_ARGUMENTS", f"no log source {args.get('source', '')[:80]!r}; configured: {names}"
            )
        last_n = args.get("last_n", logs.DEFAULT_LAST_N)
        return logs.logs_block(self.root, args["source"], last_n, self.ws.protected).render()

    # --- changing and running -------------------------------------------------------------
    def apply_patch(self, args: dict[str, Any]) -> str:
        changes = self.ws.apply_diff(args["diff"])
        self.evidence.patched = True
        lines = "\n".join(f"  {c.status} {c.path}" for c in changes)
        return f"OK: applied to the workspace ({len(changes)} file(s); nothing is committed yet):\n{lines}"

    def run_tests(self, args: dict[str, Any]) -> str:
        command, why = self.check_command()
        note = ""
        if args.get("command") and self.options.run_proposed:
            command = CheckCommand(self._in_dir(args["command"], args.get("cwd")), "the model (--run-proposed)")
        elif args.get("command") or args.get("cwd"):
            note = "(your command/cwd was not used: without --run-proposed only the project's check runs)\n"
        if command is None:
            raise PapayuError("ERR_NO_CHECK", why, hint="Finish with a final message; the operator reviews it.")
        result = self._run(command, "tests", args.get("timeout_sec"))
        self.evidence.tests_ran = True
        self.evidence.tests_passed = self.evidence.tests_passed or result.passed
        return note + _run_text("run_tests", result, self.output_names_only)

    def run(self, args: dict[str, Any]) -> str:
        if not self.options.run_proposed:
            raise PapayuError("ERR_AGENT_RUN_REFUSED", "the operator did not pass --run-proposed")
        command = CheckCommand(self._in_dir(args["command"], args.get("cwd")), "the model (--run-proposed)")
        result = self._run(command, "run", args.get("timeout_sec"))
        self.evidence.ran = self.evidence.ran or result.passed
        return _run_text("run", result, self.output_names_only)

    def _in_dir(self, command: str, cwd: str | None) -> str:
        if not cwd or not cwd.strip(" /."):
            return command
        path = self._path(cwd)
        if self.ws.kind(path) != "dir":
            raise PapayuError("ERR_FILE_NOT_FOUND", "cwd is not a directory of the workspace", path=path)
        return f"cd -- {shlex.quote(path)} && {command}"

    def check_command(self) -> tuple[CheckCommand | None, str]:
        """Resolved once, on the tip, like the transaction's (docs/DESIGN.md, "The check's trust boundary")."""
        if self._check is None:
            from papayu_git.check import resolve_command

            if self.options.no_check:
                self._check = (None, "the operator passed --no-check: no check runs")
            else:
                found = resolve_command(self.root, self.ws.base, self.options.check)
                self._check = (found, "" if found else "no check command was found for this repository")
        return self._check

    def _run(self, command: CheckCommand, what: str, timeout: int | None = None) -> CheckResult:

        sandbox = resolve(str(self.root))
        commit = self.ws.commit(self.plan_id)
        self.evidence.runs.append({"what": what, "commit": commit})
        checkout = acquire_checkout(
            self.repo,
            self.pdir,
            commit,
            plan_id=self.plan_id,
            on_stale=dead_check,
        )
        try:
            return run_check(
                command,
                checkout,
                self.pdir / "checks" / f"{self.plan_id}-agent-{len(self.evidence.runs)}.log",
                timeout_sec=min(timeout or 10**9, settings.get_int("check_timeout_sec", str(self.root))),
                sandbox=sandbox,
                repo_root=self.root,
                commit=commit,
            )
        finally:
            release_checkout(checkout)


def _run_text(tool: str, result: CheckResult, names_only: bool = False) -> str:
    if result.timed_out:
        state = "TIMED OUT"
    else:
        state = "PASSED" if result.passed else f"FAILED (exit {result.exit_code})"
    head = f"{tool}: `{result.command}` {state} in {result.duration_sec:.1f}s (sandbox: {result.sandbox})"
    if names_only:
        return mask(f"{head}\n--- tests (papayu.agent.testOutput=names: the output is not shown) ---\n{_tests(result)}")
    return mask(f"{head}\n--- output (tail) ---\n{result.tail}")


# Lines that name a failed test in runners' plain output: pytest's summary, go test, cargo, TAP.
_FAILED_LINE = re.compile(
    r"^(?:(?:FAILED|ERROR) (\S+)|\s*--- FAIL: (\S+)|test (\S+) \.\.\. FAILED|not ok \d+ (?:- )?(.+?))\s*(?:$| - )", re.M
)


def _tests(result: CheckResult) -> str:
    """Pass/fail counts and the failing tests' names: from the per-test results where the runner
    reported them, else from the lines of the tail that name a failed test."""
    tests = result.tests
    if tests is not None and not tests.exit_code_only:
        data = summary(tests)
        counts = ", ".join(f"{n} {outcome}" for outcome, n in data["counts"].items() if n)
        more = data["failing_total"] - len(data["failing"])
        failing = ", ".join(data["failing"]) + (f" and {more} more" if more else "")
        return f"{counts or 'no tests reported'}\nfailing: {failing or 'none'}"
    names = [next(g for g in m.groups() if g) for m in _FAILED_LINE.finditer(result.tail)]
    found = ", ".join(dict.fromkeys(names)) or ("none named" if not result.passed else "none")
    return f"({EXIT_CODE_ONLY}: no per-test report)\nfailing: {found}"


def failure(error: PapayuError, more: int = 0) -> str:
    hint = error.hint or ERROR_CODES.get(error.code, ("", ""))[1]
    where = f" [{error.path}]" if error.path else ""
    extra = f" (+{more} more problem(s))" if more else ""
    return mask(f"{error.code}{where}: {error.reason}{extra}\nhint: {hint}")


def parse_arguments(tool: str, raw: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments, strictly, against the tool's `parameters` (schemas/agent_tools.json):
    one JSON object, no unknown key, each value of its type and within its bounds."""
    properties: dict[str, Any] = schema.get("properties") or {}
    if not isinstance(raw, str) or len(raw) > MAX_ARGUMENT_CHARS:
        raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", "arguments must be a JSON text (at most 4 MiB)")
    try:
        data = json.loads(raw.strip() or "{}", object_pairs_hook=_unique)
    except (ValueError, RecursionError) as exc:
        raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"arguments are not valid JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"arguments must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(properties))
    if unknown:
        names = ", ".join(properties) or "no parameters"
        shown = ", ".join(repr(k[:40]) for k in unknown)
        raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"unknown parameter(s) {shown}; {tool} takes: {names}")
    for name in schema.get("required") or ():
        if data.get(name) is None:
            raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"{tool} needs {name!r}")
    for name, value in list(data.items()):
        spec = properties[name]
        kind = _TYPES.get(spec.get("type", ""), object)
        if value is None:
            del data[name]
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"{name!r} must be a {spec.get('type')}")
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"{name!r} must be between {low} and {high}")
        if isinstance(value, str) and name in (schema.get("required") or ()) and not value.strip():
            raise PapayuError("ERR_AGENT_BAD_ARGUMENTS", f"{name!r} must not be empty")
    return data


def _globs(glob: str) -> list[re.Pattern[str]]:
    return [re.compile(pattern_regex(g.lstrip("/"))) for g in search.expand_braces(glob)[:32]] if glob else []


def _matches(globs: list[re.Pattern[str]], path: str) -> bool:
    """A glob without '/' matches the base name at any depth (like search's pathspecs)."""
    key = path.casefold() + "/"
    return any(g.fullmatch(key) for g in globs)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("a key appears twice")
    return data


def _clipped(value: Any, limit: int = 4000) -> Any:
    """Step records keep arguments short (a diff can be large); the plan keeps the result."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"...[{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _clipped(v, limit) for k, v in value.items()}
    return value
