"""Code that reaches for the test runner (docs/DESIGN.md, "What judges a plan").

The regression run judges the plan's code with the tip's tests, but that code runs inside the
test process: it can register a pytest hook that turns failures into passes, rewrite the report
at exit, leave through `os._exit(0)` after printing a runner's success lines, or swap a module in
`sys.modules`. No sandbox separates a function under test from the runner calling it. So the lines
a plan adds to its code are read before its verdict is trusted, and a plan whose code names the
runner's internals, its hooks, its report or the process's own descriptors is held for a human
with those lines named. So is a new test module that does more at import than define tests
(assignments into other modules, calls at the top level): it would judge every later plan.

Python is read on its syntax tree with its strings folded (reach_python.py): a name built from
pieces is read as the name it makes. The other languages are read by their lines. And a plan
that adds or changes a file the check would load as machine code or bytecode (a native
extension, a `.pyc`, a wasm module, an archive on an import path) is held whatever its name: no
one can read what it does. The runtime shield (results/shield.py) refuses in the process what
this reading misses (docs/DESIGN.md, "The runtime shield", says where each ends).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from papayu_git.check.reach_python import code_reach, test_module_reach
from papayu_git.judges import TEST_DIRS, is_code
from papayu_git.paths import is_protected as _matches


class _Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...


class Reach(NamedTuple):
    path: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()[:120]} ({self.why})"


_REPORT = r"papayu|PYTEST_ADDOPTS|junit|xmlpath|--junit"
_FDS = r"/proc/self/|/proc/\d+/fd|/dev/fd/"
# (pattern, why) per language, on the lines a plan adds to its code.
_PYTHON = (
    (r"\b_pytest\b", "pytest's internals"),
    (r"\bpytest_\w+", "a pytest hook or plugin outside a conftest"),
    (r"\bpluggy\b|\bhookimpl\b|\bpluginmanager\b|\bhookwrapper\b", "the runner's plugin machinery"),
    (r"\b(?:os|posix)\._exit\b", "os._exit: leaves without the runner's report"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
    (
        r"\bsys\.modules\s*(?:\[[^\]]*\]\s*=(?!=)|\.(?:pop|update|setdefault|clear|__setitem__|__delitem__)\b)"
        r"|\bdel\s+sys\.modules\b",
        "sys.modules surgery",
    ),
    (r"\b(?:builtins|__builtins__)\s*(?:\.\s*\w+|\[[^\]]*\])\s*=(?!=)", "replaces a builtin"),
)
_JS = (
    (r"\bprocess\s*\.\s*(?:exit|reallyExit|abort)\b", "process.exit: leaves without the runner's report"),
    (r"\bprocess\s*\.\s*(?:on|once|addListener|prependListener)\s*\(\s*['\"](?:exit|beforeExit)", "an exit hook"),
    (r"\brequire\s*\.\s*cache\b", "the module cache"),
    (r"@jest/|\bjest-circus\b|\bvitest/(?:runner|node|suite)\b|\bnode:test/reporters\b", "the runner's internals"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_GO = (
    (r"\bos\.Exit\s*\(|\bsyscall\.Exit\s*\(", "os.Exit outside a main package"),
    (r"\btesting\.(?:MainStart|Init)\b|\bflag\.(?:Set|CommandLine\.Set)\s*\(\s*\"test\.", "the test runner"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_RUST = (
    (r"\bprocess::(?:exit|abort)\b|\blibc::_?exit\b", "process::exit outside a binary"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_BY_SUFFIX = {
    ".pyx": _PYTHON,  # .py and .pyi: their syntax tree (reach_python.py)
    ".js": _JS,
    ".mjs": _JS,
    ".cjs": _JS,
    ".jsx": _JS,
    ".ts": _JS,
    ".mts": _JS,
    ".cts": _JS,
    ".tsx": _JS,
    ".go": _GO,
    ".rs": _RUST,
}
_ATEXIT = re.compile(r"\batexit\b|\bregister_at_fork\b")
_REPORT_WORDS = re.compile(_REPORT + r"|\.xml\b|report", re.IGNORECASE)


def runner_reach(
    tip: _Tree, writes: dict[str, bytes], *, tests: Sequence[str] = (), command_files: frozenset[str] = frozenset()
) -> list[Reach]:
    """What the plan's writes (path -> new bytes, over ``tip``) add that reaches for the runner:
    in its code (judges.is_code), the lines added; in its new test modules, what they do at
    import beyond defining tests and what they rewrite of the code they test; anywhere, a file
    the check would load that no one can read."""
    found: list[Reach] = []
    for path, data in sorted(writes.items()):
        old = tip.read_blob(path)
        if old == data:
            continue
        if path.rsplit("/", 1)[-1] == ".gitattributes":
            found += conversions(path, data.decode("utf-8", "replace"), (old or b"").decode("utf-8", "replace"))
            continue
        loadable = machine_code(path, data)
        if loadable:
            found.append(Reach(path, 1, f"({len(data)} bytes)", f"{loadable} the check would load: no one can read it"))
            continue
        text = source_text(path, data)
        declared = source_encoding(path, data)
        if declared not in ("utf-8", source_encoding(path, old or b"")):
            found.append(
                Reach(path, 1, f"(coding: {declared})", "a source encoding that shows reviewers other text than runs")
            )
        if is_code(path, tip, tests=tests, command_files=command_files):
            found += _added_reach(path, text, source_text(path, old or b""))
        elif old is None and tip.entry_kind(path) is None and _is_test_module(path, tests):
            found += _new_test_module(path, text, tip)
    return found


def source_encoding(path: str, data: bytes) -> str:
    """The encoding the interpreter reads ``data`` in: a Python file's coding declaration (or
    its BOM), else UTF-8."""
    if path.endswith((".py", ".pyi", ".pyw")):
        import io
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return "utf-8" if encoding == "utf-8-sig" else encoding
        except SyntaxError:
            pass
    return "utf-8"


def source_text(path: str, data: bytes) -> str:
    """The text the interpreter reads from ``data`` (source_encoding: a UTF-7 comment hides a
    statement from any reader of the bytes as UTF-8)."""
    try:
        return data.decode(source_encoding(path, data), "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


# git attributes that change the bytes a checkout writes (docs/DESIGN.md, "Landing").
# (`filter` is not one: no filter driver runs on a plan's files, at the check or the landing.)
CONVERSION_ATTRIBUTES = frozenset(["text", "eol", "crlf", "working-tree-encoding", "ident", "binary"])


def conversions(path: str, text: str, old: str) -> list[Reach]:
    """The lines a `.gitattributes` gains or loses that set conversion attributes (directly or
    through a macro it defines): the regression run checks the files as the tip converts them,
    and the work tree would get them converted otherwise. `linguist-*`, `export-ignore`, `diff`
    and the like change no byte and pass, and so does unsetting a conversion (`-text`, `binary`):
    a checkout then writes the blob's own bytes."""
    macros = {
        words[0][len("[attr]") :]
        for line in (*text.splitlines(), *old.splitlines())
        if (words := line.split()) and words[0].startswith("[attr]") and _converts(words[1:], set())
    }
    lines = [line if not line.lstrip().startswith("#") else "" for line in text.splitlines()]
    previous = [line if not line.lstrip().startswith("#") else "" for line in old.splitlines()]
    added = _added_lines(lines, previous)
    gone = _added_lines(previous, lines)
    found = [
        Reach(path, n, lines[n - 1], "changes how git converts files at checkout: the bytes landed would differ")
        for n in sorted(added)
        if _converts(lines[n - 1].split()[1:], macros) or _converts(lines[n - 1].split(), macros, macro=True)
    ]
    found += [
        Reach(path, 0, f"(removed) {previous[n - 1]}", "changes how git converts files at checkout")
        for n in sorted(gone)
        if _converts(previous[n - 1].split()[1:], macros) or _converts(previous[n - 1].split(), macros, macro=True)
    ]
    return found


def _converts(attributes: list[str], macros: set[str], macro: bool = False) -> bool:
    if macro:  # a macro's definition: `[attr]name attrs...`
        return bool(attributes) and attributes[0].startswith("[attr]") and _converts(attributes[1:], macros)
    if attributes[:1] and attributes[0].startswith("#"):
        return False
    for attribute in attributes:
        if attribute == "binary" or (attribute.startswith("-") and attribute[1:] in CONVERSION_ATTRIBUTES):
            continue  # unset (`-text`, `binary`): the blob's own bytes, which the check ran
        name = attribute.lstrip("-!").split("=", 1)[0]
        if name in CONVERSION_ATTRIBUTES or name in macros:
            return True
    return False


# What the check would load and run without reading it as source: by content, whatever the name.
_MAGIC = (
    (b"\x7fELF", "a native library or program"),
    (b"\xcf\xfa\xed\xfe", "a native library or program"),
    (b"\xce\xfa\xed\xfe", "a native library or program"),
    (b"\xca\xfe\xba\xbe", "a native library, program or Java class"),
    (b"\x00asm", "a WebAssembly module"),
)
_LOADABLE_SUFFIXES = {
    ".so": "a native extension", ".pyd": "a native extension", ".dll": "a native library",
    ".dylib": "a native library", ".node": "a native addon", ".pyc": "Python bytecode", ".pyo": "Python bytecode",
    ".wasm": "a WebAssembly module", ".class": "a Java class", ".jar": "an archive of code",
    ".egg": "an archive of code", ".whl": "an archive of code", ".pyz": "an archive of code",
}  # fmt: skip


def machine_code(path: str, data: bytes) -> str:
    """What ``data`` is when it is code no one reads (a native library, bytecode, an archive of
    modules): by its name or its first bytes; "" for source, text and data files."""
    name = path.rsplit("/", 1)[-1].casefold()
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in _LOADABLE_SUFFIXES:
        return _LOADABLE_SUFFIXES[suffix]
    if ".so." in name:  # libx.so.1
        return "a native library"
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    if data.startswith(b"MZ") and b"PE\0\0" in data[:1024]:
        return "a native library or program"
    if len(data) > 16 and data[2:4] == b"\r\n" and data[4:8] in (b"\0\0\0\0", b"\x01\0\0\0", b"\x03\0\0\0"):
        return "Python bytecode"
    return ""


def _added_reach(path: str, text: str, old: str) -> list[Reach]:
    suffix = path[path.rfind(".") :].casefold() if "." in path else ""
    lines = text.splitlines()
    added = _added_lines(lines, old.splitlines())
    exempt = _exempt_entry_point(path, text, suffix)
    found: list[Reach] = []
    if suffix in (".py", ".pyi"):
        found += [
            Reach(path, f.line, _line(lines, f.line), f.why)
            for f in code_reach(text, added.__contains__)
            if not (exempt and "exit" in f.why)
        ]
    else:
        patterns = _BY_SUFFIX.get(suffix, ())
        if exempt:
            patterns = tuple(p for p in patterns if "exit" not in p[1])
        for number in sorted(added):
            why = next((why for pattern, why in patterns if re.search(pattern, lines[number - 1])), None)
            if why is not None:
                found.append(Reach(path, number, lines[number - 1], why))
    if (suffix in (".py", ".pyi") or _BY_SUFFIX.get(suffix)) and _REPORT_WORDS.search(text):
        found += [
            Reach(path, n, lines[n - 1], "an exit hook in a file that names a report")
            for n in sorted(added)
            if _ATEXIT.search(lines[n - 1])
        ]
    return _unique(found)


def _added_lines(lines: list[str], old: list[str]) -> set[int]:
    """The numbers of the lines the tip did not have (as many times)."""
    before = Counter(old)
    added = set()
    for number, line in enumerate(lines, 1):
        if before[line] > 0:
            before[line] -= 1
        else:
            added.add(number)
    return added


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _exempt_entry_point(path: str, text: str, suffix: str) -> bool:
    """A program's own entry point may exit: Go's package main, Rust's binaries, `__main__.py`."""
    name = path.rsplit("/", 1)[-1]
    if suffix == ".go":
        return re.search(r"(?m)^package\s+main\b", text) is not None
    if suffix == ".rs":
        return name == "main.rs" or "/bin/" in f"/{path}"
    return name == "__main__.py"


def _is_test_module(path: str, tests: Sequence[str]) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if tests and _matches(path, tests):
        return True
    return (
        name.startswith("test_")
        or name.endswith(("_test.py", "_test.go"))
        or ".test." in name
        or ".spec." in name
        or any(part in TEST_DIRS for part in parts[:-1])
    )


def _new_test_module(path: str, text: str, tip: _Tree) -> list[Reach]:
    if path.endswith(".py"):
        lines = text.splitlines()
        found = test_module_reach(text, lambda name: _project_module(tip, name))
        return _unique([Reach(path, f.line, _line(lines, f.line), f.why) for f in found])
    if path.endswith(".go"):
        pattern = re.compile(r"^\s*func\s+(?:init|TestMain)\s*\(")
        why = "runs before every test of the package"
        return [Reach(path, n, line, why) for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    if path.endswith((".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")):
        return _js_module(path, text)
    return []


def _project_module(tip: _Tree, name: str) -> bool:
    """Whether a top-level module name is the project's own (at the root or under src/)."""
    return any(
        tip.entry_kind(f"{where}{name}{end}") is not None for where in ("", "src/") for end in (".py", "/__init__.py")
    )


_JS_BINDING = re.compile(
    r"""(?:const|let|var)\s+(\w+)\s*=\s*require\(|import\s+\*\s+as\s+(\w+)\s+from|import\s+(\w+)\s+from"""
)


def _js_module(path: str, text: str) -> list[Reach]:
    bound = {name for match in _JS_BINDING.finditer(text) for name in match.groups() if name}
    if not bound:
        return []
    assigns = re.compile(
        r"^\s*(?:" + "|".join(map(re.escape, sorted(bound))) + r")\s*(?:\.\s*\w+|\[[^\]]*\])+\s*=(?!=)"
    )
    return [
        Reach(path, n, line, "assigns into a module it imports")
        for n, line in enumerate(text.splitlines(), 1)
        if assigns.search(line)
    ]


def _unique(found: list[Reach]) -> list[Reach]:
    return list(dict.fromkeys(found))
