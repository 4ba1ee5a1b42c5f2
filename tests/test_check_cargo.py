"""cargo through the real CLI (`apply PLAN -y --json`) and the real sandbox: doctests keep their
ids when a plan moves them, every test binary is read even after one fails, and a library that
ignores its Cargo.lock checks offline with the user's lock and no wait on the network.

A test is skipped only when cargo (or the sandbox) is absent here, and the skip says which.
"""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, rust_env, write_plan
from helpers import head_of as _head

from papayu_git.check import sandbox
from papayu_git.check.results import Outcome, instrument
from papayu_git.check.results.libtest import read_libtest


def needs_cargo(test: Callable[..., None]) -> Callable[..., None]:
    """Skipped only when cargo or the sandbox is absent here, saying which."""
    test = pytest.mark.skipif(
        sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"
    )(test)
    return toolchains.needs("cargo")(test)


CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _repo(tmp_path: Path, files: dict[str, str], check: str = "cargo test") -> Path:
    repo = make_repo(tmp_path / "repo", {".gitignore": "/target\n", "Cargo.toml": CARGO_TOML, **files})
    _run(["cargo", "generate-lockfile", "--offline"], repo, rust_env())
    git(repo, "add", "Cargo.lock")
    git(repo, "commit", "-q", "-m", "lock")
    git(repo, "config", "papayu.check.command", check)
    return repo


def _apply(repo: Path, name: str, path: str, content: str) -> dict[str, Any]:
    plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": path, "content": content}], name=f"{name}.json")
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1", **rust_env()})


def _log(data: dict[str, Any]) -> str:
    check = data.get("check") or {}
    return "\n---\n".join(Path(p).read_text(errors="replace") for p in (check.get("log"), check.get("own_log")) if p)


def _why(data: dict[str, Any]) -> str:
    return f"{data}\n\n{_log(data)[-4000:]}"


# --- doctests: named by file, item and order, not by line ------------------------------------


def _lib(mul: str = "a * b", preamble: str = "") -> str:
    return preamble + textwrap.dedent(f"""\
        /// Adds.
        ///
        /// ```
        /// assert_eq!(calc::add(2, 3), 5);
        /// ```
        ///
        /// And with a negative number:
        ///
        /// ```
        /// assert_eq!(calc::add(-1, 1), 0);
        /// ```
        pub fn add(a: i32, b: i32) -> i32 {{
            a + b
        }}

        /// ```
        /// assert_eq!(calc::mul(2, 3), 6);
        /// ```
        pub fn mul(a: i32, b: i32) -> i32 {{
            {mul}
        }}
        """)


DOCTESTS = [
    "calc (doc)::src/lib.rs - add (#1)",
    "calc (doc)::src/lib.rs - add (#2)",
    "calc (doc)::src/lib.rs - mul (#1)",
]


@needs_cargo
def test_a_plan_adding_lines_above_doctests_lands_and_one_breaking_a_doctest_is_named(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"src/lib.rs": _lib()})
    preamble = "//! A calculator.\n//!\n//! Two functions.\n\n"

    # Every doctest moves three lines down: the same tests, so nothing is missing.
    moved = _apply(repo, "moved", "src/lib.rs", _lib(preamble=preamble))
    assert (moved["state"], moved["_rc"]) == ("landed", 0), _why(moved)
    verdict = moved["check"]["verdict"]
    assert (verdict["passed"], verdict["missing"], verdict["broken"]) == (3, [], []), _why(moved)
    log = _log(moved)
    assert "test src/lib.rs - add (line 7) ... ok" in log and "test src/lib.rs - add (line 13) ... ok" in log, log

    # Moved again and mul broken: rolled back, naming mul's doctest (not a missing line number).
    head = _head(repo)
    broken = _apply(repo, "broken", "src/lib.rs", _lib(mul="a + b", preamble=preamble + "// tidy\n"))
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), _why(broken)
    verdict = broken["check"]["verdict"]
    assert (verdict["broken"], verdict["missing"]) == ([DOCTESTS[2]], []), _why(broken)
    assert _head(repo) == head and "test src/lib.rs - mul (line 21) ... FAILED" in _log(broken)


# What cargo 1.95 printed for a crate doc, two doctests of add (the second failing), a no_run, a
# compile_fail (run apart: edition 2024 merges the others), a should_panic, an ignored one, a method.
DOCTEST_LOG = """\
   Doc-tests calc

running 7 tests
test src/lib.rs - S::m (line 30) ... ok
test src/lib.rs - (line 2) ... ok
test src/lib.rs - add (line 17) - compile ... ok
test src/lib.rs - add (line 11) ... FAILED
test src/lib.rs - add (line 23) ... ignored
test src/lib.rs - add (line 7) ... ok
test src/lib.rs - add (line 20) - should panic ... ok

failures:

---- src/lib.rs - add (line 11) stdout ----
assertion `left == right` failed
  left: 5
 right: 6

failures:
    src/lib.rs - add (line 11)

test result: FAILED. 5 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.73s


running 1 test
test src/lib.rs - add (line 14) - compile fail ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.25s
"""


def test_doctest_ids_name_the_file_the_item_and_the_place_among_its_doctests() -> None:
    cases = {case.test_id: case for case in read_libtest(DOCTEST_LOG) or []}
    doc = "calc (doc)::src/lib.rs - "
    assert {k: v.outcome for k, v in cases.items()} == {
        f"{doc}(#1)": Outcome.PASSED,  # the crate's own docs
        f"{doc}S::m (#1)": Outcome.PASSED,
        f"{doc}add (#1)": Outcome.PASSED,
        f"{doc}add (#2)": Outcome.FAILED,
        f"{doc}add (#3) - compile fail": Outcome.PASSED,
        f"{doc}add (#4) - compile": Outcome.PASSED,
        f"{doc}add (#5)": Outcome.PASSED,
        f"{doc}add (#6)": Outcome.SKIPPED,
    }
    assert "left: 5" in cases[f"{doc}add (#2)"].message
    # The same doctests three lines further down: the same ids.
    moved = re.sub(r"\(line (\d+)\)", lambda m: f"(line {int(m[1]) + 3})", DOCTEST_LOG)
    assert [c.test_id for c in read_libtest(moved) or []] == list(cases)


def test_cargo_test_runs_every_binary_and_the_flag_stays_off_the_test_args() -> None:
    assert instrument("cargo test", "/r")[0] == "cargo test --no-fail-fast"
    assert instrument("cargo test -- --nocapture", "/r")[0] == "cargo test --no-fail-fast -- --nocapture"
    assert instrument("cargo +nightly test -p calc", "/r")[0] == "cargo +nightly test --no-fail-fast -p calc"
    assert instrument("cargo build && cargo test --doc", "/r")[0] == "cargo build && cargo test --no-fail-fast --doc"
    for untouched in ("cargo test -p x --no-fail-fast -- y", "cargo nextest run", "cargo test-all", "mycargo test"):
        assert instrument(untouched, "/r")[0] == untouched
    # A --no-fail-fast after `--` goes to the test binary, not to cargo.
    assert instrument("cargo test -- --no-fail-fast", "/r")[0] == "cargo test --no-fail-fast -- --no-fail-fast"


# --- two test binaries: the second one is read after the first fails ----------------------------

BINARIES = {
    "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn mul(a: i32, b: i32) -> i32 {\n    a * b\n}\n",
    "tests/a_unrelated.rs": '#[test]\nfn fixture_missing() {\n    panic!("a fixture nobody committed");\n}\n',
    "tests/b_calc.rs": "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n\n"
    "#[test]\nfn muls() {\n    assert_eq!(calc::mul(2, 3), 6);\n}\n",
}


@needs_cargo
def test_tests_after_a_failing_test_binary_are_read_not_missing(tmp_path: Path) -> None:
    # The user's command stops at the first failing binary; papayu's run goes on.
    repo = _repo(tmp_path, BINARIES, check="cargo test -- --test-threads=1")
    fixed_add = BINARIES["src/lib.rs"].replace("a - b", "a + b")

    fix = _apply(repo, "fix-add", "src/lib.rs", fixed_add)
    assert (fix["state"], fix["_rc"]) == ("landed", 0), _why(fix)
    verdict = fix["check"]["verdict"]
    assert (verdict["fixed"], verdict["already_failing"]) == (["b_calc::adds"], ["a_unrelated::fixture_missing"])
    assert "$ cargo test -- --test-threads=1" in _log(fix)  # the log shows the user's command
    assert "Running tests/b_calc.rs" in _log(fix)

    head = _head(repo)
    broken = _apply(repo, "break-mul", "src/lib.rs", fixed_add.replace("a * b", "a + b"))
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), _why(broken)
    assert (broken["check"]["verdict"]["broken"], broken["check"]["verdict"]["missing"]) == (["b_calc::muls"], [])
    assert _head(repo) == head


# --- an ignored Cargo.lock: the user's versions, offline, without a wait ---------------------------

ONE_TEST = "#[test]\nfn one() {\n    assert_eq!(calc::one(), 1);\n}\n"
ITOA = 'itoa = "1"\n'
PINNED = "1.0.0"  # cfg-if's first 1.0; the cache also holds the newest, which a lockless check would take
ITOA_USE = "\npub fn show(n: u8) -> String {\n    itoa::Buffer::new().format(n).to_owned()\n}\n"
LIB_CRATE = {
    ".gitignore": "/target\nCargo.lock\n",  # a library's usual .gitignore
    "Cargo.toml": CARGO_TOML + '\n[dependencies]\ncfg-if = "1"\n',
    "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    "tests/adds.rs": "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
}


def _registry_crate(tmp_path: Path) -> Path:
    """The crate with its Cargo.lock pinning cfg-if at PINNED, ignored; cfg-if's newest and PINNED
    in the user's cargo cache (`cargo fetch` reaches crates.io once; later runs find them there)."""
    env = rust_env()
    newest = make_repo(tmp_path / "newest", {"Cargo.toml": LIB_CRATE["Cargo.toml"] + ITOA, "src/lib.rs": ""})
    _run(["cargo", "fetch", "-q"], newest, env)
    repo = make_repo(tmp_path / "repo", LIB_CRATE)
    _run(["cargo", "update", "-q", "-p", "cfg-if", "--precise", PINNED], repo, env)
    _run(["cargo", "fetch", "-q"], repo, env)
    assert f'name = "cfg-if"\nversion = "{PINNED}"' in (repo / "Cargo.lock").read_text()
    assert git(repo, "status", "--porcelain", "--ignored", "Cargo.lock").strip() == "!! Cargo.lock"
    git(repo, "config", "papayu.check.command", "cargo test")
    return repo


@needs_cargo
def test_an_ignored_cargo_lock_is_carried_and_the_check_runs_offline_without_waiting(tmp_path: Path) -> None:
    repo = _registry_crate(tmp_path)
    lock = repo / "Cargo.lock"
    before = (lock.read_bytes(), lock.stat().st_mtime_ns)

    plan = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\npub fn one() -> i32 {\n    1\n}\n"
    data = _apply(repo, "one", "src/lib.rs", plan)
    assert (data["state"], data["_rc"]) == ("landed", 0), _why(data)
    log = _log(data)
    assert "[papayu] carried: Cargo.lock (ignored in your tree; a copy for the check)" in log, log
    assert f"Compiling cfg-if v{PINNED}" in log, log  # the user's lock decided, not the newest cached
    # Offline from the start: no retries against the registry (they took ~22 s before). The log
    # decides; the plan's run's wall clock (a few seconds, more on a busy machine) only confirms.
    assert "index.crates.io" not in log and "spurious network error" not in log, log
    assert data["check"]["duration_sec"] < 10, _why(data)
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == before
    assert git(repo, "status", "--porcelain").strip() == ""


@needs_cargo
def test_a_plan_adding_a_cached_dependency_resolves_offline_in_the_checks_copy_of_the_lock(tmp_path: Path) -> None:
    repo = _registry_crate(tmp_path)
    before = (repo / "Cargo.lock").read_bytes()
    actions = [
        {"kind": "UPDATE_FILE", "path": "Cargo.toml", "content": LIB_CRATE["Cargo.toml"] + ITOA},
        {"kind": "UPDATE_FILE", "path": "src/lib.rs", "content": LIB_CRATE["src/lib.rs"] + ITOA_USE},
    ]
    plan = write_plan(repo.parent, actions, name="itoa.json")
    # Cargo.toml is no code of the plan: the user approves it (the plan's own run judges it).
    data = apply_json(repo, plan, "-y", "--allow-test-edits", env={"PAPAYU_PROTOCOL_VERSION": "1", **rust_env()})
    assert (data["state"], data["_rc"]) == ("landed", 0), _why(data)
    log = Path(data["check"]["own_log"]).read_text()
    # cargo added itoa to the check's copy of the lock, from the cache, without the network.
    assert "[papayu] carried: Cargo.lock" in log and "Compiling itoa v1." in log, log
    assert f"Compiling cfg-if v{PINNED}" in log and "index.crates.io" not in log, log
    assert (repo / "Cargo.lock").read_bytes() == before  # the user's lock is only read


@needs_cargo
def test_a_dependency_the_cache_lacks_fails_at_once_and_the_diagnosis_names_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"src/lib.rs": "pub fn one() -> i32 {\n    1\n}\n", "tests/one.rs": ONE_TEST})
    manifest = CARGO_TOML + '\n[dependencies]\npapayu-no-such-crate = "1"\n'
    data = _apply(repo, "unknown-dep", "Cargo.toml", manifest)
    # The tip's manifest builds (the regression run); the plan's own does not, at once.
    assert (data["state"], data["error"]["code"]) == ("rolled_back", "ERR_CHECK_NEW_TESTS_FAIL"), _why(data)
    [cause] = data["check"]["environment"]
    assert cause.startswith("cargo could not get the crate papayu-no-such-crate offline"), cause
    assert "index.crates.io" not in Path(data["check"]["own_log"]).read_text(), _why(data)
