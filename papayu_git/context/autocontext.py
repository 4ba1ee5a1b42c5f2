"""From error hints to what gets read (docs/DESIGN.md, "Context": error text).

Frames become ±80-line excerpts of repository files (absolute paths inside the repo become
relative; paths outside it are ignored; a path that is not in the base tree is matched by a
unique suffix, e.g. a crate's `src/main.rs` or a Java package path). A failing test brings its
file and the module it imports; a missing module brings the dependency manifests.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from papayu_git import settings
from papayu_git.context.basetree import BaseTree
from papayu_git.context.blocks import PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MANIFEST, PRIORITY_TOP, ContextBlock
from papayu_git.context.files import EXCERPT_RADIUS, Range, refusal_note, repo_relative
from papayu_git.context.heuristics import ErrorHints, Frame
from papayu_git.errors import PapayuError
from papayu_git.git import run_git
from papayu_git.paths import is_protected

MAX_FRAME_FILES = 6
MAX_TEST_FILES = 2
MAX_TEST_NAMES = 5
MAX_MODULES_PER_TEST = 6
MODULES_FIRST = 2  # of them, at PRIORITY_HIGH: the counterpart and the recently changed ones first
MANIFESTS = (
    "pyproject.toml",
    "package.json",
    "poetry.lock",
    "Pipfile",
    "setup.cfg",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
)

_PY_IMPORT = re.compile(
    r"^\s*(?:from\s+(?P<from>\.*[\w.]*)\s+import\s+(?P<names>[\w, ()]+)|import\s+(?P<mod>[\w.]+))", re.M
)
_JS_IMPORT = re.compile(r"""(?:from\s+|require\(\s*|import\(\s*)['"](?P<spec>\.{1,2}/[^'"]+)['"]""")
_JS_EXTENSIONS = ("", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", "/index.ts", "/index.js")
_COUNTERPART = (
    re.compile(r"^test_(.+)$"),
    re.compile(r"^(.+)_test$"),
    re.compile(r"^(.+)\.(?:test|spec)$"),
    re.compile(r"^(.+)Tests?$"),
)


@dataclass
class ReadSpec:
    path: str
    ranges: list[Range] = field(default_factory=list)  # empty: the whole file
    priority: int = PRIORITY_HIGH
    requested: bool = False


class Planner:
    """Collects ReadSpecs (one per path) and refusal notes from the hints."""

    def __init__(self, tree: BaseTree, protected: tuple[str, ...]) -> None:
        self.tree = tree
        self.protected = protected
        self.specs: dict[str, ReadSpec] = {}
        self.notes: list[ContextBlock] = []

    def add(self, path: str, ranges: list[Range], priority: int) -> None:
        spec = self.specs.get(path)
        if spec is None:
            self.specs[path] = ReadSpec(path, list(ranges), priority)
            return
        spec.priority = min(spec.priority, priority)
        spec.ranges = [] if not ranges or not spec.ranges else spec.ranges + list(ranges)

    def locate(self, raw_paths: list[str], suffix_only: frozenset[str] = frozenset()) -> dict[str, str]:
        """raw path -> repo path present in the base tree (refusals become notes, unknowns vanish)."""
        relative: dict[str, str] = {}
        foreign: list[str] = []  # absolute paths of another checkout (CI logs)
        for raw in dict.fromkeys(raw_paths):
            rel = self._relative(raw, "the error trace")
            if rel:
                relative[raw] = rel
            elif rel == "":
                foreign.append(raw)
        entries = self.tree.entries([r for raw, r in relative.items() if raw not in suffix_only])
        located = {raw: rel for raw, rel in relative.items() if (entries.get(rel) or _NOBLOB).type == "blob"}
        for raw in [r for r in relative if r not in located]:
            match = self._unique_suffix(relative[raw])
            if match:
                located[raw] = match
        for raw in foreign:
            match = self._checkout_suffix(raw)
            if match:
                located[raw] = match
        return located

    def _unique_suffix(self, rel: str) -> str | None:
        candidates = self.tree.by_basename().get(rel.rsplit("/", 1)[-1], [])
        matches = [p for p in candidates if p == rel or p.endswith("/" + rel)]
        return matches[0] if len(matches) == 1 else None

    def _checkout_suffix(self, absolute: str) -> str | None:
        """`/home/runner/work/app/app/src/x.py` -> `src/x.py`: the longest tail of at least two
        segments that is a path of the base tree (a bare file name is too weak a match)."""
        segments = [s for s in absolute.replace("\\", "/").split("/") if s]
        candidates = set(self.tree.by_basename().get(segments[-1], [])) if segments else set()
        for start in range(1, len(segments) - 1):
            tail = "/".join(segments[start:])
            if tail in candidates and not is_protected(tail, self.protected):
                return tail
        return None

    def add_frames(self, frames: tuple[Frame, ...]) -> None:
        located = self.locate([f.path for f in frames], frozenset(f.path for f in frames if f.suffix_only))
        mapped = [(f, located[f.path]) for f in frames if f.path in located]
        # The failing frame: Python prints it last, Node/Rust/Go/Java print it first.
        first_other = next((p for f, p in mapped if not f.innermost_last), None)
        python = [p for f, p in mapped if f.innermost_last]
        primary = [p for p in (python[-1] if python else None, first_other) if p]
        order = list(dict.fromkeys([*primary, *(p for _, p in mapped)]))[:MAX_FRAME_FILES]
        for frame, path in mapped:
            if path in order:
                span = (max(1, frame.line - EXCERPT_RADIUS), frame.line + EXCERPT_RADIUS)
                self.add(path, [span], PRIORITY_TOP if path in primary else PRIORITY_HIGH)

    def add_tests(self, hints: ErrorHints) -> None:
        tests = list(self.locate(list(hints.test_paths)).values())
        if hints.test_names:
            tests += self._files_defining(hints.test_names[:MAX_TEST_NAMES])
        for test in list(dict.fromkeys(tests))[:MAX_TEST_FILES]:
            self.add(test, [], PRIORITY_HIGH)
            for rank, module in enumerate(self._modules_under_test(test)[:MAX_MODULES_PER_TEST]):
                self.add(module, [], PRIORITY_HIGH if rank < MODULES_FIRST else PRIORITY_LOW)

    def add_goal_paths(self, paths: tuple[str, ...]) -> None:
        """Files the goal names, whole (only those that exist in the base tree)."""
        relative = [rel for rel in (self._relative(raw, "the goal") for raw in paths) if rel]
        for path, entry in self.tree.entries(relative).items():
            if entry is not None and entry.type == "blob":
                self.add(path, [], PRIORITY_HIGH)

    def _relative(self, raw: str, source: str) -> str | None:
        """The repo path of ``raw``; "" for an absolute path outside the repository; None when
        refused (a protected path becomes a NOTE) or malformed."""
        try:
            return repo_relative(raw, self.tree.repo_root, self.protected)
        except PapayuError as exc:
            if exc.code == "ERR_PROTECTED_PATH":
                self.notes.append(refusal_note(f"{source} names {exc.path}", exc))
            return "" if exc.code == "ERR_PATH_ABSOLUTE" else None

    def add_manifests(self) -> None:
        names = self.tree.top_level()
        wanted = [n for n in MANIFESTS if n in names]
        wanted += sorted(n for n in names if n.startswith("requirements") and n.endswith(".txt"))
        for name in wanted:
            self.add(name, [], PRIORITY_MANIFEST)

    def _files_defining(self, names: tuple[str, ...]) -> list[str]:
        """Test files that mention one of the names (one `git grep` for all of them)."""
        patterns = [arg for name in names for arg in ("-e", name)]
        proc = run_git(
            ["grep", "-l", "-w", "-F", "-I", *patterns, self.tree.base, "--"], cwd=self.tree.repo_root, check=False
        )
        prefix = self.tree.base + ":"
        paths = [line[len(prefix) :] for line in proc.stdout.splitlines() if line.startswith(prefix)]
        tests = [p for p in paths if re.search(r"(?i)test|spec", p)]
        return (tests or paths)[:MAX_TEST_FILES]

    def _modules_under_test(self, test: str) -> list[str]:
        """The project's modules the test imports, the one named like it (test_timed.py -> timed.py)
        first, then those changed in recent commits (where a new failure most likely comes from),
        then in import order; other test modules it imports (shared test bases) last."""
        blob = self.tree.blobs([e for e in self.tree.entries([test]).values() if e]).get(test)
        text = blob.text() if blob else None
        candidates = _import_candidates(test, text or "")
        entries = self.tree.entries(candidates)
        found = [c for c in candidates if (entries.get(c) or _NOBLOB).type == "blob" and c != test]
        counterparts = self._counterparts(test)
        # The commits the ENV block lists (one `git log` for both).
        recent = set(self.tree.recent_paths(settings.get_int("context_recent_commits", str(self.tree.repo_root))))
        modules = list(dict.fromkeys(counterparts + found))
        return sorted(
            modules,
            key=lambda m: (m not in counterparts, _is_test(m), m not in recent, modules.index(m)),
        )

    def _counterparts(self, test: str) -> list[str]:
        stem, ext = posixpath.splitext(posixpath.basename(test))
        names = {m.group(1) + ext for pattern in _COUNTERPART if (m := pattern.match(stem))}
        if not names:
            return []
        return [p for p in self.tree.all_paths() if posixpath.basename(p) in names and p != test][:1]


def _is_test(path: str) -> bool:
    stem = posixpath.splitext(posixpath.basename(path))[0]
    return any(pattern.match(stem) for pattern in _COUNTERPART) or stem == "conftest"


class _NoBlob:
    type = "missing"


_NOBLOB = _NoBlob()


def _import_candidates(test: str, text: str) -> list[str]:
    if test.endswith((".py", ".pyi")):
        return _python_candidates(text)
    base = posixpath.dirname(test)
    out = []
    for m in _JS_IMPORT.finditer(text):
        target = posixpath.normpath(posixpath.join(base, m.group("spec")))
        if not target.startswith(".."):
            out += [target + ext for ext in _JS_EXTENSIONS]
    return out


def _python_candidates(text: str) -> list[str]:
    out: list[str] = []
    for m in _PY_IMPORT.finditer(text):
        module = (m.group("from") or m.group("mod") or "").lstrip(".")
        if not module:
            continue
        names = [n.strip(" ()") for n in (m.group("names") or "").split(",") if n.strip(" ()")]
        for dotted in [module] + [f"{module}.{n}" for n in names]:
            stem = dotted.replace(".", "/")
            for root in ("", "src/", "lib/"):
                out += [f"{root}{stem}.py", f"{root}{stem}/__init__.py"]
    return out
