"""What a check command runs through its package scripts (papayu_git/check/scripts.py), read on a
real repository's committed tree as command.py reads the tip, and which of those commands are
runners papayu reads (results/runners.py). The runners themselves run in
test_check_results.py and, through the CLI and the sandbox, in test_check_verdict_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
from helpers import git, make_repo

from papayu_git.check.command import resolve_command
from papayu_git.check.results import runners
from papayu_git.check.scripts import Leaf, resolve
from papayu_git.objects import GitTree


def _tree(repo: Path) -> GitTree:
    handle = pygit2.Repository(str(repo))
    return GitTree(handle, handle[handle.head.target].tree)


def _manifest(name: str, **scripts: str) -> str:
    return json.dumps({"name": name, "scripts": scripts})


WORKSPACE = {
    "package.json": json.dumps(
        {
            "name": "root",
            "workspaces": ["apps/*", "packages/**", "!packages/legacy"],
            "scripts": {
                "pretest": "tsc -b",
                "test": "npm run test:unit && npm run test:e2e",
                "test:unit": "cross-env NODE_ENV=test jest --ci",
                "test:e2e": "cd e2e && playwright test",
                "all": "run-s lint test:*",
                "lint": "eslint .",
                "both": 'concurrently -n a,b "npm:test:unit" "vitest run"',
                "loop": "npm run loop",
            },
        }
    ),
    "pnpm-workspace.yaml": "packages:\n  - 'apps/*'  # the apps\n  - \"packages/**\"\n  - '!packages/legacy'\n",
    "apps/web/package.json": _manifest("@acme/web", test="vitest run", **{"test:ui": "vitest --reporter=verbose"}),
    "packages/core/package.json": _manifest("core", test='NODE_OPTIONS="$NODE_OPTIONS --experimental-vm-modules" jest'),
    "packages/deep/lib/package.json": _manifest("deep", test="NODE_OPTIONS=--inspect node --test"),
    "packages/legacy/package.json": _manifest("legacy", test="mocha"),
    "packages/no-tests/package.json": _manifest("no-tests", build="tsc"),
}


@pytest.fixture
def workspace(tmp_path: Path) -> GitTree:
    return _tree(make_repo(tmp_path / "ws", dict(WORKSPACE)))


def _leaves(command: str, tree: GitTree) -> list[tuple[str, str]]:
    """(the command's words, its directory) of every leaf."""
    return [(" ".join(leaf.words), leaf.where) for leaf in resolve(command, tree).leaves]


def test_npm_scripts_are_followed_through_scripts_variables_and_cd(workspace: GitTree) -> None:
    assert _leaves("npm test", workspace) == [
        ("tsc -b", ""),
        ("jest --ci", ""),
        ("playwright test", "e2e"),
    ]
    assert _leaves("npm run test:unit -- --coverage", workspace) == [("jest --ci --coverage", "")]
    assert _leaves("npm run all", workspace) == [("eslint .", ""), ("jest --ci", ""), ("playwright test", "e2e")]
    assert _leaves("npm run both", workspace) == [("jest --ci", ""), ("vitest run", "")]
    runs = resolve("npm run loop", workspace)  # a script calling itself: read once
    assert runs.leaves == () and runs.scripts
    missing = resolve("npm run nope && npm run --if-present absent", workspace)
    assert missing.notes == ("package.json has no script `nope` (`npm run nope`)",)


def test_workspaces_recursive_filtered_and_by_directory(workspace: GitTree) -> None:
    everyone = [
        ("vitest run", "apps/web"),
        ("jest", "packages/core"),
        ("node --test", "packages/deep/lib"),
    ]
    assert _leaves("pnpm -r test", workspace) == everyone  # no-tests has no such script: not said
    assert _leaves("pnpm --filter @acme/* test", workspace) == everyone[:1]
    assert _leaves("pnpm -F ./packages/core --filter=deep run test", workspace) == everyone[1:]
    assert _leaves("npm test --workspaces --if-present", workspace) == everyone
    assert _leaves("npm run test -w core", workspace) == [("jest", "packages/core")]
    assert _leaves("yarn workspaces foreach -A --parallel run test", workspace) == everyone
    assert _leaves("yarn workspace @acme/web test:ui", workspace) == [("vitest --reporter=verbose", "apps/web")]
    assert _leaves("cd apps/web && npm test 2>&1 | tee out.log", workspace) == [
        ("vitest run", "apps/web"),
        ("tee out.log", "apps/web"),
    ]
    assert _leaves("pnpm -C packages/core test", workspace) == [("jest", "packages/core")]
    assert not any(where == "packages/legacy" for _, where in _leaves("pnpm -r test", workspace))


def test_programs_behind_wrappers_and_package_runners(workspace: GitTree) -> None:
    for command in (
        "npx -y jest --ci",
        "pnpm exec jest --ci",
        "pnpm jest --ci",  # not a script of the root: pnpm runs the program
        "yarn jest --ci",
        "sh -c 'jest --ci'",
        "env -u X A=1 jest --ci",
        "c8 -r lcov jest --ci",
        "dotenv -e .env.test -- jest --ci",
        "time nice -n 5 jest --ci",
        "cross-env-shell A=1 'jest --ci'",
    ):
        assert _leaves(command, workspace) == [("jest --ci", "")], command


def test_node_options_that_drop_papayus_hook_are_seen(workspace: GitTree) -> None:
    leaves = {leaf.where: leaf for leaf in resolve("pnpm -r test", workspace).leaves}
    assert not leaves["packages/core"].node_options_replaced  # "$NODE_OPTIONS ..." keeps it
    assert leaves["packages/deep/lib"].node_options_replaced
    assert runners.classify(leaves["packages/core"]).runner == runners.JEST


def test_without_a_tree_the_scripts_are_not_read_and_that_is_said() -> None:
    runs = resolve("npm test", None)
    assert runs.leaves == () and runs.notes == (
        "`npm test` runs package scripts papayu did not read (no tree to read them on)",
    )


def test_the_scripts_are_read_on_the_tip_not_the_work_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"package.json": _manifest("app", test="vitest run")})
    (repo / "package.json").write_text(_manifest("app", test="mocha"))  # not committed: not the tip
    found = resolve_command(repo, _tree(repo), None)
    assert found is not None and found.command == "npm test" and found.source == "detected"
    assert found.runs is not None and [leaf.words for leaf in found.runs.leaves] == [("vitest", "run")]
    git(repo, "commit", "-qam", "mocha")
    found = resolve_command(repo, _tree(repo), "npm test")
    assert found is not None and found.runs is not None and [leaf.words for leaf in found.runs.leaves] == [("mocha",)]


@pytest.mark.parametrize(
    ("files", "command"),
    [
        ({"pom.xml": "<project/>"}, "mvn test"),
        ({"pom.xml": "<project/>", "mvnw": "#!/bin/sh\n"}, "./mvnw test"),
        ({"settings.gradle.kts": "", "build.gradle.kts": ""}, "gradle test"),
        ({"build.gradle": "", "gradlew": "#!/bin/sh\n"}, "./gradlew test"),
    ],
)
def test_maven_and_gradle_projects_are_detected(tmp_path: Path, files: dict[str, str], command: str) -> None:
    repo = make_repo(tmp_path / "repo", dict(files))
    found = resolve_command(repo, _tree(repo), None)
    assert found is not None and (found.command, found.source) == (command, "detected")


@pytest.mark.parametrize(
    ("words", "via", "runner", "unread"),
    [
        ("jest --ci", (), runners.JEST, ""),
        ("node node_modules/jest/bin/jest.js", (), runners.JEST, ""),
        ("node --experimental-vm-modules ./node_modules/jest-cli/bin/jest.js", (), runners.JEST, ""),
        ("jest --json", (), None, "jest is given --json"),
        ("jest --watchAll", (), None, "jest is given --watchAll"),
        ("vitest", (), runners.VITEST, ""),
        ("vitest run --reporter=dot", (), runners.VITEST, ""),
        ("vitest run --outputFile.junit=x.xml", (), None, "vitest is given --outputFile.junit=x.xml"),
        ("vitest bench", (), None, ""),
        ("node --test", ("npm test",), runners.NODE_TEST, ""),
        ("node --require ./setup.js --test", ("npm test",), runners.NODE_TEST, ""),
        ("node -r ./setup.js --import tsx --test", (), runners.NODE_TEST, ""),
        ("tsx --test src", ("npm test",), runners.NODE_TEST, ""),
        ("mvn -B verify", (), runners.MAVEN, ""),
        ("./mvnw test", (), runners.MAVEN, ""),
        ("./gradlew check", (), runners.GRADLE, ""),
        ("cargo +nightly test --workspace", ("npm test",), runners.CARGO, ""),
        ("cargo nextest run", (), None, "nextest"),
        ("go test ./...", (), runners.GO, ""),
        ("go test ./...", ("npm test",), None, "go test inside a script"),
        ("python3 -m unittest discover", (), None, ""),  # papayu's start-up hook reads it
        ("python3 -I -m unittest discover", (), None, "python -I does not read PYTHONPATH"),
        ("python3.12 -W error -ES manage.py test", (), None, "python -E does not read"),
        ("python -W ignore -m unittest", (), None, ""),
        ("mocha", ("npm test",), None, "mocha's reporters"),
        ("react-scripts test", ("npm test",), None, "react-scripts runs jest inside its own process"),
        ("react-scripts build", ("npm test",), None, ""),
        ("make test", (), None, "does not read the recipe (pytest, unittest and gotestsum under it are read)"),
        ("tsc -b", ("npm test",), None, ""),
        ("eslint .", (), None, ""),
    ],
)
def test_which_runner_a_command_is(words: str, via: tuple[str, ...], runner: str | None, unread: str) -> None:
    found = runners.classify(Leaf(tuple(words.split()), "", via))
    assert found.runner == runner
    assert (unread in found.unread) if unread else not found.unread
