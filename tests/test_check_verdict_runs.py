"""The per-test verdict end to end: real repositories, real runners (pytest, unittest, `node
--test`, cargo, jest and vitest behind `npm test` and `pnpm test`, Maven, Gradle), the real CLI
(`apply PLAN -y --json`), the real sandbox.

Every runner's repository starts red: add() and sub() are wrong on the tip, mul() is right. On
that tip a plan that fixes nothing stops at review, one that fixes add() and breaks mul() rolls
back naming mul, and one that fixes add() lands naming add as fixed and sub as already failing
(one base run for the three). The next tip is made green, and a plan breaking it rolls back.
Then what only Python shows: deleted test files, plans that write their own judge, a check
with no per-test output (`python -I -m unittest`, which keeps papayu's reporter out), and a
flaky test.

A runner is skipped only when it is absent here, and the skip says which. jest, vitest, pnpm and
Maven's plugins come from their registries into a per-machine cache (toolchains.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, papayu, papayu_dir, rust_env, write_plan
from helpers import head_of as _head

from papayu_git.check import sandbox

# Read at import, before the hermetic fixture points HOME at a temp directory: where rustup
# keeps its toolchains on this machine (a user's shell finds them through their real HOME).

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
# Each function right, and how the tip (or a plan) gets it wrong; the tests call add(2, 3),
# mul(2, 3) and sub(5, 3).
RIGHT = {"add": "a + b", "mul": "a * b", "sub": "a - b"}
WRONG = {"add": "a - b", "mul": "a + b", "sub": "b - a"}
EXPECTED = {"add": ("2, 3", 5), "mul": ("2, 3", 6), "sub": ("5, 3", 2)}
TIP_BUGS = frozenset({"add", "sub"})
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


# --- the projects, one per runner ------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """A repository of one runner: its files but the code, the code with some functions wrong,
    the check, and the runner's id of each test."""

    check: str
    code_path: str
    code: Callable[[frozenset[str], str], str]  # (wrong functions, a comment) -> the code file
    files: dict[str, str]
    ids: dict[str, str]
    env: dict[str, str]
    prepare: Callable[[Path], None] | None = None  # installs what the check needs, once the repo exists
    configured: bool = True  # papayu.check.command set to ``check``; False: detected (and ``check`` is what it finds)


def _py_code(wrong: frozenset[str], note: str = "") -> str:
    comment = f"# {note}\n\n" if note else ""
    return comment + "\n\n".join(
        f"def {name}(a, b):\n    return {(WRONG if name in wrong else RIGHT)[name]}\n" for name in RIGHT
    )


def _js_code(wrong: frozenset[str], note: str = "") -> str:
    comment = f"// {note}\n" if note else ""
    return comment + "".join(
        f"exports.{name} = (a, b) => {(WRONG if name in wrong else RIGHT)[name]};\n" for name in RIGHT
    )


def _rs_code(wrong: frozenset[str], note: str = "") -> str:
    comment = f"// {note}\n" if note else ""
    return comment + "\n".join(
        f"pub fn {name}(a: i32, b: i32) -> i32 {{\n    {(WRONG if name in wrong else RIGHT)[name]}\n}}\n"
        for name in RIGHT
    )


def _python_project(tests: str, case_class: str = "") -> Project:
    """calc.py with its tests in tests/test_calc.py, run by pytest (per-test results)."""
    prefix = f"tests/test_calc.py::{case_class + '::' if case_class else ''}"
    return Project(
        check=f"{PYTEST} tests",
        code_path="calc.py",
        code=_py_code,
        files={"tests/test_calc.py": tests, "pyproject.toml": PYPROJECT},
        ids={name: f"{prefix}test_{name}" for name in RIGHT},
        env={},
    )


def _pytest_project() -> Project:
    return _python_project(
        "from calc import add, mul, sub\n"
        + "".join(
            f"\n\ndef test_{name}():\n    assert {name}({args}) == {want}\n" for name, (args, want) in EXPECTED.items()
        )
    )


UNITTEST_TESTS = (
    "import unittest\n\nfrom calc import add, mul, sub\n\n\nclass CalcTest(unittest.TestCase):\n"
    + "".join(
        f"    def test_{name}(self):\n        self.assertEqual({name}({args}), {want})\n\n"
        for name, (args, want) in EXPECTED.items()
    )
)


def _unittest_under_pytest_project() -> Project:
    """unittest's TestCase classes, run by pytest: per-test results like pytest's own."""
    return _python_project(UNITTEST_TESTS, "CalcTest")


def _node_project() -> Project:
    tests = "const test = require('node:test');\nconst assert = require('node:assert');\n"
    tests += "const { add, mul, sub } = require('../calc');\n\n" + "".join(
        f"test('{name}', () => {{\n  assert.strictEqual({name}({args}), {want});\n}});\n"
        for name, (args, want) in EXPECTED.items()
    )
    return Project(
        # node --test behind `npm test`: papayu's reporter reaches it through NODE_OPTIONS.
        check="npm test",
        code_path="calc.js",
        code=_js_code,
        files={
            "test/calc.test.js": tests,
            "package.json": '{"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
        },
        ids={name: f"test/calc.test.js > {name}" for name in RIGHT},
        env={},
    )


def _cargo_project() -> Project:
    tests = "".join(
        f"#[test]\nfn {name}() {{\n    assert_eq!(calc::{name}({args}), {want});\n}}\n\n"
        for name, (args, want) in EXPECTED.items()
    )
    return Project(
        check="cargo test --offline",
        code_path="src/lib.rs",
        code=_rs_code,
        files={
            ".gitignore": "/target\n",
            # No dependencies and no Cargo.lock: cargo writes it, offline, in the check's checkout.
            "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
            "tests/arith.rs": tests,
        },
        ids={name: f"arith::{name}" for name in RIGHT},
        env=rust_env(),
    )


def _pnpm_installed(repo: Path) -> None:
    """node_modules from the test cache's pnpm store, and the lockfile committed as a project's is."""
    toolchains.pnpm_install(repo)
    git(repo, "add", "pnpm-lock.yaml")
    git(repo, "commit", "-q", "-m", "lockfile")


def _js_env() -> dict[str, str]:
    return {"PATH": f"{toolchains.pnpm_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}


def _js_tests(names: list[str], *, esm: bool) -> str:
    """Tests of calc's ``names``, for jest (CommonJS, globals) or vitest (ESM)."""
    if esm:
        head = "import { test, expect } from 'vitest';\nimport { createRequire } from 'node:module';\n"
        head += f"const {{ {', '.join(names)} }} = createRequire(import.meta.url)('../../lib/calc.js');\n"
    else:
        head = f"const {{ {', '.join(names)} }} = require('../../lib/calc');\n"
    return head + "".join(
        f"\ntest('{name}', () => {{\n  expect({name}({EXPECTED[name][0]})).toBe({EXPECTED[name][1]});\n}});\n"
        for name in names
    )


def _manifest(name: str, scripts: dict[str, str], *runners: str) -> str:
    deps = {r: toolchains.JS_PACKAGES[r] for r in runners}
    return json.dumps({"name": name, "private": True, "scripts": scripts, "devDependencies": deps}, indent=2) + "\n"


def _pnpm_workspace_project() -> Project:
    """`pnpm test` runs `pnpm -r test`: jest (behind cross-env) tests add and mul in one package,
    vitest tests sub in another; the code is shared at the root."""
    return Project(
        check="pnpm test",
        code_path="lib/calc.js",
        code=_js_code,
        files={
            ".gitignore": "node_modules/\n",
            "package.json": _manifest("calc-workspace", {"test": "pnpm -r --no-bail test"}),
            "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
            "packages/jest-suite/package.json": _manifest(
                "jest-suite", {"test": "cross-env NODE_ENV=test jest"}, "jest", "cross-env"
            ),
            "packages/jest-suite/calc.test.js": _js_tests(["add", "mul"], esm=False),
            "packages/vitest-suite/package.json": _manifest("vitest-suite", {"test": "vitest run"}, "vitest"),
            "packages/vitest-suite/calc.test.mjs": _js_tests(["sub"], esm=True),
        },
        ids={
            "add": "packages/jest-suite/calc.test.js > add",
            "mul": "packages/jest-suite/calc.test.js > mul",
            "sub": "packages/vitest-suite/calc.test.mjs > sub",
        },
        env=_js_env(),
        prepare=_pnpm_installed,
    )


def _npm_script_project() -> Project:
    """`npm test` (detected) runs `npm run test:unit`, which runs jest behind cross-env."""
    scripts = {"test": "npm run test:unit", "test:unit": "cross-env NODE_ENV=test jest"}
    return Project(
        check="npm test",
        code_path="lib/calc.js",
        code=_js_code,
        files={
            ".gitignore": "node_modules/\n",
            "package.json": _manifest("calc", scripts, "jest", "cross-env"),
            "test/unit/calc.test.js": _js_tests(["add", "mul", "sub"], esm=False),
        },
        ids={name: f"test/unit/calc.test.js > {name}" for name in RIGHT},
        env=_js_env(),
        prepare=_pnpm_installed,
        configured=False,
    )


def _plain_unittest_project() -> Project:
    """The same TestCase classes run by `python -m unittest`: papayu's result class reports them
    under pytest's ids (results/unittest_results.py)."""
    project = _python_project(UNITTEST_TESTS, "CalcTest")
    files = {**project.files, "tests/__init__.py": ""}
    return Project(f"{sys.executable} -m unittest", project.code_path, project.code, files, project.ids, {})


# Each runner's project maker; the toolchain a project needs marks its parameter (toolchains.needs).
PROJECTS = [
    pytest.param(_pytest_project, id="pytest"),
    pytest.param(_unittest_under_pytest_project, id="unittest-under-pytest"),
    pytest.param(_plain_unittest_project, id="unittest"),
    pytest.param(_node_project, id="node --test", marks=toolchains.needs("node")),
    pytest.param(_cargo_project, id="cargo", marks=toolchains.needs("cargo")),
    pytest.param(
        _pnpm_workspace_project, id="pnpm test: jest and vitest in a workspace", marks=toolchains.needs("npm")
    ),
    pytest.param(_npm_script_project, id="npm test: jest behind scripts", marks=toolchains.needs("npm")),
]


# --- applying plans ---------------------------------------------------------------------------


def _update(path: str, content: str) -> dict[str, str]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


def _apply(repo: Path, name: str, actions: list[dict[str, str]], *args: str, env: dict[str, str]) -> dict[str, Any]:
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", *args, env={"PAPAYU_PROTOCOL_VERSION": "1", **env})


def _message(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "log", "-1", "--format=%B", rev)


def _trailer(repo: Path, rev: str = "HEAD") -> str:
    found = [line for line in _message(repo, rev).splitlines() if line.startswith("Papayu-Check: ")]
    assert len(found) == 1, _message(repo, rev)
    return found[0]


def _why(data: dict[str, Any]) -> str:
    """What to show when an assertion on an apply fails: the result and the check's logs."""
    check = data.get("check") or {}
    logs = [Path(p).read_text(errors="replace")[-3000:] for p in (check.get("log"), check.get("own_log")) if p]
    return f"{data}\n\n" + "\n---\n".join(logs)


def _base_logs(repo: Path) -> list[Path]:
    """The logs of the base runs computed (a recorded base's failures confirmed without the
    recorder, `.unrecorded`, are part of it)."""
    return sorted(p for p in (papayu_dir(repo) / "checks").glob("base-*.log") if not p.stem.endswith(".unrecorded"))


def _tip_again(data: dict[str, Any]) -> dict[str, Any]:
    """The check's re-run on the tip of the tests that failed on the plan (check/failfirst.py)."""
    [again] = [run for run in data["check"]["runs"] if run["run"] == "tip again"]
    assert Path(again["log"]).is_file(), again
    return again


def _base_records(repo: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (papayu_dir(repo) / "base").glob("*.json")}


def _not_landed(repo: Path, data: dict[str, Any], head: str, state: str, code: str) -> None:
    assert (data["state"], data["error"]["code"], data["_rc"]) == (state, code, 1), _why(data)
    assert not data["ok"] and _head(repo) == head and git(repo, "status", "--porcelain") == ""


# --- every runner: fixed, broken, fixes nothing, green broken, one base per tip ----------------


@pytest.mark.parametrize("make", PROJECTS)
def test_the_verdict_per_test_with_each_runner(tmp_path: Path, make: Callable[[], Project]) -> None:
    repo, project = _project_repo(tmp_path, make)
    ids, env = project.ids, project.env
    tip = _head(repo)

    # A red tip (add, sub) and a plan that fixes neither: a human decides, the branch is kept.
    nothing = _apply(repo, "nothing", [_update(project.code_path, project.code(TIP_BUGS, "tidy"))], env=env)
    _not_landed(repo, nothing, tip, "review", "ERR_CHECK_FIXES_NOTHING")
    assert (nothing["check"]["command"], nothing["check"]["source"]) == (
        project.check,
        "git config papayu.check.command" if project.configured else "detected",
    )
    verdict = nothing["check"]["verdict"]
    assert verdict["already_failing"] == sorted([ids["add"], ids["sub"]]) and verdict["passed"] == 1, _why(nothing)
    assert f"already failing on the tip: {', '.join(sorted([ids['add'], ids['sub']]))}" in verdict["lines"]
    assert git(repo, "rev-parse", f"papayu/{nothing['plan_id']}").strip() == nothing["commit"]
    [base_log] = _base_logs(repo)
    base_records = _base_records(repo)  # the tip's, and each plan's run kept as its tree's base

    # Fixes add and breaks mul: rolled back, naming mul (re-run on the tip, where it passes).
    trade = _apply(repo, "trade", [_update(project.code_path, project.code(frozenset({"mul", "sub"}), ""))], env=env)
    _not_landed(repo, trade, tip, "rolled_back", "ERR_CHECK_REGRESSION")
    verdict = trade["check"]["verdict"]
    assert (verdict["broken"], verdict["fixed"], verdict["flaky"]) == ([ids["mul"]], [ids["add"]], []), _why(trade)
    assert f"newly failing: {ids['mul']}" in trade["error"]["reason"], trade["error"]
    assert f"fixed: {ids['add']}" in verdict["lines"]
    assert _tip_again(trade)["why"].startswith("1 test failed on the plan")  # the flake re-run, on the tip

    # Fixes add: lands, naming add fixed and sub already failing.
    fix = _apply(repo, "fix-add", [_update(project.code_path, project.code(frozenset({"sub"}), ""))], env=env)
    assert (fix["state"], fix["_rc"]) == ("landed", 0), _why(fix)
    assert _head(repo) == fix["commit"] != tip
    assert _trailer(repo) == "Papayu-Check: passed 2, fixed 1, already failing 1"
    verdict = fix["check"]["verdict"]
    assert verdict["lines"] == [f"fixed: {ids['add']}", f"already failing on the tip: {ids['sub']}"], _why(fix)
    assert fix["check"]["tests"]["failing"] == [ids["sub"]]

    # Three plans on one tip, one base run: its log and its record were written once.
    now = _base_records(repo)
    assert _base_logs(repo) == [base_log] and all(now.get(k) == v for k, v in base_records.items())

    # A new tip: the landed plan's run, on exactly that tree, is its base (no base run); fixing
    # sub makes it green.
    green = _apply(repo, "fix-sub", [_update(project.code_path, project.code(frozenset(), ""))], env=env)
    assert green["state"] == "landed", _why(green)
    assert _trailer(repo) == "Papayu-Check: passed 3, fixed 1, already failing 0"
    assert _base_logs(repo) == [base_log]

    # A green tip broken: rolled back, naming the broken test.
    head = _head(repo)
    broken = _apply(repo, "break-mul", [_update(project.code_path, project.code(frozenset({"mul"}), ""))], env=env)
    _not_landed(repo, broken, head, "rolled_back", "ERR_CHECK_REGRESSION")
    assert broken["check"]["verdict"]["broken"] == [ids["mul"]], _why(broken)
    assert f"newly failing: {ids['mul']}" in broken["error"]["reason"]
    assert (repo / project.code_path).read_text() == project.code(frozenset(), "")
    assert _base_logs(repo) == [base_log]  # five plans, three tips, one base run
    assert not git(repo, "branch", "--list", f"papayu/{broken['plan_id']}")


def _project_repo(tmp_path: Path, make: Callable[[], Project]) -> tuple[Path, Project]:
    """The project's repository on a red tip (add and sub wrong), its check set up."""
    try:
        project = make()
        repo = make_repo(tmp_path / "repo", {**project.files, project.code_path: project.code(TIP_BUGS, "")})
        if project.prepare is not None:
            project.prepare(repo)
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    if project.configured:
        git(repo, "config", "papayu.check.command", project.check)
    return repo, project


# --- Maven and Gradle: read per test with no setting ---------------------------------------------


def _java_code(wrong: frozenset[str], note: str = "") -> str:
    comment = f"// {note}\n" if note else ""
    body = "".join(
        f"    public static int {name}(int a, int b) {{ return {(WRONG if name in wrong else RIGHT)[name]}; }}\n"
        for name in RIGHT
    )
    return f"{comment}package calc;\n\npublic final class Calc {{\n{body}}}\n"


def _java_tests(names: list[str], *, junit4: bool) -> str:
    """A `calc.CalcTest` class testing calc's ``names`` (JUnit 5, or JUnit 4 for the Gradle here)."""
    checks = {name: f"assertEquals({EXPECTED[name][1]}, Calc.{name}({EXPECTED[name][0]}))" for name in names}
    return _java_test_class(checks, junit4=junit4)


def _java_test_class(checks: dict[str, str], *, junit4: bool) -> str:
    imports = (
        "import static org.junit.Assert.assertEquals;\nimport org.junit.Test;\n"
        if junit4
        else "import static org.junit.jupiter.api.Assertions.assertEquals;\nimport org.junit.jupiter.api.Test;\n"
    )
    cases = "".join(f"    @Test public void {name}() {{ {check}; }}\n" for name, check in checks.items())
    return f"package calc;\n\n{imports}\npublic class CalcTest {{\n{cases}}}\n"


# The second module: code of its own and a test class named like core's, green throughout.
TWICE = "package calc;\n\npublic final class Twice {\n    public static int twice(int a) { return 2 * a; }\n}\n"
TWICE_ID = "extra/calc.CalcTest::twice"


def _java_modules(junit4: bool) -> dict[str, str]:
    return {
        "core/src/test/java/calc/CalcTest.java": _java_tests(list(RIGHT), junit4=junit4),
        "extra/src/main/java/calc/Twice.java": TWICE,
        "extra/src/test/java/calc/CalcTest.java": _java_test_class(
            {"twice": "assertEquals(6, Twice.twice(3))"}, junit4=junit4
        ),
    }


MAVEN_PARENT = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>calc-parent</artifactId>
  <version>1.0</version>
  <packaging>pom</packaging>
  <modules><module>core</module><module>extra</module></modules>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter</artifactId><version>5.14.1</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>3.5.2</version>
      </plugin>
    </plugins>
  </build>
</project>
"""


def _maven_module(name: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <parent><groupId>example</groupId><artifactId>calc-parent</artifactId><version>1.0</version></parent>\n"
        f"  <artifactId>{name}</artifactId>\n</project>\n"
    )


JAVA_IDS = {name: f"core/calc.CalcTest::{name}" for name in RIGHT}


def _maven_project() -> Project:
    """Two modules, JUnit 5, a `calc.CalcTest` in each; the check is detected (`mvn test`) and no
    setting names its reports. Java's user.home is the passwd entry's, not HOME: the hermetic
    HOME's ~/.m2 is named to it (a user's are one)."""
    home = os.environ["HOME"]
    return Project(
        check="mvn test",
        code_path="core/src/main/java/calc/Calc.java",
        code=_java_code,
        files={
            ".gitignore": "target/\n",
            "pom.xml": MAVEN_PARENT,
            "core/pom.xml": _maven_module("core"),
            "extra/pom.xml": _maven_module("extra"),
            **_java_modules(junit4=False),
        },
        ids=JAVA_IDS,
        env={"MAVEN_OPTS": f"-Duser.home={home}", "PAPAYU_CHECK_ENV": "MAVEN_OPTS"},
        prepare=lambda repo: toolchains.maven_repository(repo, Path(home)),
        configured=False,
    )


def _gradle_project() -> Project:
    """Two projects, JUnit 4 (the Gradle Debian ships: 4.4.1), detected as `gradle test`. Its JDK
    cannot read this machine's cgroup v1 from inside the sandbox (a NullPointerException in
    CgroupV1Subsystem): -XX:-UseContainerSupport, passed with papayu.check.env."""
    home = os.environ["HOME"]
    build = (
        "subprojects {\n    apply plugin: 'java'\n    repositories { mavenCentral() }\n"
        "    dependencies { testImplementation 'junit:junit:4.13.2' }\n}\n"
    )
    return Project(
        check="gradle test",
        code_path="core/src/main/java/calc/Calc.java",
        code=_java_code,
        files={
            ".gitignore": ".gradle/\nbuild/\n",
            "settings.gradle": "include 'core', 'extra'\n",
            "build.gradle": build,
            **_java_modules(junit4=True),
        },
        ids=JAVA_IDS,
        env={
            "GRADLE_USER_HOME": f"{home}/.gradle",
            "JAVA_TOOL_OPTIONS": "-XX:-UseContainerSupport",
            "PAPAYU_CHECK_ENV": "JAVA_TOOL_OPTIONS",
        },
        prepare=lambda repo: toolchains.gradle_caches(repo, Path(home)),
        configured=False,
    )


BUILD_TOOLS = [
    pytest.param(_maven_project, id="maven", marks=toolchains.needs("mvn")),
    pytest.param(_gradle_project, id="gradle", marks=toolchains.needs("gradle")),
]


@pytest.mark.slow
@pytest.mark.parametrize("make", BUILD_TOOLS)
def test_a_build_tools_tests_are_named_per_module_with_no_setting(tmp_path: Path, make: Callable[[], Project]) -> None:
    """On a red tip (add and sub wrong in core), a plan that fixes add and breaks mul is rolled
    back naming mul; the plan that fixes add lands naming it fixed and sub already failing. The
    other module's `calc.CalcTest` is a test of its own, run although core's tests fail."""
    repo, project = _project_repo(tmp_path, make)
    ids, env, tip = project.ids, project.env, _head(repo)

    trade = _apply(repo, "trade", [_update(project.code_path, project.code(frozenset({"mul", "sub"}), ""))], env=env)
    _not_landed(repo, trade, tip, "rolled_back", "ERR_CHECK_REGRESSION")
    assert (trade["check"]["command"], trade["check"]["source"]) == (project.check, "detected")
    reader = "maven surefire" if make is _maven_project else "gradle junit"
    assert trade["check"]["tests"]["source"] == reader
    verdict = trade["check"]["verdict"]
    assert (verdict["broken"], verdict["fixed"]) == ([ids["mul"]], [ids["add"]]), _why(trade)
    assert f"newly failing: {ids['mul']}" in trade["error"]["reason"]
    [base] = [json.loads(p.read_text()) for p in (papayu_dir(repo) / "base").glob("*.json") if tip in p.read_text()]
    assert base["tests"]["outcomes"] == {
        ids["add"]: "failed",
        ids["mul"]: "passed",
        ids["sub"]: "failed",
        TWICE_ID: "passed",
    }

    # Failures in two modules (a reactor verified on FasterXML/jackson-jr: docs/BENCHMARKS.md): each
    # named under its own module, the other module's tests run although core's fail.
    broken_twice = _update("extra/src/main/java/calc/Twice.java", TWICE.replace("2 * a", "3 * a"))
    both = _apply(
        repo,
        "two-modules",
        [_update(project.code_path, project.code(frozenset({"add", "sub", "mul"}), "")), broken_twice],
        env=env,
    )
    _not_landed(repo, both, tip, "rolled_back", "ERR_CHECK_REGRESSION")
    assert sorted(both["check"]["verdict"]["broken"]) == sorted([ids["mul"], TWICE_ID]), _why(both)

    fix = _apply(repo, "fix-add", [_update(project.code_path, project.code(frozenset({"sub"}), ""))], env=env)
    assert (fix["state"], fix["_rc"]) == ("landed", 0), _why(fix)
    assert fix["check"]["verdict"]["lines"] == [f"fixed: {ids['add']}", f"already failing on the tip: {ids['sub']}"]
    assert _trailer(repo) == "Papayu-Check: passed 3, fixed 1, already failing 1"  # add, mul, and extra's twice


# --- Python: deleted tests, plans writing their own judge, exit code only, flakes --------------

CALC = _py_code(frozenset())
BROKEN_MUL = _py_code(frozenset({"mul"}))
BROKEN_ADD = _py_code(frozenset({"add"}))


def _green_python_repo(tmp_path: Path, **extra: str) -> Path:
    """A green tip: add, mul and sub right, one test file each."""
    tests = {
        f"tests/test_{name}.py": f"from calc import {name}\n\n\ndef test_{name}():\n    assert {name}({args}) == {want}\n"
        for name, (args, want) in EXPECTED.items()
    }
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": PYPROJECT, **tests, **extra})
    git(repo, "config", "papayu.check.command", f"{PYTEST} tests")
    return repo


DELETE_MUL_TESTS = {"kind": "DELETE_FILE", "path": "tests/test_mul.py"}


@pytest.mark.parametrize(
    ("breaks", "flags", "state", "code"),
    [
        # -y alone: the tip's test_mul, put back for the regression run, fails on the broken mul():
        # a deleted test file still judges the code it tested, so that rolls back.
        (True, (), "rolled_back", "ERR_CHECK_REGRESSION"),
        # Deleting tests that still pass is a test edit: held for a human.
        (False, (), "review", "ERR_TEST_EDITS_HELD"),
        # Approved: a deleted file's tests still judge the plan's code, so breaking them rolls back...
        (True, ("--allow-test-edits",), "rolled_back", "ERR_CHECK_REGRESSION"),
        # ...and deleting tests that still pass on the plan's code lands.
        (False, ("--allow-test-edits",), "landed", None),
    ],
    ids=["held-broken", "held-clean", "allowed-broken", "allowed-clean"],
)
def test_a_plan_deleting_a_passing_test_file(
    tmp_path: Path, breaks: bool, flags: tuple[str, ...], state: str, code: str | None
) -> None:
    repo = _green_python_repo(tmp_path)
    head = _head(repo)
    actions = [DELETE_MUL_TESTS, _update("calc.py", BROKEN_MUL if breaks else CALC + "# tidy\n")]
    data = _apply(repo, "delete-tests", actions, *flags, env={})
    verdict = data["check"]["verdict"]
    assert data["test_edits"] == ["tests/test_mul.py"], _why(data)
    assert verdict["broken"] == (["tests/test_mul.py::test_mul"] if breaks else []), _why(data)
    # Broken: rejected once the tests run first fail, the rest not run (docs/DESIGN.md, "Fail first").
    assert verdict["passed"] + len(verdict["not_run"]) == (2 if breaks else 3), _why(data)
    if code is None:
        assert (data["state"], data["_rc"]) == ("landed", 0), _why(data)
        assert not (repo / "tests/test_mul.py").exists()
        assert verdict["removed"] == ["tests/test_mul.py::test_mul"], _why(data)
        assert _trailer(repo) == "Papayu-Check: passed 3, fixed 0, already failing 0, removed 1"
        return
    _not_landed(repo, data, head, state, code)
    assert (repo / "tests/test_mul.py").is_file() and (repo / "calc.py").read_text() == CALC
    if code == "ERR_CHECK_REGRESSION":
        assert "newly failing: tests/test_mul.py::test_mul" in data["error"]["reason"], data["error"]
    else:  # kept for the human, its verdict in the kept commit's trailer
        passed = (
            "passed 2, fixed 0, already failing 0, newly failing 1"
            if breaks
            else "passed 3, fixed 0, already failing 0, removed 1"
        )
        assert _trailer(repo, f"papayu/{data['plan_id']}") == f"Papayu-Check: {passed}"


CHEATS = {
    # Exits before any test runs: the plan's own run is green, and says nothing per test.
    "exit-at-import": (
        {"tests/test_0_smoke.py": "import os\n\nos._exit(0)\n"},
        "the plan's own run (its tree as is) exited 0 and left no readable per-test results: crashed or stopped early",
        ("rolled_back", "ERR_CHECK_REGRESSION"),
    ),
    # Puts the right add() back when pytest imports it: the plan's own run passes every test, the
    # tip's tests do not (held for a human, never landed).
    "patch-back-at-import": (
        {"tests/test_aaa.py": "import calc\n\ncalc.add = lambda a, b: a + b\n"},
        "3 passed",
        ("review", "ERR_JUDGE_EDITS_HELD"),
    ),
}


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_a_new_test_file_cannot_land_broken_code(tmp_path: Path, cheat: str) -> None:
    repo = _green_python_repo(tmp_path)
    head = _head(repo)
    created, fooled, (state, code) = CHEATS[cheat]
    actions = [_update("calc.py", BROKEN_ADD)]
    actions += [{"kind": "CREATE_FILE", "path": path, "content": text} for path, text in created.items()]
    data = _apply(repo, cheat, actions, env={})
    _not_landed(repo, data, head, state, code)
    # The plan's own run was fooled; the regression run, without the plan's new file, was not.
    own = Path(data["check"]["own_log"]).read_text()
    assert fooled in own or fooled in data["check"]["verdict"]["lines"], (own, _why(data))
    assert data["check"]["verdict"]["broken"] == ["tests/test_add.py::test_add"], _why(data)
    assert "newly failing: tests/test_add.py::test_add" in data["error"]["reason"]
    assert not any((repo / path).exists() for path in created) and (repo / "calc.py").read_text() == CALC


def test_a_check_with_no_per_test_output_keeps_the_exit_code_rule(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        "calc.py": _py_code(TIP_BUGS),
        "tests/__init__.py": "",
        "tests/test_calc.py": UNITTEST_TESTS,
    }
    repo = make_repo(tmp_path / "repo", files)
    # -I: no PYTHONPATH, so no papayu reporter in unittest's process: nothing per test to read.
    git(repo, "config", "papayu.check.command", f"{sys.executable} -I -m unittest")
    head = _head(repo)

    # Fixes add, sub still fails: red is red, rolled back (per test it would have landed).
    one = _apply(repo, "fix-add", [_update("calc.py", _py_code(frozenset({"sub"})))], env={})
    _not_landed(repo, one, head, "rolled_back", "ERR_CHECK_FAILED")
    assert one["check"]["tests"]["source"] == "exit code only", _why(one)
    verdict = one["check"]["verdict"]
    assert verdict["exit_code_only"] and verdict["trailer"] == "exit code only" and not verdict["fixed"]
    # Why, and what to set: in the verdict, and in the error the user reads.
    why = (
        "python -I does not read PYTHONPATH or run site's start-up hook, where papayu's unittest reporter loads "
        "(pytest under it is read through its JUnit file)"
    )
    assert verdict["lines"][0].startswith("the verdict is exit-code only: `") and why in verdict["lines"][0]
    assert "set papayu.check.command to the runner itself" in verdict["lines"][0]
    assert f"(verdict by exit code only: `{sys.executable} -I -m unittest` (.): {why}" in one["error"]["reason"]
    assert "FAILED (failures=1)" in Path(one["check"]["log"]).read_text()

    both = _apply(repo, "fix-both", [_update("calc.py", CALC)], env={})
    assert (both["state"], both["_rc"], both["check"]["tests"]["source"]) == ("landed", 0, "exit code only"), _why(both)
    assert _trailer(repo) == "Papayu-Check: exit code only"

    # doctor says it before any plan: in the command's item, and after running it on the (green) tip.
    doctor = json.loads(papayu("doctor", "--check", "--json", cwd=repo).stdout)
    items = {item["name"]: item for item in doctor["checks"]}
    assert why in items["check command"]["detail"] and items["check command"]["data"]["unread"]
    tip = items["check on the tip"]
    assert f"verdict by exit code only (`{sys.executable} -I -m unittest` (.): {why})" in tip["detail"], tip
    assert tip["status"] == "warn" and "papayu.check.junit" in tip["hint"] and tip["data"]["direct_passed"] is True


def test_a_test_failing_on_the_plan_and_on_the_tip_re_run_is_flaky_and_does_not_block(tmp_path: Path) -> None:
    # A test that depends on the world outside the repository: it fails once a file shows up in
    # the pip cache (mounted into the check, and no part of the base run's key). It passes when
    # the tip's base run is cached, then the file shows up: it fails on the plan, and again when
    # the tip is re-run. Not the plan's doing.
    cache = tmp_path / "pip-cache"
    cache.mkdir()
    world = (
        "import os\n\n\ndef test_the_world_is_quiet():\n"
        "    assert not os.path.exists(os.path.join(os.environ['PIP_CACHE_DIR'], 'storm'))\n"
    )
    repo = _green_python_repo(tmp_path, **{"tests/test_world.py": world})
    env = {"PIP_CACHE_DIR": str(cache)}
    first = _apply(repo, "first", [_update("calc.py", CALC + "# one\n")], "--review", env=env)
    assert first["state"] == "review" and first["check"]["verdict"]["passed"] == 4, _why(first)
    [base_log] = _base_logs(repo)

    (cache / "storm").write_text("now\n")
    second = _apply(repo, "second", [_update("calc.py", CALC + "# two\n")], env=env)
    assert (second["state"], second["_rc"]) == ("landed", 0), _why(second)
    verdict = second["check"]["verdict"]
    assert (verdict["flaky"], verdict["broken"]) == (["tests/test_world.py::test_the_world_is_quiet"], []), _why(second)
    assert "flaky (failed on the tip too when re-run): tests/test_world.py::test_the_world_is_quiet" in verdict["lines"]
    assert _trailer(repo) == "Papayu-Check: passed 3 (3 first), fixed 0, already failing 0, flaky 1"
    assert _base_logs(repo) == [base_log]  # the cached base, then one re-run on the tip
    again = _tip_again(second)  # of the failing test alone, never the whole suite
    rerun = Path(again["log"]).read_text()
    assert again["tests"] == 1 and "FAILED tests/test_world.py::test_the_world_is_quiet" in rerun, rerun
    assert "1 failed in" in rerun and "passed" not in rerun.split("short test summary")[-1], rerun
