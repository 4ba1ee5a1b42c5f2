"""Error heuristics on the goal and the `--from-file` log (docs/DESIGN.md, "Context": error text).

Pure text parsing: stack frames (Python tracebacks incl. chained exceptions and SyntaxError,
pytest long/short/line formats, Node/TypeScript, Rust panics and backtraces, Go panics, Java),
missing-module errors and "test X fails". Mapping frames onto repository paths happens in
autocontext.py, which knows the base tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SOURCE_EXTENSIONS = (
    "py|pyi|[cm]?js|jsx|tsx?|[cm]ts|vue|svelte|rs|go|java|kt|kts|scala|groovy|rb|php|cs|"
    "swift|c|cc|cpp|cxx|h|hh|hpp|m|mm|ex|exs|erl|lua|pl|sh|toml|ya?ml|json"
)

# `File "/abs/x.py", line 12, in f` and SyntaxError's `File "x.py", line 3` (no ", in").
_PY_FRAME = re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d+)')
# Java/Kotlin: `at com.example.App.main(App.java:5)`; module frames (`java.base/...`) are std.
_JAVA_FRAME = re.compile(
    r"\bat (?:[\w.$@-]*/+)?(?P<qual>[\w.$<>]+)"
    r"\((?P<file>[\w$-]+\.(?:java|kt|scala|groovy)):(?P<line>\d+)\)"
)
# TypeScript compiler: `src/x.ts(12,5): error TS2322`.
_TS_PAREN = re.compile(r"(?<![\w./\\@+~-])(?P<path>[\w./\\@+~-]*\.(?:[cm]?tsx?|[cm]?jsx?))\((?P<line>\d+),\d+\)")
# Everything else prints `path:line[:col]`: pytest, Node, tsc --pretty, rustc/panics, Go, Ruby, gcc.
_PATH_LINE = re.compile(
    rf"(?<![\w./\\@+~-])(?:file://)?(?P<path>(?:[A-Za-z]:[\\/])?[\w./\\@+~-]*"
    rf"\.(?:{SOURCE_EXTENSIONS})):(?P<line>\d+)\b"
)
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (?P<path>[^\s:]+)::(?P<name>[^\s\[]+)", re.M)
_MISSING_MODULE = re.compile(
    r"\b(?:ImportError|ModuleNotFoundError|No module named|Cannot find module|cannot find module|"
    r"Module not found|ERR_MODULE_NOT_FOUND|unresolved import|can't find crate|cannot find package|"
    r"no required module provides package|ClassNotFoundException|NoClassDefFoundError)\b"
)
# Failure words in English and Russian: goals and logs may be written in either.
_FAIL_WORDS = re.compile(
    r"(?i)\b(?:fail\w*|broken|red|error\w*|crash\w*)\b|пада\w*|пад[её]т|пал\b|"
    r"не проход\w*|слома\w*|красн\w*|ошибк\w*"
)
_TEST_NAME = re.compile(r"(?<![\w.])(?P<name>test_\w+|Test[A-Z]\w*|\w+Test|\w+_test)\b")
_TEST_WORD_NAME = re.compile(r"(?i)(?:\btest|тест)\s+[`'\"]?(?P<name>[A-Za-z_][\w.:/-]*)")
_TEST_PATH = re.compile(
    rf"(?<![\w./\\@+~-])(?P<path>[\w./@+~-]*(?:test|spec)[\w./@+~-]*\.(?:{SOURCE_EXTENSIONS}))"
    r"(?:::(?P<name>\w+))?",
    re.I,
)

# A file named in the goal ("fix src/parse.py", "README.md"); only names present in the base tree count.
_GOAL_PATH = re.compile(r"(?<![\w./\\@+~-])(?P<path>(?:[\w.@+~-]+/)*[\w@+~-][\w.@+~-]*\.[A-Za-z0-9]{1,10})(?![\w/-])")
MAX_GOAL_PATHS = 8

# Frames in these places are never the project's code (the issue: site-packages, node_modules, std).
IGNORED_SEGMENTS = (
    "site-packages",
    "dist-packages",
    "node_modules",
    ".cargo",
    "rustc",
    "go/pkg/mod",
    "lib/python",
    "__pypackages__",
    ".venv",
    "venv",
    ".tox",
    ".nox",
)


@dataclass(frozen=True)
class Frame:
    path: str  # as printed: absolute, relative, or a Java package path (com/example/App.java)
    line: int
    innermost_last: bool = False  # Python prints the failing frame last, the others first
    suffix_only: bool = False  # Java frames name a package path, found by suffix


@dataclass(frozen=True)
class ErrorHints:
    frames: tuple[Frame, ...] = ()
    missing_module: bool = False
    test_paths: tuple[str, ...] = ()
    test_names: tuple[str, ...] = ()
    goal_paths: tuple[str, ...] = ()  # file paths the goal names ("fix the parser in src/parse.py")


def _java_frames(text: str) -> list[Frame]:
    frames = []
    for m in _JAVA_FRAME.finditer(text):
        parts = m.group("qual").split(".")
        package = [p for p in parts[:-2] if p]  # drop Class and method
        if package and package[0] in ("java", "javax", "jdk", "sun", "kotlin", "scala"):  # std
            continue
        frames.append(Frame("/".join([*package, m.group("file")]), int(m.group("line")), suffix_only=True))
    return frames


def _frames(text: str) -> list[Frame]:
    frames = [Frame(m.group("path"), int(m.group("line")), innermost_last=True) for m in _PY_FRAME.finditer(text)]
    frames += _java_frames(text)
    frames += [Frame(m.group("path"), int(m.group("line"))) for m in _TS_PAREN.finditer(text)]
    frames += [
        Frame(m.group("path"), int(m.group("line")), innermost_last=m.group("path").endswith((".py", ".pyi")))
        for m in _PATH_LINE.finditer(text)
    ]
    seen: set[tuple[str, int]] = set()
    unique = []
    for frame in frames:
        if (frame.path, frame.line) not in seen and not is_ignored_frame(frame.path):
            seen.add((frame.path, frame.line))
            unique.append(frame)
    return unique


def is_ignored_frame(path: str) -> bool:
    if path.startswith(("<", "node:", "internal/")) or path.startswith("/rustc/"):
        return True
    segments = path.replace("\\", "/").split("/")
    joined = "/".join(segments)
    return any(s in IGNORED_SEGMENTS for s in segments) or "/lib/python" in joined or "go/pkg/mod" in joined


def _test_names(goal: str) -> list[str]:
    if not _FAIL_WORDS.search(goal):
        return []
    names = [m.group("name") for m in _TEST_NAME.finditer(goal)]
    names += [
        m.group("name").split("::")[-1]
        for m in _TEST_WORD_NAME.finditer(goal)
        if m.group("name").lower() not in ("fails", "failing", "is", "the", "suite", "падает")
    ]
    return [n for n in dict.fromkeys(names) if len(n) >= 3 and "." not in n and "/" not in n]


def parse_error_text(goal: str, log_text: str | None = None) -> ErrorHints:
    """Everything the goal and the log tell about where the failure is."""
    text = goal if log_text is None else f"{goal}\n{log_text}"
    test_paths = [m.group("path") for m in _PYTEST_FAILED.finditer(text)]
    test_paths += [m.group("path") for m in _TEST_PATH.finditer(goal)]
    names = [m.group("name") for m in _PYTEST_FAILED.finditer(text)]
    names += [m.group("name") for m in _TEST_PATH.finditer(goal) if m.group("name")]
    names += _test_names(goal)
    # `tests/test_pkg/test_timed.py` names a file, not the tests test_pkg and test_timed: searched
    # for as test names they would bring every file that imports the package.
    parts = {segment.rsplit(".", 1)[0] for path in test_paths for segment in path.split("/")}
    names = [n for n in names if n not in parts]
    return ErrorHints(
        frames=tuple(_frames(text)),
        missing_module=bool(_MISSING_MODULE.search(text)),
        test_paths=tuple(dict.fromkeys(p for p in test_paths if not is_ignored_frame(p))),
        test_names=tuple(dict.fromkeys(n.split("::")[-1].split("[")[0] for n in names)),
        goal_paths=tuple(dict.fromkeys(m.group("path") for m in _GOAL_PATH.finditer(goal)))[:MAX_GOAL_PATHS],
    )
