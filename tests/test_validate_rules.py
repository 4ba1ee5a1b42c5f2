"""Semantic validation (docs/DESIGN.md, "The protocol and its validation"): conflicts, content,
limits, PATCH_FILE shape, NO_CHANGES, memory_patch, the v1/v2 UPDATE_FILE rules and the base-tree
rules. Every case asserts the code."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import git, make_repo

from papayu_git.errors import ERROR_CODES, PapayuError, ValidationFailed
from papayu_git.protocol import ActionKind, Mode
from papayu_git.validate import MAX_ACTIONS, MAX_FILE_BYTES, MAX_TOTAL_BYTES, validate_response

SHA = hashlib.sha256(b"fn main() {}\n").hexdigest()
DIFF = "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,1 +1,1 @@\n-fn main() {}\n+fn main() { run() }\n"


def create(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"kind": "CREATE_FILE", "path": path, "content": content}


def update(path: str, content: str = "y\n") -> dict[str, Any]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


def patch(path: str, diff: str = DIFF, sha: str = SHA) -> dict[str, Any]:
    return {"kind": "PATCH_FILE", "path": path, "patch": diff, "base_sha256": sha}


def delete(path: str) -> dict[str, Any]:
    return {"kind": "DELETE_FILE", "path": path}


def mkdir(path: str) -> dict[str, Any]:
    return {"kind": "CREATE_DIR", "path": path}


def rmdir(path: str) -> dict[str, Any]:
    return {"kind": "DELETE_DIR", "path": path}


def plan(*actions: dict[str, Any], summary: str = "change", **extra: Any) -> dict[str, Any]:
    return {"actions": list(actions), "summary": summary, **extra}


def codes(data: Any, **kwargs: Any) -> list[str]:
    kwargs.setdefault("protocol", 2)
    kwargs.setdefault("mode", "apply")
    with pytest.raises(ValidationFailed) as info:
        validate_response(data, **kwargs)
    assert all(e.code in ERROR_CODES and e.hint for e in info.value.errors)
    assert info.value.code == info.value.errors[0].code
    return [e.code for e in info.value.errors]


def ok(data: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("protocol", 2)
    kwargs.setdefault("mode", "apply")
    return validate_response(data, **kwargs)


# --- conflicts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first, second, protocol, code",
    [
        (create("a.py"), update("a.py"), 1, "ERR_ACTION_CONFLICT"),
        (create("a.py"), patch("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (update("a.py"), patch("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (delete("a.py"), create("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (delete("a.py"), update("a.py"), 1, "ERR_ACTION_CONFLICT"),
        (delete("a.py"), patch("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (create("a.py"), create("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (update("a.py"), update("a.py"), 1, "ERR_ACTION_CONFLICT"),
        (patch("a.py"), patch("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (delete("a.py"), delete("a.py"), 2, "ERR_ACTION_CONFLICT"),
        (mkdir("d"), mkdir("d"), 2, "ERR_ACTION_CONFLICT"),
        (rmdir("d"), rmdir("d"), 2, "ERR_ACTION_CONFLICT"),
        (mkdir("d"), rmdir("d"), 2, "ERR_ACTION_CONFLICT"),
        (create("README.md"), create("readme.md"), 2, "ERR_PATH_COLLISION"),
        (rmdir("d"), create("d/x.py"), 2, "ERR_ACTION_CONFLICT"),
        (rmdir("d"), patch("d/x.py"), 2, "ERR_ACTION_CONFLICT"),
        (rmdir("d"), mkdir("d/sub"), 2, "ERR_ACTION_CONFLICT"),
        (mkdir("a"), create("a"), 2, "ERR_PATH_COLLISION"),
        (rmdir("a"), create("a"), 2, "ERR_PATH_COLLISION"),
        (delete("a"), mkdir("a"), 2, "ERR_PATH_COLLISION"),
        (create("a"), create("a/b.py"), 2, "ERR_PATH_COLLISION"),
        (create("a"), mkdir("a/b"), 2, "ERR_PATH_COLLISION"),
        (patch("a"), create("a/b/c.py"), 2, "ERR_PATH_COLLISION"),
    ],
)
def test_conflicting_pair_is_rejected_in_either_order(
    first: dict[str, Any], second: dict[str, Any], protocol: int, code: str
) -> None:
    assert codes(plan(first, second), protocol=protocol) == [code]
    assert codes(plan(second, first), protocol=protocol) == [code]


@pytest.mark.parametrize(
    "actions",
    [
        [mkdir("src"), create("src/app.py")],
        [rmdir("build"), delete("build/out.o")],
        [create("a.py"), create("b.py"), delete("c.py"), mkdir("d"), patch("e.py")],
    ],
)
def test_compatible_actions_pass(actions: list[dict[str, Any]]) -> None:
    assert len(ok(plan(*actions)).actions) == len(actions)


# --- content and limits ------------------------------------------------------------------


def test_nul_in_content_is_rejected() -> None:
    assert codes(plan(create("a.txt", "abc\x00def"))) == ["ERR_CONTENT_NUL"]
    assert codes(plan(patch("a.txt", DIFF.replace("run()", "run(\x00)")))) == ["ERR_CONTENT_NUL"]


def test_more_than_ten_percent_non_printable_is_pseudo_binary() -> None:
    assert codes(plan(create("a.txt", "\x01" * 11 + "a" * 89))) == ["ERR_PSEUDO_BINARY"]
    assert codes(plan(create("b.txt", "\ufffd" * 50))) == ["ERR_PSEUDO_BINARY"]
    ok(plan(create("a.txt", "\x01" * 10 + "a" * 90)))  # exactly 10 % is still text
    ok(plan(create("t.txt", "\t\r\n\f" * 50 + "ünïcödé ✓ 日本")))


def test_file_over_one_mib_is_rejected_by_bytes_not_characters() -> None:
    ok(plan(create("a.txt", "a" * MAX_FILE_BYTES)))
    assert codes(plan(create("a.txt", "a" * (MAX_FILE_BYTES + 1)))) == ["ERR_FILE_TOO_LARGE"]
    assert codes(plan(create("e.txt", "é" * (MAX_FILE_BYTES // 2 + 1)))) == ["ERR_FILE_TOO_LARGE"]
    big_diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+" + "b" * MAX_FILE_BYTES + "\n"
    assert codes(plan(patch("x", big_diff))) == ["ERR_FILE_TOO_LARGE"]


def test_total_over_five_mib_is_rejected() -> None:
    chunk = "a" * MAX_FILE_BYTES
    ok(plan(*(create(f"f{i}.txt", chunk) for i in range(MAX_TOTAL_BYTES // MAX_FILE_BYTES))))
    many = plan(*(create(f"f{i}.txt", chunk) for i in range(6)))
    assert codes(many) == ["ERR_TOTAL_TOO_LARGE"]


def test_more_than_200_actions_are_rejected() -> None:
    ok(plan(*(mkdir(f"d{i}") for i in range(MAX_ACTIONS))))
    assert codes(plan(*(mkdir(f"d{i}") for i in range(MAX_ACTIONS + 1)))) == ["ERR_TOO_MANY_ACTIONS"]
    assert codes([mkdir(f"d{i}") for i in range(MAX_ACTIONS + 1)], protocol=1) == ["ERR_TOO_MANY_ACTIONS"]


# --- PATCH_FILE ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "replace foo with bar",
        "",
        "--- a/x\n+++ b/x\n",  # no hunk
        "@@ -1,1 +1,1 @@\n same line\n",  # a hunk that changes nothing
        "diff --git a/x b/x\nindex 1..2\n",
    ],
)
def test_patch_that_is_not_a_unified_diff_is_rejected(text: str) -> None:
    assert codes(plan(patch("src/main.rs", text))) == ["ERR_PATCH_NOT_UNIFIED"]


@pytest.mark.parametrize("diff", [DIFF, "@@ @@\n-old\n+new\n", "@@ -3 +3 @@\n ctx\n+added\n"])
def test_unified_diff_shapes_pass(diff: str) -> None:
    assert ok(plan(patch("src/main.rs", diff))).actions[0].kind is ActionKind.PATCH_FILE


@pytest.mark.parametrize("sha", [SHA.upper(), SHA[:-1], SHA + "0", "g" * 64, "", "sha256:" + SHA[7:]])
def test_bad_base_sha256_is_rejected(sha: str) -> None:
    assert codes(plan(patch("src/main.rs", sha=sha))) == ["ERR_BASE_SHA256_INVALID"]


def test_patch_file_needs_patch_and_base_and_no_content() -> None:
    assert codes(plan({"kind": "PATCH_FILE", "path": "a", "patch": DIFF}))[0] == "ERR_SCHEMA"
    assert codes(plan({**patch("a"), "content": "x"}))[0] == "ERR_SCHEMA"
    assert codes(plan(patch("a")), protocol=1)[0] == "ERR_SCHEMA"  # v1 has no PATCH_FILE


@pytest.mark.parametrize("protocol", [1, 2])
def test_create_and_update_need_content(protocol: int) -> None:
    assert codes(plan({"kind": "CREATE_FILE", "path": "a"}), protocol=protocol)[0] == "ERR_SCHEMA"
    assert codes(plan({"kind": "UPDATE_FILE", "path": "a"}), protocol=protocol, mode="plan")[0] == "ERR_SCHEMA"


def test_v2_forbids_content_on_deletions() -> None:
    assert codes(plan({"kind": "DELETE_FILE", "path": "a", "content": "x"}))[0] == "ERR_SCHEMA"


# --- NO_CHANGES and modes --------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [1, 2])
def test_empty_apply_needs_no_changes_summary(protocol: int) -> None:
    assert codes(plan(summary="all done"), protocol=protocol) == ["ERR_EMPTY_APPLY"]
    assert codes({"actions": []}, protocol=protocol) == ["ERR_EMPTY_APPLY"]
    assert codes(plan(summary=" NO_CHANGES: indented"), protocol=protocol) == ["ERR_EMPTY_APPLY"]
    response = ok(plan(summary="NO_CHANGES: nothing to do"), protocol=protocol)
    assert response.is_no_changes and response.actions == ()
    assert not ok(plan(summary="diagnosis"), protocol=protocol, mode="plan").is_no_changes


def test_empty_apply_asking_for_context_is_not_final() -> None:
    response = ok(plan(context_requests=[{"type": "read_file", "path": "src/a.py"}], summary="need more"))
    assert response.context_requests == ({"type": "read_file", "path": "src/a.py"},)


def test_v1_array_with_no_actions_in_apply_is_an_empty_apply() -> None:
    assert codes([], protocol=1) == ["ERR_EMPTY_APPLY"]
    assert ok([], protocol=1, mode="plan").actions == ()


@pytest.mark.parametrize(
    "mode, expected", [("fix-plan", Mode.PLAN), ("chat", Mode.PLAN), ("apply", Mode.APPLY), (Mode.PLAN, Mode.PLAN)]
)
def test_mode_names_of_the_seed_are_accepted(mode: Any, expected: Mode) -> None:
    assert ok(plan(create("a")), mode=mode).mode is expected


def test_unknown_mode_or_protocol_is_a_usage_error() -> None:
    for kwargs in ({"mode": "deploy"}, {"protocol": 3}, {"protocol": "2"}):
        with pytest.raises(PapayuError) as info:
            validate_response(plan(create("a")), **{"protocol": 2, "mode": "apply", **kwargs})
        assert info.value.code == "ERR_USAGE"


# --- UPDATE_FILE rules -----------------------------------------------------------------------


def test_v1_apply_update_needs_a_file_read_in_plan() -> None:
    read = {"src/main.rs": SHA}
    assert codes(plan(update("src/secret.rs")), protocol=1, read_files=read) == ["ERR_UPDATE_WITHOUT_BASE"]
    assert ok(plan(update("src/main.rs")), protocol=1, read_files=read).actions[0].path == "src/main.rs"
    assert ok(plan(update("src/secret.rs")), protocol=1, mode="plan", read_files=read)
    assert ok(plan(update("src/secret.rs")), protocol=1)  # unknown plan files: not enforced


def test_v2_update_of_an_existing_file_is_forbidden() -> None:
    read = {"src/main.rs": SHA}
    assert codes(plan(update("src/main.rs")), read_files=read) == ["ERR_V2_UPDATE_EXISTING_FORBIDDEN"]
    assert ok(plan(update("src/new.rs")), read_files=read).actions[0].kind is ActionKind.UPDATE_FILE


# --- memory_patch ------------------------------------------------------------------------------


def test_memory_patch_key_outside_the_whitelist() -> None:
    data = plan(create("a"), memory_patch={"user.password": "x", "project.default_test_command": "pytest"})
    assert codes(data) == ["ERR_MEMORY_KEY_NOT_ALLOWED"]
    response = ok(data, protocol=1)  # v1 drops unknown keys and says so
    assert response.memory_patch == {"project.default_test_command": "pytest"}
    assert [w.code for w in response.warnings] == ["ERR_MEMORY_KEY_NOT_ALLOWED"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("user.ask_budget", "1"),
        ("user.ask_budget", True),
        ("user.ask_budget", 1.5),
        ("project.src_roots", "src"),
        ("project.test_roots", ["tests", 3]),
        ("project.default_test_command", ["pytest"]),
        ("user.preferred_style", None),
    ],
)
@pytest.mark.parametrize("protocol", [1, 2])
def test_memory_patch_value_of_the_wrong_type(key: str, value: Any, protocol: int) -> None:
    assert codes(plan(create("a"), memory_patch={key: value}), protocol=protocol) == ["ERR_MEMORY_TYPE"]


def test_memory_patch_must_be_an_object() -> None:
    assert codes(plan(create("a"), memory_patch=["user.ask_budget"])) == ["ERR_SCHEMA"]


def test_whitelisted_memory_patch_is_returned() -> None:
    patch_ = {"user.ask_budget": 1, "project.src_roots": ["src"], "user.output_format": "plan_first"}
    assert ok(plan(create("a"), memory_patch=patch_)).memory_patch == patch_


# --- every problem is reported, the first one gives the code ------------------------------


def test_all_problems_are_collected_in_order() -> None:
    data = plan(create("../x"), create(".env"), create("ok.txt", "a\x00"), patch("p", "nope"))
    assert codes(data) == ["ERR_PATH_TRAVERSAL", "ERR_PROTECTED_PATH", "ERR_CONTENT_NUL", "ERR_PATCH_NOT_UNIFIED"]


# --- base tree rules (a real repository read with git ls-tree) ------------------------------


class LsTree:
    """TreeView over `git ls-tree -r -t HEAD` of a real repository."""

    KINDS: ClassVar[dict[str, str]] = {"120000": "link", "160000": "submodule", "040000": "dir"}

    def __init__(self, repo: Path) -> None:
        self.entries: dict[str, str] = {}
        for line in git(repo, "ls-tree", "-r", "-t", "HEAD").splitlines():
            meta, path = line.split("\t", 1)
            self.entries[path] = self.KINDS.get(meta.split()[0], "file")

    def entry_kind(self, path: str) -> str | None:
        return self.entries.get(path)

    def names_in(self, directory: str) -> list[str]:
        prefix = f"{directory}/" if directory else ""
        return [p[len(prefix) :] for p in self.entries if p.startswith(prefix) and "/" not in p[len(prefix) :]]

    def files_under(self, path: str) -> list[str]:
        return sorted(p for p, kind in self.entries.items() if p.startswith(f"{path}/") and kind != "dir")


@pytest.fixture
def tree(tmp_path: Path) -> LsTree:
    repo = make_repo(tmp_path / "repo", {"src/main.rs": "fn main() {}\n", "docs/a.md": "a\n"})
    (repo / "linked").symlink_to("src")
    (repo / "link.rs").symlink_to("src/main.rs")
    git(repo, "add", "linked", "link.rs")
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/sub")
    git(repo, "commit", "-q", "-m", "links and a submodule")
    return LsTree(repo)


@pytest.mark.parametrize(
    "action, code",
    [
        (create("linked/evil.rs"), "ERR_PATH_THROUGH_SYMLINK"),
        (patch("link.rs"), "ERR_PATH_THROUGH_SYMLINK"),
        (update("link.rs"), "ERR_PATH_THROUGH_SYMLINK"),
        (create("vendor/sub/x.c"), "ERR_PATH_IN_SUBMODULE"),
        (delete("vendor/sub"), "ERR_PATH_IN_SUBMODULE"),
        (create("src/main.rs"), "ERR_CREATE_EXISTS"),
        (create("src"), "ERR_PATH_COLLISION"),
        (create("src/main.rs/x"), "ERR_PATH_COLLISION"),
        (mkdir("docs/a.md"), "ERR_PATH_COLLISION"),
        (delete("nope.txt"), "ERR_DELETE_MISSING"),
        (rmdir("nope"), "ERR_DELETE_MISSING"),
        (delete("src"), "ERR_PATH_COLLISION"),
        (rmdir("src/main.rs"), "ERR_PATH_COLLISION"),
        (patch("src/nope.rs"), "ERR_PATCH_MISSING_FILE"),
        (update("src/main.rs"), "ERR_V2_UPDATE_EXISTING_FORBIDDEN"),
    ],
)
def test_base_tree_rule(tree: LsTree, action: dict[str, Any], code: str) -> None:
    assert codes(plan(action), tree=tree) == [code]


def test_plan_matching_the_base_tree_passes(tree: LsTree) -> None:
    response = ok(
        plan(
            patch("src/main.rs"),
            create("src/new.rs"),
            delete("docs/a.md"),
            rmdir("docs"),
            mkdir("src"),
            delete("link.rs"),
        ),
        tree=tree,
    )
    assert [a.kind.value for a in response.ordered_actions()] == [
        "CREATE_DIR",
        "PATCH_FILE",
        "CREATE_FILE",
        "DELETE_FILE",
        "DELETE_FILE",
        "DELETE_DIR",
    ]
