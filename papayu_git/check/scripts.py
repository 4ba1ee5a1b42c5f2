"""What a check command runs, read through the package scripts it names, on the tip's tree
(docs/DESIGN.md, "What the check runs").

`npm test` is not a test runner: it runs the `test` script of package.json, which may run
`vitest run`, another script (`npm run test:unit`), every workspace package's script (`pnpm -r
test`), or a chain of them behind `cross-env` or variables. papayu reads those scripts as the
shell and npm, pnpm and yarn would, down to the commands that really run (the *leaves*: a
program and its arguments, with the directory it runs in), so that the runner at the end gets
its reporter. Everything is read from the tree the check command was resolved on, the tip's
(command.py): a plan cannot choose how its check's results are read.

Followed: `&&`/`||`/`;`/`|` chains, `cd DIR`, variable assignments, `env`, `cross-env`,
`cross-env-shell`, `dotenv --`, `sh -c`, `npx`/`npm exec`/`pnpm exec`/`pnpm dlx`/`yarn exec`,
`c8`/`nyc`, `npm test|start|run X` (with `--prefix`, `-w`, `--workspaces`), `pnpm X|run X`
(with `-r`, `--filter`, `-C`), `yarn X|run X|workspace W X|workspaces run X|workspaces foreach
run X` (with `--cwd`), `npm-run-all`/`run-s`/`run-p` patterns, `concurrently` commands, pre- and
post-scripts. Workspaces come from pnpm-workspace.yaml or package.json `workspaces`. What cannot
be followed (a missing script, a script too deep, quoting the shell would reject) is said in
``notes``; a filter papayu cannot evaluate counts every package (more leaves than run is
harmless: they only allow a reader, never require one).
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Protocol


class Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...
    def names_in(self, directory: str) -> list[str]: ...


MAX_DEPTH = 12  # scripts calling scripts
MAX_LEAVES = 200
MAX_PACKAGES = 200
MAX_GLOB_DEPTH = 6  # `**` in a workspace pattern

_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATOR = re.compile(r"[;&|()]+")
_REDIRECT = re.compile(r"[0-9]*[<>&|]*[<>][<>&|]*")
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


@dataclass(frozen=True)
class Leaf:
    """A command that runs: its words after variables and wrappers, the directory it runs in
    (from the root, "" the root itself), and the scripts it was reached through."""

    words: tuple[str, ...]
    where: str = ""
    via: tuple[str, ...] = ()  # () the check command's own text; else ("npm test", "packages/a: test", ...)
    node_options_replaced: bool = False  # a `NODE_OPTIONS=...` on the way dropped the variable's value

    @property
    def program(self) -> str:
        return posixpath.basename(self.words[0]) if self.words else ""

    def said(self) -> str:
        """`vitest run` (packages/a, through `npm test`)."""
        text = shlex.join(self.words)
        where = self.where or "."
        return f"`{text}` ({where}{', through `' + self.via[0] + '`' if self.via else ''})"


@dataclass(frozen=True)
class Runs:
    leaves: tuple[Leaf, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be followed, for the verdict and doctor
    scripts: bool = False  # the command runs package scripts (its runners are read from them)


@dataclass
class _State:
    where: str = ""
    via: tuple[str, ...] = ()
    depth: int = 0
    node_options_replaced: bool = False


@dataclass
class _Walk:
    tree: Tree | None
    leaves: list[Leaf] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scripts: bool = False
    seen: set[tuple[str, str]] = field(default_factory=set)


def resolve(command: str, tree: Tree | None) -> Runs:
    """The leaves ``command`` runs on ``tree`` (None: no tree, the command's text alone)."""
    walk = _Walk(tree)
    _command(walk, command, _State())
    return Runs(tuple(walk.leaves), tuple(dict.fromkeys(walk.notes)), walk.scripts)


def split_commands(text: str) -> list[list[str]] | None:
    """The simple commands of a shell line, their words unquoted; None when it does not parse."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[list[str]] = []
    current: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif _REDIRECT.fullmatch(token) and not _SEPARATOR.fullmatch(token):
            if current and current[-1].isdigit():
                current.pop()  # `2>&1`: the descriptor is no argument
            skip = True  # the file or descriptor it names
        elif _SEPARATOR.fullmatch(token):
            if current:
                out.append(current)
            current = []
        else:
            current.append(token)
    if current:
        out.append(current)
    return out


def _command(walk: _Walk, text: str, state: _State) -> None:
    if state.depth > MAX_DEPTH:
        walk.notes.append(f"scripts nested deeper than {MAX_DEPTH} at {state.via[-1] if state.via else text!r}")
        return
    commands = split_commands(text)
    if commands is None:
        walk.notes.append(f"`{text}` does not parse as a shell command line")
        return
    for words in commands:
        if words[0] == "cd" and len(words) <= 2:
            state = replace(state, where=_cd(state.where, words[1] if len(words) > 1 else ""))
            continue
        _simple(walk, words, state)


def _cd(where: str, target: str) -> str:
    if not target or target.startswith(("/", "~", "$")):
        return where  # home or absolute: outside what papayu reads; the leaf stays where it was
    joined = posixpath.normpath(posixpath.join(where or ".", target))
    return "" if joined == "." else joined


def _simple(walk: _Walk, words: list[str], state: _State) -> None:
    while words and _ASSIGN.match(words[0]):
        state = _assigned(state, words[0])
        words = words[1:]
    if not words:
        return
    handler = _HANDLERS.get(posixpath.basename(words[0]))
    if handler is not None:
        handler(walk, words, state)
    else:
        _leaf(walk, words, state)


def _assigned(state: _State, assignment: str) -> _State:
    """A `NODE_OPTIONS=...` that does not keep the variable's value drops papayu's hook (runners.py)."""
    name, _, value = assignment.partition("=")
    if name == "NODE_OPTIONS" and "$NODE_OPTIONS" not in value and "${NODE_OPTIONS}" not in value:
        return replace(state, node_options_replaced=True)
    return state


def _leaf(walk: _Walk, words: list[str], state: _State) -> None:
    if len(walk.leaves) < MAX_LEAVES:
        walk.leaves.append(Leaf(tuple(words), state.where, state.via, state.node_options_replaced))


# --- wrappers ------------------------------------------------------------------------------------


def _wrapper(walk: _Walk, words: list[str], state: _State) -> None:
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
    _simple(walk, rest, state)


def _cross_env_shell(walk: _Walk, words: list[str], state: _State) -> None:
    rest = words[1:]
    while rest and _ASSIGN.match(rest[0]):
        state = _assigned(state, rest[0])
        rest = rest[1:]
    _command(walk, " ".join(rest), replace(state, depth=state.depth + 1))


def _shell(walk: _Walk, words: list[str], state: _State) -> None:
    if "-c" in words[1:] and words.index("-c") + 1 < len(words):
        _command(walk, words[words.index("-c") + 1], replace(state, depth=state.depth + 1))
    else:
        _leaf(walk, words, state)


def _skip_flags(words: list[str], value_flags: set[str]) -> list[str]:
    """``words`` after the leading flags (and the values of ``value_flags``) and a `--`."""
    rest = list(words)
    while rest and rest[0].startswith("-"):
        if rest[0] == "--":
            return rest[1:]
        rest = rest[2:] if rest[0] in value_flags else rest[1:]
    return rest


def _npx(walk: _Walk, words: list[str], state: _State) -> None:
    if "-c" in words[1:] and words.index("-c") + 1 < len(words):
        _command(walk, words[words.index("-c") + 1], replace(state, depth=state.depth + 1))
        return
    _simple(walk, _skip_flags(words[1:], _NPX_VALUE_FLAGS), state)


def _coverage(walk: _Walk, words: list[str], state: _State) -> None:
    _simple(walk, _skip_flags(words[1:], _COVERAGE_VALUE_FLAGS), state)


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


def _npm(walk: _Walk, words: list[str], state: _State) -> None:
    call = _parse(words[1:], _NPM_VALUE_FLAGS, stop_at_first=False)
    if not call.rest:
        return
    where = _prefix(state.where, call.flags.get("--prefix"))
    sub, args = call.rest[0], call.rest[1:]
    if sub in ("exec", "x"):
        _simple(walk, _skip_flags(args, _NPX_VALUE_FLAGS), replace(state, where=where))
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


def _npm_dirs(walk: _Walk, where: str, flags: dict[str, list[str]]) -> list[str]:
    selected = flags.get("-w", []) + flags.get("--workspace", [])
    everything = "-ws" in flags or "--workspaces" in flags
    if not selected and not everything:
        return [where]
    packages = _workspace_packages(walk, where)
    dirs = list(packages) if everything else [d for d, name in packages.items() if _selects(selected, d, name, where)]
    if "--include-workspace-root" in flags:
        dirs.insert(0, _workspace_root(walk, where))
    return dirs


def _pnpm(walk: _Walk, words: list[str], state: _State) -> None:
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
        _simple(walk, _skip_flags(args, set()), replace(state, where=where))
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
        where, recursive = _workspace_root(walk, where), False
    dirs = _pnpm_dirs(walk, where, call.flags) if recursive else [where]
    if not named and not recursive and not _any_script(walk, sub, dirs):
        _simple(walk, [sub, *args], replace(state, where=where))  # `pnpm vitest run`: not a script, a program
        return
    _scripts(walk, sub, dirs, args, replace(state, where=where), " ".join(words), "--if-present" in call.flags)


def _pnpm_dirs(walk: _Walk, where: str, flags: dict[str, list[str]]) -> list[str]:
    packages = _workspace_packages(walk, where)
    selectors = flags.get("--filter", []) + flags.get("-F", [])
    dirs = [d for d, name in packages.items() if not selectors or _selects(selectors, d, name, where)]
    if "--include-workspace-root" in flags:
        dirs.insert(0, _workspace_root(walk, where))
    return dirs


def _yarn(walk: _Walk, words: list[str], state: _State) -> None:
    call = _parse(words[1:], {"--cwd"}, stop_at_first=True)
    where = _prefix(state.where, call.flags.get("--cwd"))
    rest = call.rest
    if not rest:
        return  # `yarn` alone installs
    label = " ".join(words)
    sub, args = rest[0], rest[1:]
    if sub in ("exec", "dlx", "node"):
        _simple(walk, args if sub != "node" else ["node", *args], replace(state, where=where))
    elif sub == "workspace" and len(args) >= 2:
        packages = _workspace_packages(walk, where)
        dirs = [d for d, name in packages.items() if name == args[0]] or list(packages)
        _yarn_script(walk, args[1:], dirs, replace(state, where=where), label)
    elif sub == "workspaces" and args[:1] in (["run"], ["foreach"]):
        rest = _skip_flags(args[1:], {"--include", "--exclude", "--from", "--since", "-j", "--jobs"})
        _yarn_script(walk, rest, list(_workspace_packages(walk, where)), replace(state, where=where), label)
    elif sub not in _YARN_COMMANDS:
        _yarn_script(walk, rest, [where], replace(state, where=where), label)


def _yarn_script(walk: _Walk, rest: list[str], dirs: list[str], state: _State, label: str) -> None:
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
            _simple(walk, rest, replace(state, where=where))


def _run_all(walk: _Walk, words: list[str], state: _State) -> None:
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
    scripts = _scripts_of(walk, state.where) or {}
    label = " ".join(words)
    for pattern in names:
        matched = [s for s in scripts if _script_glob(pattern.split(" ")[0], s)] if "*" in pattern else [pattern]
        for name in matched:
            _scripts(walk, name, [state.where], [], state, label, False)


def _script_glob(pattern: str, name: str) -> bool:
    """npm-run-all's patterns: `*` stays within a `:` segment, `**` does not."""
    regex = re.escape(pattern).replace(r"\*\*", ".+").replace(r"\*", "[^:]+")
    return re.fullmatch(regex, name) is not None


def _concurrently(walk: _Walk, words: list[str], state: _State) -> None:
    rest = words[1:]
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("-"):
            index += 2 if word in _CONCURRENTLY_VALUE_FLAGS else 1
            continue
        manager, colon, script = word.partition(":")
        deeper = replace(state, depth=state.depth + 1)
        if colon and manager in ("npm", "pnpm", "yarn", "bun") and " " not in manager:
            _command(walk, f"{manager} run {shlex.quote(script)}", deeper)
        else:
            _command(walk, word, deeper)
        index += 1


# --- scripts and workspaces ----------------------------------------------------------------------


def _scripts(
    walk: _Walk, name: str, dirs: list[str], args: list[str], state: _State, label: str, if_present: bool
) -> None:
    """Script ``name`` (with its pre- and post-script) in each of ``dirs``."""
    walk.scripts = True
    if walk.tree is None:
        walk.notes.append(f"`{label}` runs package scripts papayu did not read (no tree to read them on)")
        return
    for where in dirs[:MAX_PACKAGES]:
        scripts = _scripts_of(walk, where)
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
            _command(walk, text, replace(state, where=where, via=via, depth=state.depth + 1))


def _any_script(walk: _Walk, name: str, dirs: list[str]) -> bool:
    return any(name in (_scripts_of(walk, d) or {}) for d in dirs)


def _scripts_of(walk: _Walk, where: str) -> dict[str, Any] | None:
    manifest = _manifest(walk, where)
    scripts = manifest.get("scripts") if manifest is not None else None
    return scripts if isinstance(scripts, dict) else None


def _manifest(walk: _Walk, where: str) -> dict[str, Any] | None:
    if walk.tree is None:
        return None
    raw = walk.tree.read_blob(posixpath.join(where, "package.json") if where else "package.json")
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _prefix(where: str, given: list[str] | None) -> str:
    return _cd(where, given[-1]) if given else where


def _workspace_root(walk: _Walk, where: str) -> str:
    """The nearest directory at or above ``where`` that declares workspaces (else the root)."""
    here = where
    while True:
        if _workspace_patterns(walk, here) is not None:
            return here
        if not here:
            return ""
        here = posixpath.dirname(here)


def _workspace_patterns(walk: _Walk, where: str) -> list[str] | None:
    if walk.tree is None:
        return None
    raw = walk.tree.read_blob(posixpath.join(where, "pnpm-workspace.yaml") if where else "pnpm-workspace.yaml")
    if raw is not None:
        return _yaml_packages(raw.decode("utf-8", "replace"))
    manifest = _manifest(walk, where) or {}
    patterns = manifest.get("workspaces")
    if isinstance(patterns, dict):
        patterns = patterns.get("packages")
    return [p for p in patterns if isinstance(p, str)] if isinstance(patterns, list) else None


def _yaml_packages(text: str) -> list[str]:
    """The `packages:` list of a pnpm-workspace.yaml (a block list of strings, or a flow list)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.split(" #", 1)[0].rstrip()
        if re.match(r"packages\s*:", stripped):
            flow = stripped.split(":", 1)[1].strip()
            if flow.startswith("["):
                return [p.strip().strip("'\"") for p in flow.strip("[]").split(",") if p.strip()]
            inside = True
        elif inside and re.match(r"\s+-\s*", stripped):
            out.append(re.sub(r"^\s+-\s*", "", stripped).strip().strip("'\""))
        elif inside and stripped and not stripped.startswith(" "):
            inside = False
    return out


def _workspace_packages(walk: _Walk, where: str) -> dict[str, str]:
    """Directory -> package name of every workspace package (the root's own package not included)."""
    root = _workspace_root(walk, where)
    patterns = _workspace_patterns(walk, root) or []
    keep = [p for p in patterns if not p.startswith("!")]
    drop = [p[1:] for p in patterns if p.startswith("!")]
    found: dict[str, str] = {}
    for pattern in keep:
        parts = [s for s in pattern.strip("/").split("/") if s and s != "."]
        if ".." in parts:
            continue  # a package outside the workspace's directory: not followed
        for rel in _expand(walk, root, parts, 0):
            path = posixpath.normpath(posixpath.join(root, rel)) if root else rel
            if path in found or path == root or any(fnmatch.fnmatchcase(rel, d.strip("/")) for d in drop):
                continue
            manifest = _manifest(walk, path)
            if manifest is not None:
                found[path] = str(manifest.get("name") or "")
            if len(found) >= MAX_PACKAGES:
                return found
    return found


def _expand(walk: _Walk, base: str, parts: list[str], depth: int) -> list[str]:
    assert walk.tree is not None
    if not parts:
        return [""]
    head, rest = parts[0], parts[1:]
    out: list[str] = []
    names = sorted(walk.tree.names_in(base))
    dirs = [n for n in names if walk.tree.entry_kind(posixpath.join(base, n) if base else n) == "dir"]
    if head == "**":
        out += _expand(walk, base, rest, depth)
        if depth < MAX_GLOB_DEPTH:
            for name in dirs:
                if name != "node_modules" and not name.startswith("."):
                    deeper = _expand(walk, posixpath.join(base, name) if base else name, parts, depth + 1)
                    out += [posixpath.join(name, r) if r else name for r in deeper]
        return out
    for name in dirs:
        if fnmatch.fnmatchcase(name, head) and name != "node_modules":
            deeper = _expand(walk, posixpath.join(base, name) if base else name, rest, depth + 1)
            out += [posixpath.join(name, r) if r else name for r in deeper]
    return out


def _selects(selectors: list[str], directory: str, name: str, where: str) -> bool:
    """Whether a pnpm `--filter` or npm `-w` selects the package (what papayu cannot evaluate,
    such as `[origin/main]` or `...^`, selects every package)."""
    for raw in selectors:
        selector = raw.lstrip("!").replace("...", "").strip("^{}")
        if not selector or selector.startswith("["):
            return True
        if selector.startswith((".", "/")) or ("/" in selector and not selector.startswith("@")):
            path = posixpath.normpath(posixpath.join(where or ".", selector.lstrip("/")))
            if fnmatch.fnmatchcase(directory, path):
                return True
        elif fnmatch.fnmatchcase(name, selector):
            return True
    return False


_HANDLERS = {
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
