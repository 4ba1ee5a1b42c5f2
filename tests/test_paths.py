"""Path rules and protected patterns (docs/DESIGN.md, "The protocol and its validation"): each bad
path gives its exact code."""

from __future__ import annotations

import pytest
from helpers import path_code
from hypothesis import given, settings
from hypothesis import strategies as st

from papayu_git.errors import PapayuError
from papayu_git.paths import (
    DEFAULT_PROTECTED,
    MAX_PATH_LEN,
    check_path,
    configured_protected,
    is_protected,
    protected_patterns,
)
from papayu_git.validate import validate_response


@pytest.mark.parametrize(
    "path, code",
    [
        ("..", "ERR_PATH_TRAVERSAL"),
        ("../x", "ERR_PATH_TRAVERSAL"),
        ("src/../../etc/passwd", "ERR_PATH_TRAVERSAL"),
        ("src\\..\\x", "ERR_PATH_TRAVERSAL"),
        (".", "ERR_PATH_DOT_SEGMENT"),
        ("./x", "ERR_PATH_DOT_SEGMENT"),
        ("src/./x", "ERR_PATH_DOT_SEGMENT"),
        ("src//x", "ERR_PATH_DOT_SEGMENT"),
        ("src/x/", "ERR_PATH_DOT_SEGMENT"),
        ("/x", "ERR_PATH_ABSOLUTE"),
        ("/etc/passwd", "ERR_PATH_ABSOLUTE"),
        ("//x", "ERR_PATH_ABSOLUTE"),
        ("//server/share/x", "ERR_PATH_ABSOLUTE"),
        ("C:/x", "ERR_PATH_ABSOLUTE"),
        ("C:\\x", "ERR_PATH_ABSOLUTE"),
        ("c:x", "ERR_PATH_ABSOLUTE"),
        ("\\\\srv\\share", "ERR_PATH_ABSOLUTE"),
        ("\\x", "ERR_PATH_ABSOLUTE"),
        ("~/x", "ERR_PATH_HOME"),
        ("~", "ERR_PATH_HOME"),
        ("~root/.bashrc", "ERR_PATH_HOME"),
        ("", "ERR_PATH_EMPTY"),
        ("a\x00b", "ERR_PATH_CONTROL_CHAR"),
        ("a\nb", "ERR_PATH_CONTROL_CHAR"),
        ("a\tb", "ERR_PATH_CONTROL_CHAR"),
        ("a\x1bb", "ERR_PATH_CONTROL_CHAR"),
        ("a\x7fb", "ERR_PATH_CONTROL_CHAR"),
        ("a\x85b", "ERR_PATH_CONTROL_CHAR"),
        ("a" * (MAX_PATH_LEN + 1), "ERR_PATH_TOO_LONG"),
        ("src/" + "b" * (MAX_PATH_LEN - 3), "ERR_PATH_TOO_LONG"),
        (".git", "ERR_PATH_GIT_DIR"),
        (".git/config", "ERR_PATH_GIT_DIR"),
        (".GIT/config", "ERR_PATH_GIT_DIR"),
        (".Git/hooks/pre-commit", "ERR_PATH_GIT_DIR"),
        ("src/.GIT/config", "ERR_PATH_GIT_DIR"),
        ("a/b/c/.git/HEAD", "ERR_PATH_GIT_DIR"),
        ("vendor/lib/.git", "ERR_PATH_GIT_DIR"),  # a submodule's .git file
        (".git./config", "ERR_PATH_GIT_DIR"),  # NTFS drops trailing dots
        ("GIT~1/config", "ERR_PATH_GIT_DIR"),  # NTFS 8.3 short name of .git
        ("src\\.git\\config", "ERR_PATH_GIT_DIR"),
    ],
)
def test_bad_path_is_rejected_with_its_code(path: str, code: str) -> None:
    assert path_code(path) == code


@pytest.mark.parametrize("path", [None, 7, ["a"]])
def test_non_string_path_is_empty(path: object) -> None:
    with pytest.raises(PapayuError) as info:
        check_path(path)
    assert info.value.code == "ERR_PATH_EMPTY"


@pytest.mark.parametrize(
    "path, normalised",
    [
        ("README.md", "README.md"),
        ("src/app.py", "src/app.py"),
        ("src\\app.py", "src/app.py"),
        (".gitignore", ".gitignore"),
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        (".gitmodules", ".gitmodules"),
        ("docs/my.git/x", "docs/my.git/x"),
        ("a~b/c~", "a~b/c~"),
        ("a" * MAX_PATH_LEN, "a" * MAX_PATH_LEN),
        ("données/файл.txt", "données/файл.txt"),
    ],
)
def test_good_paths_pass_normalised(path: str, normalised: str) -> None:
    assert check_path(path) == normalised


def test_directory_actions_may_end_with_a_slash() -> None:
    assert check_path("src/", kind="CREATE_DIR") == "src"
    assert check_path("build/", kind="DELETE_DIR") == "build"
    assert path_code("src/", kind="CREATE_FILE") == "ERR_PATH_DOT_SEGMENT"


def test_error_names_the_path_and_escapes_control_characters() -> None:
    with pytest.raises(PapayuError) as info:
        check_path("evil\x00name")
    assert info.value.path == "evil\\x00name"
    assert info.value.hint


PROTECTED = [
    ".env",
    "config/.env",
    ".ENV",
    ".env.local",
    ".env.production",
    "deploy/.env.staging",
    "server.pem",
    "certs/server.pem",
    "tls/private.key",
    "store.p12",
    "id_rsa",
    "id_rsa.pub",
    "home/me/.ssh/id_rsa_old",
    "secrets/token.txt",
    "app/secrets/db.yml",
    "a/b/secrets/c/d.json",
    "Secrets/x",
    "secrets",
    "envs/.envrc",
    "id_ed25519",
    "home/.ssh/id_ecdsa.pub",
    "id_dsa",
    ".ssh/config",
    "me/.ssh/authorized_keys",
    "cert.pfx",
    "release.jks",
    "android/app/upload.keystore",
    ".npmrc",
    "web/.npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".aws/credentials",
    "home/me/.aws/credentials",
    ".docker/config.json",
    "ci/.docker/config.json",
    ".kube/config",
    "ops/.kube/config",
    "gcp/credentials.json",
    "infra/terraform.tfstate",
    "infra/terraform.tfstate.backup",
    # Windows drops trailing dots and spaces: these open the protected file.
    ".env ",
    "config/.env.",
    "k.pem.",
    "keys/id_rsa. .",
    "secrets./x",
    "a/secrets /x",
]
ALLOWED = [
    ".env.example",
    "config/.env.example",
    ".github/workflows/ci.yml",
    ".gitignore",
    "secrets.py",
    "src/secrets.py",
    "my_secrets/x",
    "keys.md",
    "keyboard.key.txt",
    "environment.py",
    "envrc.md",
    ".aws/config",
    ".docker/daemon.json",
    ".kube/cache.md",
    "credentials.py",
    "docs/ssh.md",
    "tfstate.md",
]


@pytest.mark.parametrize("path", PROTECTED)
def test_protected_pattern_blocks_every_action_kind(path: str) -> None:
    assert is_protected(path)
    for action in ({"kind": "CREATE_FILE", "path": path, "content": "x"}, {"kind": "DELETE_FILE", "path": path}):
        with pytest.raises(PapayuError) as info:
            validate_response({"actions": [action], "summary": "s"}, protocol=2, mode="apply")
        assert info.value.code == "ERR_PROTECTED_PATH"
        assert info.value.path == path


@pytest.mark.parametrize("path", ALLOWED)
def test_similar_names_are_not_protected(path: str) -> None:
    assert not is_protected(path)
    response = validate_response(
        {"actions": [{"kind": "CREATE_FILE", "path": path, "content": "x\n"}], "summary": "s"}, protocol=2, mode="apply"
    )
    assert [a.path for a in response.actions] == [path]


def test_user_patterns_add_to_the_denylist_but_never_remove_from_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_PROTECTED_PATHS", "*.sqlite, private/**, !.env, !*.pem")
    patterns = configured_protected()
    assert patterns[: len(DEFAULT_PROTECTED)] == DEFAULT_PROTECTED
    assert is_protected("data/app.sqlite", patterns)
    assert is_protected("private/notes.md", patterns)
    assert is_protected(".env", patterns) and is_protected("a.pem", patterns)
    assert not is_protected("src/app.py", patterns)
    assert protected_patterns(["", "  "]) == DEFAULT_PROTECTED


@settings(max_examples=150, deadline=None)
@given(
    path=st.lists(st.sampled_from([*list("aZ9_.-/~:\\ "), "git", "GIT", ".git", "~1", ".."]), max_size=10).map("".join)
)
def test_fast_path_never_accepts_what_a_rule_rejects(path: str) -> None:
    from papayu_git.paths import _PLAIN

    if _PLAIN.fullmatch(path):
        segments = path.split("/")
        assert not {"", ".", ".."} & set(segments)
        assert not any(s.casefold().rstrip(". ") in (".git", "git~1") for s in segments)
        assert path[0] not in "/\\~" and ":" not in path
        assert check_path(path) == path


def _by_regexes_alone(path: str, patterns: tuple[str, ...]) -> bool:
    """is_protected as the compiled regexes decide it, without the check for the patterns' text."""
    from papayu_git.paths import _compiled

    def matches(candidate: str) -> bool:
        folded = candidate.casefold() + "/"
        any_pattern, runs = _compiled(patterns)
        if not any_pattern.fullmatch(folded):
            return False
        return next((not negate for negate, regex in runs if regex.fullmatch(folded)), False)

    windows = "/".join(s.rstrip(". ") for s in path.split("/"))
    return matches(path) or (windows != path and matches(windows))


_GLOB_PIECES = ["a", "B", "é", "ß", ".", "-", "_", "*", "?", "**", "[ab]", "[!a]", "env", "pem", "/"]
_PATH_PIECES = ["a", "b", "B", "é", "SS", "ß", ".", " ", "-", "_", "env", "pem", "/", "x/", ".env", "sub/"]


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(
        st.lists(st.sampled_from(_GLOB_PIECES), min_size=1, max_size=6)
        .map("".join)
        .map(lambda p: p if p.strip("/") else "a"),
        min_size=1,
        max_size=5,
    ).map(lambda ps: tuple(("!" + p) if i and len(p) % 3 == 0 else p for i, p in enumerate(ps))),
    paths=st.lists(st.lists(st.sampled_from(_PATH_PIECES), min_size=1, max_size=8).map("".join), max_size=8),
)
def test_a_pattern_list_compiled_only_when_needed_decides_as_its_regexes(
    patterns: tuple[str, ...], paths: list[str]
) -> None:
    """A pattern list's regexes are compiled once a path holds the literal text of one of its
    patterns (paths._matches_protected): until then the answer is the one they would give."""
    from papayu_git import paths as module

    module._COMPILED.discard(patterns)
    for path in [*paths, *(p.replace("*", "x").replace("?", "y") for p in patterns)]:
        assert is_protected(path, patterns) == _by_regexes_alone(path, patterns), (path, patterns)


def test_built_in_lists_compiled_only_when_needed_decide_as_their_regexes() -> None:
    from papayu_git import paths as module
    from papayu_git import testfiles

    lists = [
        DEFAULT_PROTECTED,
        *(
            testfiles.compile_patterns(p)
            for p in (
                testfiles.BUILTIN_TEST_PATTERNS,
                testfiles.HARNESS_PATTERNS,
                testfiles.STARTUP_HOOK_PATTERNS,
                testfiles.RUNNER_MODULE_PATTERNS,
            )
        ),
    ]
    names = ["src/app.py", "README.md", "src/d001/s2/f00042.txt", *PROTECTED, *ALLOWED]
    names += ["tests/test_a.py", "src/pytest.py", "pytest/__init__.py", "a/b.pth", "sitecustomize.py", "tox.ini"]
    names += ["SRC/Unittest/x.py", "pkg/conftest.py", "web/a.spec.ts", "go/x_test.go", "jest.config.js", "x.pth."]
    for patterns in lists:
        for name in names:
            module._COMPILED.discard(patterns)
            assert is_protected(name, patterns) == _by_regexes_alone(name, patterns), (name, patterns)
