"""Names that are another name on macOS (HFS+) or Windows (NTFS): disguised .git and git dotfiles,
NTFS streams, invisible characters, case and Unicode twins of the base tree, protected files
under DELETE_DIR and Windows aliases of protected names. Each case asserts its code."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, object_ids, papayu, path_code, snapshot, write_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.paths import check_path, fold_key, git_dotfile_alias, is_protected
from papayu_git.validate import validate_response

# Every code point HFS+ ignores in a name, and the bidi/direction/separator characters.
HFS_IGNORED = [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
BIDI_AND_SEPARATORS = [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x061C, 0x2028, 0x2029]


def codes(actions: list[dict[str, Any]], **kwargs: Any) -> list[tuple[str, str]]:
    with pytest.raises(ValidationFailed) as info:
        validate_response({"actions": actions, "summary": "s"}, protocol=2, mode="apply", **kwargs)
    return [(e.code, e.path) for e in info.value.errors]


def create(path: str) -> dict[str, Any]:
    return {"kind": "CREATE_FILE", "path": path, "content": "x\n"}


# --- .git in disguise --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".g\u200cit/config",
        ".git\ufeff/config",
        "sub/.G\u200dIT/hooks/x",
        "\u202e.git/HEAD",
        ".gi\u206ft",
        ".git::$INDEX_ALLOCATION/x",
        ".git:stream",
        "a/GIT~1:$DATA/config",
        ".git . ./config",
        "Git~1 /x",
    ],
)
def test_names_hfs_or_ntfs_open_as_dot_git_are_refused(path: str) -> None:
    assert path_code(path) == "ERR_PATH_GIT_DIR"


@pytest.mark.parametrize("point", HFS_IGNORED)
def test_every_hfs_ignored_code_point_is_seen_through(point: int) -> None:
    assert path_code(f".g{chr(point)}it/config") == "ERR_PATH_GIT_DIR"


@pytest.mark.parametrize(
    "path, dotfile",
    [
        (".GITMODULES", ".gitmodules"),
        (".gitmodules.", ".gitmodules"),
        (".gitmodules ", ".gitmodules"),
        (".git\u200cmodules", ".gitmodules"),
        ("gitmod~1", ".gitmodules"),
        ("GITMOD~4", ".gitmodules"),
        ("gi7eba~1", ".gitmodules"),
        ("gi7eb~12", ".gitmodules"),
        ("g~123456", ".gitmodules"),
        ("sub/.GitAttributes", ".gitattributes"),
        ("gitatt~1", ".gitattributes"),
        ("gi7d29~9", ".gitattributes"),
        (".gitignore.", ".gitignore"),
        ("gitign~2", ".gitignore"),
        ("gi250a~1", ".gitignore"),
        (".MAILMAP", ".mailmap"),
        ("mailma~1", ".mailmap"),
        ("maba30~1", ".mailmap"),
    ],
)
def test_disguised_git_dotfiles_are_refused(path: str, dotfile: str) -> None:
    assert git_dotfile_alias(path.rsplit("/", 1)[-1]) == dotfile
    assert path_code(path) == "ERR_PATH_GIT_ALIAS"


@pytest.mark.parametrize(
    "path",
    [
        ".gitmodules",
        ".gitattributes",
        "docs/.gitattributes",
        ".gitignore",
        "src/.gitignore",
        ".mailmap",
        ".github/workflows/ci.yml",
        ".gitkeep",
        "gitmod~5",
        "gitmodules",
        "a~1",
        "gi7eba~0",
        "gi7ebax~1",
        "my.git/x",
        "legit/x",
    ],
)
def test_literal_git_dotfiles_and_look_alikes_stay_allowed(path: str) -> None:
    assert check_path(path) == path


# --- NTFS streams and invisible characters --------------------------------------------------------


@pytest.mark.parametrize("path", ["a.txt:hidden", "src/x:y/z.py", "notes::$DATA", ".env:x"])
def test_a_colon_in_a_segment_is_an_ntfs_stream(path: str) -> None:
    assert path_code(path) == "ERR_PATH_NTFS_STREAM"


@pytest.mark.parametrize("point", [*BIDI_AND_SEPARATORS, 8203, 8204, 8205, 8288, 65279, 173, 55296])
def test_invisible_and_direction_characters_are_refused(point: int) -> None:
    assert path_code(f"src/invoice{chr(point)}fdp.exe") == "ERR_PATH_INVISIBLE_CHAR"


def test_visible_unicode_names_stay_allowed() -> None:
    for path in ("données/файл.txt", "日本/語.md", "emoji/🍍.txt", "cafe\u0301.txt"):
        assert check_path(path) == path


def test_the_error_shows_invisible_characters_escaped() -> None:
    with pytest.raises(PapayuError) as info:
        check_path("a\u202eb.txt")
    assert info.value.path == "a\\u202eb.txt"


def _disguised(parts: tuple[Any, ...]) -> str:
    *letters, tail = parts
    return "".join(letter + filler for letter, filler in letters) + tail


DISGUISED_GIT = st.tuples(
    *(
        st.tuples(st.sampled_from([c, c.upper()]), st.sampled_from(["", "", "\u200c", "\u200f", "\u206a", "\ufeff"]))
        for c in ".git"
    ),
    st.sampled_from(["", "", ".", " ", ". .", "::$INDEX_ALLOCATION", ":x"]),
).map(_disguised)


@settings(max_examples=300, deadline=None)
@given(name=DISGUISED_GIT, where=st.sampled_from(["", "src/", "a/b/"]))
def test_no_spelling_of_dot_git_is_accepted(name: str, where: str) -> None:
    code = path_code(f"{where}{name}/config")
    visible = "".join(c for c in name if ord(c) not in HFS_IGNORED)
    hfs_git = visible.lower() == ".git"
    ntfs_git = visible == name and name.split(":")[0].rstrip(". ").lower() == ".git"
    if hfs_git or ntfs_git:
        assert code == "ERR_PATH_GIT_DIR"
    else:  # not .git on either file system, refused all the same
        assert code in ("ERR_PATH_INVISIBLE_CHAR", "ERR_PATH_NTFS_STREAM")


# --- protected names: Windows aliases -------------------------------------------------------------


@pytest.mark.parametrize("path", [".env ", "k.pem.", "deploy/.env.local. ", "id_ed25519 .", "secrets./x"])
def test_windows_aliases_of_protected_names_are_protected(path: str) -> None:
    assert is_protected(path)
    assert codes([create(path)]) == [("ERR_PROTECTED_PATH", path)]


# --- the base tree: case and Unicode twins, DELETE_DIR ------------------------------------------

NFC, NFD = unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")


@pytest.fixture
def base(tmp_path: Path) -> Any:
    import pygit2

    from papayu_git.objects import GitTree

    repo = make_repo(
        tmp_path / "repo",
        {
            "a.txt": "a\n",
            "src/app.py": "x\n",
            f"docs/{NFC}": "c\n",
            "config/.env": "T=1\n",
            "config/app.ini": "x\n",
            "certs/k.pem": "k\n",
            "app/secrets/db.yml": "x\n",
            "app/main.py": "x\n",
            "build/out.o": "o\n",
            "home/.aws/credentials": "k\n",
            "sub/.papa-yu/project.json": "{}\n",
        },
    )
    os.symlink("src", repo / "link")
    git(repo, "add", "link")
    git(repo, "commit", "-q", "-m", "link")
    handle = pygit2.Repository(str(repo))
    return GitTree(handle, handle.head.peel(pygit2.Commit).tree)


@pytest.mark.parametrize(
    "action, code",
    [
        (create("A.txt"), "ERR_PATH_COLLISION"),
        (create("a.TXT "), "ERR_PATH_COLLISION"),
        ({"kind": "DELETE_FILE", "path": "A.txt"}, "ERR_PATH_COLLISION"),
        (create(f"docs/{NFD}"), "ERR_PATH_COLLISION"),
        (create(f"DOCS/{NFC}"), "ERR_PATH_COLLISION"),
        (create("SRC/new.py"), "ERR_PATH_COLLISION"),
        ({"kind": "CREATE_DIR", "path": "Src"}, "ERR_PATH_COLLISION"),
        (create("Link/x.py"), "ERR_PATH_THROUGH_SYMLINK"),
        (create("LINK"), "ERR_PATH_THROUGH_SYMLINK"),
        ({"kind": "DELETE_DIR", "path": "config"}, "ERR_PROTECTED_PATH"),
        ({"kind": "DELETE_DIR", "path": "certs"}, "ERR_PROTECTED_PATH"),
        ({"kind": "DELETE_DIR", "path": "app"}, "ERR_PROTECTED_PATH"),
        ({"kind": "DELETE_DIR", "path": "home"}, "ERR_PROTECTED_PATH"),
    ],
)
def test_base_tree_rule(base: Any, action: dict[str, Any], code: str) -> None:
    assert [c for c, _ in codes([action], tree=base)] == [code]


def test_delete_dir_names_the_protected_file(base: Any) -> None:
    assert codes([{"kind": "DELETE_DIR", "path": "config"}], tree=base) == [("ERR_PROTECTED_PATH", "config/.env")]
    assert codes([{"kind": "DELETE_DIR", "path": "app"}], tree=base) == [("ERR_PROTECTED_PATH", "app/secrets/db.yml")]


@pytest.mark.parametrize("path", [".papa-yu", ".PAPA-YU.", "PAPA-Y~1"])
def test_delete_dir_of_the_config_directory_is_refused(base: Any, path: str) -> None:
    assert [c for c, _ in codes([{"kind": "DELETE_DIR", "path": path}], tree=base)] == ["ERR_PATH_PAPAYU_CONFIG"]


def test_exact_paths_and_new_names_pass(base: Any) -> None:
    response = validate_response(
        {
            "actions": [
                {"kind": "DELETE_FILE", "path": "a.txt"},
                {"kind": "DELETE_FILE", "path": f"docs/{NFC}"},
                {"kind": "DELETE_DIR", "path": "build"},
                {"kind": "DELETE_DIR", "path": "sub"},
                create("src/App2.py"),
                create(f"docs/other-{NFD}"),
            ],
            "summary": "s",
        },
        protocol=2,
        mode="apply",
        tree=base,
    )
    assert len(response.actions) == 6


class CountingTree:
    """A TreeView that counts how often the validator lists a directory."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.listed = inner, []

    def entry_kind(self, path: str) -> str | None:
        return self.inner.entry_kind(path)

    def names_in(self, directory: str) -> list[str]:
        self.listed.append(directory)
        return self.inner.names_in(directory)

    def files_under(self, path: str) -> list[str]:
        return self.inner.files_under(path)


def test_folded_names_are_built_lazily_per_directory(base: Any) -> None:
    tree = CountingTree(base)
    exact = [{"kind": "DELETE_FILE", "path": "a.txt"}, {"kind": "DELETE_FILE", "path": "src/app.py"}]
    validate_response({"actions": exact, "summary": "s"}, protocol=2, mode="apply", tree=tree)
    assert tree.listed == []  # exact entries: no index at all
    validate_response(
        {"actions": [create(f"src/n{i}.py") for i in range(20)] + [create("new/deep/x.py")], "summary": "s"},
        protocol=2,
        mode="apply",
        tree=tree,
    )
    assert sorted(tree.listed) == ["", "src"]  # one listing per directory, only where names are new


# --- inside one plan ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first, second",
    [
        (create("README.md"), create("readme.md")),
        (create(f"x/{NFC}"), create(f"x/{NFD}")),
        (create("Dir/a.py"), create("dir/b.py")),
        (create("Dir/a.py"), create("dir/sub/b.py")),
        ({"kind": "CREATE_DIR", "path": "Dir"}, create("dir/x.py")),
        ({"kind": "DELETE_FILE", "path": "a.txt"}, create("A.txt")),
        (create("notes"), create("notes.")),
    ],
)
def test_twins_inside_one_plan_collide(first: dict[str, Any], second: dict[str, Any]) -> None:
    for pair in ([first, second], [second, first]):
        found = [c for c, _ in codes(pair)]
        assert found and set(found) <= {"ERR_PATH_COLLISION"}, found


def test_fold_key_of_ascii_is_lower_case() -> None:
    assert fold_key("Src/App.PY") == "src/app.py"
    assert fold_key(f"Docs/{NFD}") == fold_key(f"docs/{NFC}") == f"docs/{NFC}"
    assert fold_key("a. /b.") == "a/b"


# --- end to end ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, code",
    [
        (".g\u200cit/config", "ERR_PATH_GIT_DIR"),
        (".git\ufeff/config", "ERR_PATH_GIT_DIR"),
        ("sub/.G\u200dIT/hooks/x", "ERR_PATH_GIT_DIR"),
        (".git::$INDEX_ALLOCATION/x", "ERR_PATH_GIT_DIR"),
        (".GITMODULES", "ERR_PATH_GIT_ALIAS"),
        ("A.txt", "ERR_PATH_COLLISION"),
    ],
)
def test_apply_refuses_and_nothing_lands(tmp_path: Path, path: str, code: str) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "config/.env": "T=1\n"})
    before, objects = snapshot(repo), object_ids(repo)
    plan = write_plan(
        tmp_path,
        [
            {"kind": "CREATE_FILE", "path": path, "content": "[core]\n\tbare = true\n"},
            {"kind": "CREATE_FILE", "path": "innocent.txt", "content": "i\n"},
        ],
    )
    proc = papayu("apply", str(plan), "--no-check", "-y", "--json", cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == [code]
    assert object_ids(repo) == objects and snapshot(repo) == before
    fsck = git(repo, "fsck", "--strict", "--no-dangling")
    assert "hasDotgit" not in fsck


def test_apply_refuses_delete_dir_over_a_protected_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"config/.env": "T=1\n", "config/app.ini": "x\n"})
    objects = object_ids(repo)
    plan = write_plan(tmp_path, [{"kind": "DELETE_DIR", "path": "config"}])
    proc = papayu("apply", str(plan), "--no-check", "-y", "--json", cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [(e["code"], e["path"]) for e in errors] == [("ERR_PROTECTED_PATH", "config/.env")]
    assert object_ids(repo) == objects and (repo / "config" / ".env").read_text() == "T=1\n"
