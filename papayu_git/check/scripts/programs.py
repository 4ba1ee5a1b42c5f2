"""The programs that run others: wrappers (`env`, `cross-env`, `npx`, `sh -c`, `c8`), the package
managers (npm, pnpm, yarn) with their scripts and workspaces, `npm-run-all` and `concurrently`."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, replace

from papayu_git.check.scripts.packages import MAX_PACKAGES, scripts_of, selects, workspace_packages, workspace_root
from papayu_git.check.scripts.walk import ASSIGN, Handler, State, Walk, assigned, cd

_WRAPPERS = {"time", "nohup", "exec", "command", "builtin"}
_SHELLS = {"sh", "bash", "dash", "zsh"}
_NPX = {"npx", "pnpx", "bunx"}
_COVERAGE = {"c8", "nyc"}
_COVERAGE_VALUE_FLAGS = {"-r", "--reporter", "-x", "--exclude", "-n", "--include", "-o", "--report-dir", "--temp-dir"}
_NPX_VALUE_FLAGS = {"-p", "--package", "-w", "--workspace", "--prefix"}
_NPM_VALUE_FLAGS = {"--prefix", "-w", "--workspace", "--loglevel", "--userconfig", "--cache", "--registry"}
_NPM_ALIASES = {"t": "test", "tst": "test", "test": "test", "start": "start", "stop": "stop", "restart": "restart"}
_NPM_RUN = {"run", "run-script", "rum", "urn"}
_PNPM_VALUE_FLAGS = {
    "--filter",
    "-F",
    "-C",
    "--dir",
    "--reporter",
    "--workspace-concurrency",
    "--resume-from",
    "--loglevel",
    "--test-pattern",
    "--changed-files-ignore-pattern",
}
_PNPM_RECURSIVE = {"-r", "--recursive"}
# pnpm's own commands: never a script of the project's (`pnpm install` installs).
_PNPM_COMMANDS = {
    "add", "i", "install", "ci", "update", "up", "remove", "rm", "link", "unlink", "import", "rebuild", "rb",
    "prune", "fetch", "patch", "patch-commit", "audit", "list", "ls", "outdated", "why", "pack", "publish",
    "root", "bin", "store", "config", "init", "setup", "env", "licenses", "deploy", "approve-builds",
}  # fmt: skip
_YARN_COMMANDS = {"add", "install", "remove", "up", "upgrade", "set", "config", "init", "pack", "npm", "info", "why"}
_CONCURRENTLY_VALUE_FLAGS = {"-n", "--names", "-c", "--prefix-colors", "-p", "--prefix", "-s", "--success"}
_CONCURRENTLY_VALUE_FLAGS |= {"-m", "--max-processes", "--restart-tries", "--restart-after", "-t", "--timestamp-format"}


# --- wrappers ------------------------------------------------------------------------------------


def _wrapper(walk: Walk, words: list[str], state: State) -> None:
    rest = words[1:]
    if words[0] in ("env", "cross-env"):
        while rest and rest[0].startswith("-") and rest[0] != "--":
            rest = rest[2:] if rest[0] in ("-u", "--unset", "-C", "--chdir") else rest[1:]
    elif words[0] == "nice":
        rest = rest[2:] if rest[:1] == ["-n"] else rest
    elif words[0] == "dotenv":
        rest = rest[rest.index("--") + 1 :] if "--" in rest else []
    if rest[:1] == ["--"]:
        rest = rest[1:]
    walk.simple(rest, state)


def _cross_env_shell(walk: Walk, words: list[str], state: State) -> None:
    rest = words[1:]
    while rest and ASSIGN.match(rest[0]):
        state = assigned(state, rest[0])
        rest = rest[1:]
    walk.command(" ".join(rest), state.deeper())


def _shell(walk: Walk, words: list[str], state: State) -> None:
    if "-c" in words[1:] and words.index("-c") + 1 < len(words):
        walk.command(words[words.index("-c") + 1], state.deeper())
    else:
        walk.leaf(words, state)


def _skip_flags(words: list[str], value_flags: set[str]) -> list[str]:
    """``words`` after the leading flags (and the values of ``value_flags``) and a `--`."""
    rest = list(words)
    while rest and rest[0].startswith("-"):
        if rest[0] == "--":
            return rest[1:]
        rest = rest[2:] if rest[0] in value_flags else rest[1:]
    return rest


def _npx(walk: Walk, words: list[str], state: State) -> None:
    if "-c" in words[1:] and words.index("-c") + 1 < len(words):
        walk.command(words[words.index("-c") + 1], state.deeper())
        return
    walk.simple(_skip_flags(words[1:], _NPX_VALUE_FLAGS), state)


def _coverage(walk: Walk, words: list[str], state: State) -> None:
    walk.simple(_skip_flags(words[1:], _COVERAGE_VALUE_FLAGS), state)


# --- package managers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """A package manager's call: the flags it read, then the rest."""

    flags: dict[str, list[str]]
    rest: list[str]


def _parse(words: list[str], value_flags: set[str], *, stop_at_first: bool) -> _Call:
    """Flags and the other words; ``stop_at_first``: flags end at the first other word (pnpm
    and yarn pass what follows a script's name to the script)."""
    flags: dict[str, list[str]] = {}
    rest: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--" or (rest and stop_at_first):
            rest += words[index:]
            break
        if word.startswith("-") and len(word) > 1:
            name, eq, value = word.partition("=")
            if not eq and name in value_flags and index + 1 < len(words):
                value, index = words[index + 1], index + 1
            flags.setdefault(name, []).append(value)
        else:
            rest.append(word)
        index += 1
    return _Call(flags, rest)


def _npm(walk: Walk, words: list[str], state: State) -> None:
    call = _parse(words[1:], _NPM_VALUE_FLAGS, stop_at_first=False)
    if not call.rest:
        return
    where = _prefix(state.where, call.flags.get("--prefix"))
    sub, args = call.rest[0], call.rest[1:]
    if sub in ("exec", "x"):
        walk.simple(_skip_flags(args, _NPX_VALUE_FLAGS), replace(state, where=where))
        return
    if sub in _NPM_RUN:
        if not args:
            return
        sub, args = args[0], args[1:]
    elif sub in _NPM_ALIASES:
        sub = _NPM_ALIASES[sub]
    else:
        return  # npm's own command (install, ci, ...): no script
    passed = args[args.index("--") + 1 :] if "--" in args else []
    dirs = _npm_dirs(walk, where, call.flags)
    _scripts(walk, sub, dirs, passed, replace(state, where=where), " ".join(words), "--if-present" in call.flags)


def _npm_dirs(walk: Walk, where: str, flags: dict[str, list[str]]) -> list[str]:
    selected = flags.get("-w", []) + flags.get("--workspace", [])
    everything = "-ws" in flags or "--workspaces" in flags
    if not selected and not everything:
        return [where]
    packages = workspace_packages(walk.tree, where)
    dirs = list(packages) if everything else [d for d, name in packages.items() if selects(selected, d, name, where)]
    if "--include-workspace-root" in flags:
        dirs.insert(0, workspace_root(walk.tree, where))
    return dirs


def _pnpm(walk: Walk, words: list[str], state: State) -> None:
    call = _parse(words[1:], _PNPM_VALUE_FLAGS, stop_at_first=True)
    rest = call.rest
    recursive = bool(_PNPM_RECURSIVE & call.flags.keys()) or "--filter" in call.flags or "-F" in call.flags
    if rest[:1] and rest[0] in ("recursive", "multi", "m"):
        recursive, rest = True, rest[1:]
    if not rest:
        return
    where = _prefix(state.where, call.flags.get("-C", []) + call.flags.get("--dir", []))
    sub, args = rest[0], rest[1:]
    if sub in ("exec", "dlx"):
        walk.simple(_skip_flags(args, set()), replace(state, where=where))
        return
    if sub in _PNPM_COMMANDS:
        return
    named = sub in ("run", "run-script") or sub in _NPM_ALIASES  # surely a script
    if sub in ("run", "run-script"):
        if not args:
            return
        sub, args = args[0], args[1:]
    sub = _NPM_ALIASES.get(sub, sub)
    if "-w" in call.flags or "--workspace-root" in call.flags:
        where, recursive = workspace_root(walk.tree, where), False
    dirs = _pnpm_dirs(walk, where, call.flags) if recursive else [where]
    if not named and not recursive and not _any_script(walk, sub, dirs):
        walk.simple([sub, *args], replace(state, where=where))  # `pnpm vitest run`: not a script, a program
        return
    _scripts(walk, sub, dirs, args, replace(state, where=where), " ".join(words), "--if-present" in call.flags)


def _pnpm_dirs(walk: Walk, where: str, flags: dict[str, list[str]]) -> list[str]:
    packages = workspace_packages(walk.tree, where)
    selectors = flags.get("--filter", []) + flags.get("-F", [])
    dirs = [d for d, name in packages.items() if not selectors or selects(selectors, d, name, where)]
    if "--include-workspace-root" in flags:
        dirs.insert(0, workspace_root(walk.tree, where))
    return dirs


def _yarn(walk: Walk, words: list[str], state: State) -> None:
    call = _parse(words[1:], {"--cwd"}, stop_at_first=True)
    where = _prefix(state.where, call.flags.get("--cwd"))
    rest = call.rest
    if not rest:
        return  # `yarn` alone installs
    label = " ".join(words)
    sub, args = rest[0], rest[1:]
    if sub in ("exec", "dlx", "node"):
        walk.simple(args if sub != "node" else ["node", *args], replace(state, where=where))
    elif sub == "workspace" and len(args) >= 2:
        packages = workspace_packages(walk.tree, where)
        dirs = [d for d, name in packages.items() if name == args[0]] or list(packages)
        _yarn_script(walk, args[1:], dirs, replace(state, where=where), label)
    elif sub == "workspaces" and args[:1] in (["run"], ["foreach"]):
        rest = _skip_flags(args[1:], {"--include", "--exclude", "--from", "--since", "-j", "--jobs"})
        _yarn_script(walk, rest, list(workspace_packages(walk.tree, where)), replace(state, where=where), label)
    elif sub not in _YARN_COMMANDS:
        _yarn_script(walk, rest, [where], replace(state, where=where), label)


def _yarn_script(walk: Walk, rest: list[str], dirs: list[str], state: State, label: str) -> None:
    named = rest[:1] == ["run"] or (bool(rest) and rest[0] in _NPM_ALIASES)
    if rest[:1] == ["run"]:
        rest = rest[1:]
    if not rest:
        return
    name = _NPM_ALIASES.get(rest[0], rest[0])
    if named or _any_script(walk, name, dirs):
        _scripts(walk, name, dirs, rest[1:], state, label, False)
    else:
        for where in dirs:
            walk.simple(rest, replace(state, where=where))


def _run_all(walk: Walk, words: list[str], state: State) -> None:
    """npm-run-all, run-s, run-p: script names or patterns (`test:*`)."""
    values = {"--npm-path", "--max-parallel", "-m"}
    names = []
    rest = words[1:]
    index = 0
    while index < len(rest):
        word = rest[index]
        if word == "--":
            break
        if word.startswith("-"):
            index += 2 if word in values else 1
            continue
        names.append(word)
        index += 1
    scripts = scripts_of(walk.tree, state.where) or {}
    label = " ".join(words)
    for pattern in names:
        matched = [s for s in scripts if _script_glob(pattern.split(" ")[0], s)] if "*" in pattern else [pattern]
        for name in matched:
            _scripts(walk, name, [state.where], [], state, label, False)


def _script_glob(pattern: str, name: str) -> bool:
    """npm-run-all's patterns: `*` stays within a `:` segment, `**` does not."""
    regex = re.escape(pattern).replace(r"\*\*", ".+").replace(r"\*", "[^:]+")
    return re.fullmatch(regex, name) is not None


def _concurrently(walk: Walk, words: list[str], state: State) -> None:
    rest = words[1:]
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("-"):
            index += 2 if word in _CONCURRENTLY_VALUE_FLAGS else 1
            continue
        manager, colon, script = word.partition(":")
        deeper = state.deeper()
        if colon and manager in ("npm", "pnpm", "yarn", "bun") and " " not in manager:
            walk.command(f"{manager} run {shlex.quote(script)}", deeper)
        else:
            walk.command(word, deeper)
        index += 1


# --- scripts ----------------------------------------------------------------------------------


def _scripts(
    walk: Walk, name: str, dirs: list[str], args: list[str], state: State, label: str, if_present: bool
) -> None:
    """Script ``name`` (with its pre- and post-script) in each of ``dirs``."""
    walk.scripts = True
    if walk.tree is None:
        walk.notes.append(f"`{label}` runs package scripts papayu did not read (no tree to read them on)")
        return
    for where in dirs[:MAX_PACKAGES]:
        scripts = scripts_of(walk.tree, where)
        if scripts is None or name not in scripts:
            if not if_present:
                place = posixpath.join(where, "package.json") if where else "package.json"
                walk.notes.append(f"{place} has no script `{name}` (`{label}`)")
            continue
        if (where, name) in walk.seen:
            continue  # a script reached twice runs the same runners (and a script calling itself stops)
        walk.seen.add((where, name))
        for part in (f"pre{name}", name, f"post{name}"):
            text = scripts.get(part)
            if not isinstance(text, str):
                continue
            if part == name and args:
                text = f"{text} {shlex.join(args)}"
            via = (*state.via, label) if not state.via else (*state.via, f"{where or '.'}: {part}")
            walk.command(text, replace(state, where=where, via=via, depth=state.depth + 1))


def _any_script(walk: Walk, name: str, dirs: list[str]) -> bool:
    return any(name in (scripts_of(walk.tree, d) or {}) for d in dirs)


def _prefix(where: str, given: list[str] | None) -> str:
    return cd(where, given[-1]) if given else where


HANDLERS: dict[str, Handler] = {
    "env": _wrapper,
    "cross-env": _wrapper,
    "nice": _wrapper,
    "dotenv": _wrapper,
    "cross-env-shell": _cross_env_shell,
    **{name: _wrapper for name in _WRAPPERS},
    **{name: _shell for name in _SHELLS},
    **{name: _npx for name in _NPX},
    **{name: _coverage for name in _COVERAGE},
    "npm": _npm,
    "pnpm": _pnpm,
    "yarn": _yarn,
    "npm-run-all": _run_all,
    "npm-run-all2": _run_all,
    "run-s": _run_all,
    "run-p": _run_all,
    "concurrently": _concurrently,
}
