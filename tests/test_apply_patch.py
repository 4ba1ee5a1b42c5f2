"""Unified diff application and line endings: pure bytes in, bytes or ERR out."""

from __future__ import annotations

import difflib
import json
import re

import pytest
from helpers import GOLDEN_UPSTREAM
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from papayu_git.apply import apply_patch, new_file_contents, sha256_hex
from papayu_git.errors import PapayuError
from papayu_git.protocol import Action, ActionKind

PATH = "src/app.py"
BASE = "".join(f"line {i}\n" for i in range(1, 101)).encode()


def udiff(old: str, new: str, n: int = 3) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{PATH}", f"b/{PATH}", n=n))


def apply(original: bytes, patch: str, **kw: bool) -> bytes:
    return apply_patch(original, patch, path=PATH, **kw)


def apply_error(original: bytes, patch: str, **kw: bool) -> PapayuError:
    with pytest.raises(PapayuError) as info:
        apply_patch(original, patch, path=PATH, **kw)
    assert info.value.path == PATH
    return info.value


def edited(text: bytes, line_no: int, new: str) -> bytes:
    lines = text.decode().splitlines(True)
    lines[line_no - 1] = new
    return "".join(lines).encode()


def shift_headers(patch: str, offset: int) -> str:
    def move(m: re.Match[str]) -> str:
        return f"{m.group(1)}{max(int(m.group(2)) + offset, 1)}"

    return re.sub(r"^(@@ -)(\d+)", move, patch, flags=re.M)


def test_exact_hunk_at_stated_line() -> None:
    expected = edited(BASE, 50, "changed 50\n")
    assert apply(BASE, udiff(BASE.decode(), expected.decode())) == expected


@pytest.mark.parametrize("offset", [-50, -20, -7, -1, 1, 3, 20, 45])
def test_offset_headers_still_apply_at_the_unique_match(offset: int) -> None:
    expected = edited(BASE, 52, "changed 52\n")
    patch = shift_headers(udiff(BASE.decode(), expected.decode()), offset)
    assert apply(BASE, patch) == expected


def test_whitespace_insensitive_context() -> None:
    original = b"def f(x):\n    y = x  \n    return   y\n\nprint(f(1))\n"
    patch = "@@ -1,3 +1,3 @@\n def f(x):\n-    y = x\n+    y = x + 1\n     return y\n"
    # Context/removed lines differ from the file in trailing whitespace and runs of spaces:
    # untouched lines keep the file's own text.
    assert apply(original, patch) == b"def f(x):\n    y = x + 1\n    return   y\n\nprint(f(1))\n"


def test_exact_match_wins_over_whitespace_insensitive_one() -> None:
    original = b"a = 1 \nb\na = 1\nb\n"
    assert apply(original, "@@ -3,2 +3,2 @@\n a = 1\n-b\n+c\n") == b"a = 1 \nb\na = 1\nc\n"
    # with a wrong line number the exact match is unique, the loose one is not
    assert apply(original, "@@ -1,2 +1,2 @@\n a = 1\n-b\n+c\n") == b"a = 1 \nb\na = 1\nc\n"


@pytest.mark.parametrize(
    "header", ["@@ -48,2 +48,9 @@", "@@ -48,40 +48,1 @@", "@@ -48 +48 @@", "@@ @@", "@@ -48,7 +48,7 @@ def section():"]
)
def test_wrong_counts_and_headers_without_numbers(header: str) -> None:
    expected = edited(BASE, 50, "changed 50\n")
    body = udiff(BASE.decode(), expected.decode()).split("\n", 3)[3]
    assert apply(BASE, f"{header}\n{body}") == expected


def test_diff_without_file_headers_and_git_headers() -> None:
    expected = edited(BASE, 10, "ten\n")
    diff = udiff(BASE.decode(), expected.decode())
    hunk_only = diff[diff.index("@@") :]
    git_style = f"diff --git a/{PATH} b/{PATH}\nindex 1111111..2222222 100644\n{diff}"
    assert apply(BASE, hunk_only) == expected
    assert apply(BASE, git_style) == expected


def test_blank_context_line_without_leading_space() -> None:
    original = b"a\n\nb\nc\n"
    assert apply(original, "@@ -1,4 +1,4 @@\n a\n\n b\n-c\n+d\n") == b"a\n\nb\nd\n"


def test_file_without_final_newline_keeps_that_state() -> None:
    original = b"a\nb\nc"
    patch = "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"  # marker missing: tolerated
    assert apply(original, patch) == b"a\nB\nc"
    assert apply(original, "@@ -2,2 +2,2 @@\n b\n-c\n+C\n") == b"a\nb\nC"
    proper = "@@ -2,2 +2,2 @@\n b\n-c\n\\ No newline at end of file\n+C\n\\ No newline at end of file\n"
    assert apply(original, proper) == b"a\nb\nC"


def test_marker_changes_final_newline_state() -> None:
    add = "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    assert apply(b"a\nb", add) == b"a\nb\n"
    # The marker lost: git's "-b / +b" shape still means "add the final newline".
    assert apply(b"a\nb", "@@ -1,2 +1,2 @@\n a\n-b\n+b\n") == b"a\nb\n"
    remove = "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"
    assert apply(b"a\nb\n", remove) == b"a\nb"


def test_missing_marker_on_deleted_last_line() -> None:
    assert apply(b"a\nb\nc", "@@ -2,2 +2,1 @@\n b\n-c\n") == b"a\nb"


def test_crlf_file_stays_crlf_with_lf_diff() -> None:
    original = b"one\r\ntwo\r\nthree\r\n"
    assert apply(original, "@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n+2.5\n three\n") == b"one\r\nTWO\r\n2.5\r\nthree\r\n"


def test_mixed_eol_file_keeps_untouched_lines() -> None:
    original = b"a\r\nb\nc\r\nd\n"
    assert apply(original, "@@ -2,2 +2,2 @@\n b\n-c\n+C\n") == b"a\r\nb\nC\nd\n"
    assert apply(original, "@@ -2,2 +2,2 @@\r\n b\r\n-c\r\n+C\r\n") == b"a\r\nb\nC\r\nd\n"


def test_normalize_eol_gives_lf_and_final_newline() -> None:
    original = b"one\r\ntwo\r\nthree"
    assert apply(original, "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n", normalize_eol=True) == b"one\nTWO\nthree\n"


def test_ambiguous_match_names_the_candidates() -> None:
    original = b"x\nblock\nvalue = 1\nend\ny\nblock\nvalue = 1\nend\nz\n"
    err = apply_error(original, "@@ @@\n block\n-value = 1\n+value = 2\n end\n")
    assert err.code == "ERR_PATCH_APPLY_FAILED"
    assert "hunk 1 of 1 (@@ @@)" in err.reason and "ambiguous" in err.reason
    assert "lines 2-4" in err.reason and "lines 6-8" in err.reason
    assert "      6 | block" in err.reason
    # the stated line disambiguates
    assert (
        apply(original, "@@ -6,3 +6,3 @@\n block\n-value = 1\n+value = 2\n end\n")
        == b"x\nblock\nvalue = 1\nend\ny\nblock\nvalue = 2\nend\nz\n"
    )


def test_absent_match_shows_the_closest_lines() -> None:
    err = apply_error(BASE, "@@ -40,3 +40,3 @@\n line 40\n-line 41 typo\n+new\n line 42\n")
    assert err.code == "ERR_PATCH_APPLY_FAILED"
    assert "hunk 1 of 1 (@@ -40,3 +40,3 @@) does not match" in err.reason
    assert "     41 | line 41" in err.reason and "2 of 3 lines match" in err.reason
    assert "^ hunk line 2 expects: 'line 41 typo'" in err.reason


def test_already_applied_patch_is_reported_as_such() -> None:
    err = apply_error(edited(BASE, 41, "new\n"), "@@ -40,3 +40,3 @@\n line 40\n-line 41\n+new\n line 42\n")
    assert err.code == "ERR_PATCH_APPLY_FAILED" and "already applied" in err.reason


@pytest.mark.parametrize("patch", ["just text\n", "--- a/x\n+++ b/x\n", "@@ -1 +1 @@\n"])
def test_diff_without_hunks_is_not_unified(patch: str) -> None:
    code = apply_error(BASE, patch).code
    assert code in ("ERR_PATCH_NOT_UNIFIED", "ERR_PATCH_APPLY_FAILED")
    assert apply_error(BASE, "no diff at all").code == "ERR_PATCH_NOT_UNIFIED"


@pytest.mark.parametrize(
    "patch", ["@@ -1,2 +1,2 @@\n line 1\n line 2\n", "@@ -1,2 +1,2 @@\n line 1\n-line 2\n+line 2\n line 3\n"]
)
def test_hunk_that_changes_nothing_is_an_error(patch: str) -> None:
    err = apply_error(BASE, patch)
    assert err.code == "ERR_PATCH_APPLY_FAILED" and "changes nothing" in err.reason


def test_patch_already_applied_is_an_error() -> None:
    original = b"a\nb  \n"
    err = apply_error(original, "@@ -1,2 +1,2 @@\n a\n-b\n+b  \n")
    assert err.code == "ERR_PATCH_APPLY_FAILED" and "changes nothing" in err.reason


def test_multi_hunk_in_order() -> None:
    expected = edited(edited(edited(BASE, 5, "five\n"), 50, "fifty\n"), 95, "ninety-five\n")
    patch = udiff(BASE.decode(), expected.decode())
    assert patch.count("@@ -") == 3
    assert apply(BASE, patch) == expected
    assert apply(BASE, re.sub(r"@@ -\d+,\d+ \+\d+,\d+ @@", "@@ @@", patch)) == expected


def test_hunks_out_of_order_are_an_error() -> None:
    expected = edited(edited(BASE, 5, "five\n"), 50, "fifty\n")
    first, second = udiff(BASE.decode(), expected.decode()).split("@@ -")[1:]
    err = apply_error(BASE, f"@@ -{second}@@ -{first}")
    assert err.code == "ERR_PATCH_APPLY_FAILED" and "hunk 2 of 2" in err.reason
    assert "file order" in err.reason


def test_lines_created_at_start_and_end_and_in_empty_file() -> None:
    assert apply(b"a\nb\n", udiff("a\nb\n", "top\na\nb\n")) == b"top\na\nb\n"
    assert apply(b"a\nb\n", udiff("a\nb\n", "a\nb\nbottom\n")) == b"a\nb\nbottom\n"
    assert apply(b"", "--- /dev/null\n+++ b/src/app.py\n@@ -0,0 +1,2 @@\n+x\n+y\n") == b"x\ny\n"
    assert apply(b"", "@@ @@\n+x\n") == b"x\n"


def test_deletion_of_all_lines() -> None:
    assert apply(b"a\nb\n", "@@ -1,2 +0,0 @@\n-a\n-b\n") == b""


def test_non_utf8_and_binary_targets() -> None:
    assert apply_error(b"caf\xe9\n", "@@ -1 +1 @@\n-x\n+y\n").code == "ERR_NON_UTF8_FILE"
    assert apply_error(b"a\x00b\n", "@@ -1 +1 @@\n-x\n+y\n").code == "ERR_NON_UTF8_FILE"


@pytest.mark.parametrize(
    "header",
    [
        "new file mode 120000",
        "old mode 100644\nnew mode 100755",
        "deleted file mode 100644",
        "rename from a\nrename to b",
    ],
)
def test_mode_symlink_rename_and_delete_diffs_are_refused(header: str) -> None:
    patch = f"diff --git a/{PATH} b/{PATH}\n{header}\n@@ -1 +1 @@\n-line 1\n+one\n"
    assert apply_error(BASE, patch).code == "ERR_PATCH_UNSUPPORTED"


def test_diff_for_another_file_is_refused() -> None:
    patch = "--- a/other.py\n+++ b/other.py\n@@ -1 +1 @@\n-line 1\n+one\n"
    assert apply_error(BASE, patch).code == "ERR_PATCH_NOT_UNIFIED"


def test_upstream_golden_v2_004_patch_against_empty_file() -> None:
    trace = json.loads((GOLDEN_UPSTREAM / "v2" / "004_patch_apply_failed_block.json").read_text())
    action = trace["result"]["validated_json"]["actions"][0]
    assert action["base_sha256"] == sha256_hex(b"")
    with pytest.raises(PapayuError) as info:
        apply_patch(b"", action["patch"], path=action["path"])
    assert info.value.code == trace["result"]["error_code"] == "ERR_PATCH_APPLY_FAILED"
    assert "The file is empty" in info.value.reason


def test_new_file_contents_for_each_kind() -> None:
    blobs = {PATH: BASE}
    actions = [
        Action(ActionKind.CREATE_FILE, "new.txt", content="a\r\nb"),
        Action(
            ActionKind.PATCH_FILE, PATH, patch="@@ -1,2 +1,2 @@\n line 1\n-line 2\n+two\n", base_sha256=sha256_hex(BASE)
        ),
        Action(ActionKind.DELETE_FILE, "gone.txt"),
        Action(ActionKind.CREATE_DIR, "dir"),
    ]
    out = new_file_contents(actions, blobs.get)
    assert out == {"new.txt": b"a\r\nb", PATH: edited(BASE, 2, "two\n")}
    assert new_file_contents(actions, blobs.get, normalize_eol=True)["new.txt"] == b"a\nb\n"
    with pytest.raises(PapayuError) as info:
        new_file_contents([Action(ActionKind.PATCH_FILE, "missing.py", patch="@@ @@\n-a\n+b\n")], blobs.get)
    assert info.value.code == "ERR_PATCH_MISSING_FILE" and info.value.path == "missing.py"


def test_sha256_hex() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# --- property tests -------------------------------------------------------------------------

_words = st.sampled_from(["", "x", "y = 1", "    return y", "}", "  ", "def f():", "# note", "\tz"])


@st.composite
def text_and_edit(draw: st.DrawFn, unique: bool) -> tuple[str, str]:
    if unique:
        n = draw(st.integers(1, 60))
        lines = [f"{draw(_words)} #{i}" for i in range(n)]
    else:
        lines = draw(st.lists(_words, min_size=0, max_size=40))
    new = list(lines)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(new)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        if op == "insert" or not new or at == len(new):
            new.insert(at, f"added {draw(st.integers(0, 999))}")
        elif op == "delete":
            del new[at]
        else:
            new[at] = f"replaced {draw(st.integers(0, 999))}"
    final_old = draw(st.booleans()) or not lines
    final_new = draw(st.booleans()) or not new
    old_text = "\n".join(lines) + ("\n" if final_old and lines else "")
    new_text = "\n".join(new) + ("\n" if final_new and new else "")
    return old_text, new_text


def _difflib_patch(old: str, new: str) -> str:
    out = []
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{PATH}", f"b/{PATH}"):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_edit(unique=False))
def test_property_difflib_diff_applies_back_exactly(case: tuple[str, str]) -> None:
    old, new = case
    assume(old != new)
    assert apply(old.encode(), _difflib_patch(old, new)) == new.encode()


def _applied_or_refused(old: str, patch: str) -> bytes | None:
    """The patched bytes, or None when papayu refused the patch — the only refusal allowed here."""
    try:
        return apply(old.encode(), patch)
    except PapayuError as exc:
        assert exc.code == "ERR_PATCH_APPLY_FAILED"
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_edit(unique=True), st.integers(-30, 30))
def test_property_shifted_headers_apply_exactly_or_fail(case: tuple[str, str], offset: int) -> None:
    old, new = case
    assume(old != new)
    patch = shift_headers(_difflib_patch(old, new), offset)
    result = _applied_or_refused(old, patch)
    assert result is None or result == new.encode()


def test_ambiguous_hunk_is_placed_between_its_neighbours() -> None:
    # The middle block occurs twice; only the copy between the two other hunks keeps the order.
    original = b"head\nfirst\nsame\nblock\ntail-a\nsecond\nsame\nblock\ntail-b\nthird\n"
    patch = "@@ @@\n-head\n+HEAD\n first\n@@ @@\n same\n-block\n+BLOCK\n@@ @@\n tail-a\n-second\n+SECOND\n"
    assert apply(original, patch) == b"HEAD\nfirst\nsame\nBLOCK\ntail-a\nSECOND\nsame\nblock\ntail-b\nthird\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_edit(unique=False))
def test_property_parser_agrees_with_unidiff_on_well_formed_diffs(case: tuple[str, str]) -> None:
    # unidiff is the reference parser for well-formed diffs; ours must read them identically.
    import unidiff

    from papayu_git.unified_diff import parse_hunks

    old, new = case
    assume(old != new)
    patch = _difflib_patch(old, new)
    ours = parse_hunks(patch, path=PATH)
    theirs = [h for f in unidiff.PatchSet(patch) for h in f]
    assert len(ours) == len(theirs) >= 1
    for mine, ref in zip(ours, theirs, strict=False):
        ref_lines = [(ln.line_type, ln.value.rstrip("\n")) for ln in ref if ln.line_type in " -+"]
        assert [(dl.tag, dl.text) for dl in mine.lines] == ref_lines
        assert mine.old_start == ref.source_start
        markers = [prev.line_type for prev, ln in zip(list(ref), list(ref)[1:], strict=False) if ln.line_type == "\\"]
        assert mine.old_no_eol == any(t in " -" for t in markers)
        assert mine.new_no_eol == any(t in " +" for t in markers)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_edit(unique=False), st.integers(-10, 10))
def test_property_repetitive_text_with_shifted_headers_is_exact_or_explained(
    case: tuple[str, str], offset: int
) -> None:
    """Repeated lines: a shifted header may point exactly at another copy of a hunk's lines.
    Then the header is the only disambiguation there is, and papayu follows it (like git);
    in every other case the result is the intended file or ERR_PATCH_APPLY_FAILED."""
    from papayu_git.unified_diff import parse_hunks

    old, new = case
    assume(old != new)
    patch = shift_headers(_difflib_patch(old, new), offset)
    result = _applied_or_refused(old, patch)
    if result is None:
        return
    if result != new.encode():
        lines = old.split("\n")
        true_patch = parse_hunks(_difflib_patch(old, new), path=PATH)
        moved = parse_hunks(patch, path=PATH)
        decoys = [
            h
            for h, t in zip(moved, true_patch, strict=False)
            if h.old_lines
            and h.old_start is not None
            and h.old_start != t.old_start
            and tuple(lines[h.old_start - 1 : h.old_start - 1 + len(h.old_lines)]) == h.old_lines
        ]
        assert decoys, f"wrong result without a decoy copy at the stated line:\n{patch}"


def test_insertion_without_context_only_at_the_edges() -> None:
    assert apply(b"a\nb\n", "@@ -0,0 +1 @@\n+top\n") == b"top\na\nb\n"
    assert apply(b"a\nb\n", "@@ -2,0 +3 @@\n+end\n") == b"a\nb\nend\n"
    err = apply_error(b"a\nb\nc\n", "@@ -1,0 +2 @@\n+middle\n")
    assert err.code == "ERR_PATCH_APPLY_FAILED" and "no context" in err.reason
    assert apply(b"", "@@ -1,0 +1,2 @@\n+x\n+y\n") == b"x\ny\n"


def test_context_line_without_leading_space_inside_a_hunk() -> None:
    assert apply(b"a\nb\nc\nd\n", "```diff\n@@ -1,4 +1,4 @@\n a\nb\n-c\n+C\n d\n```\n") == b"a\nb\nC\nd\n"


def test_sql_comment_lines_are_not_file_headers_inside_a_counted_hunk() -> None:
    original = b"select 1;\n-- old note\nselect 2;\n"
    patch = "@@ -1,3 +1,3 @@\n select 1;\n--- old note\n+++ new note\n select 2;\n"
    assert apply(original, patch) == b"select 1;\n++ new note\nselect 2;\n"


def test_trailing_blank_rows_and_format_patch_signature_are_not_context() -> None:
    expected = edited(BASE, 99, "ninety-nine\n")
    patch = udiff(BASE.decode(), expected.decode())
    assert apply(BASE, patch + "\n\n") == expected
    assert apply(BASE, patch + "-- \n2.39.5\n\n") == expected


def test_large_hunk_is_parsed_in_linear_time() -> None:
    big = "".join(f"row {i}\n" for i in range(20000))
    new = big.replace("row 5\n", "row five\n").replace("row 19995\n", "changed\n")
    patch = udiff(big, new, n=20000)  # one hunk of ~20k lines
    assert apply(big.encode(), patch) == new.encode()


def test_lines_appended_after_a_last_line_without_newline() -> None:
    assert apply(b"a\nb", "@@ -1,2 +1,3 @@\n a\n b\n+c\n") == b"a\nb\nc"
    assert apply(b"a\r\nb", "@@ -2,0 +3 @@\n+c\n") == b"a\r\nb\r\nc"
    assert apply(b"b", "@@ -1 +1,2 @@\n b\n+c\n") == b"b\nc"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_edit(unique=False))
def test_property_diff_that_ignores_a_missing_final_newline_keeps_it_missing(case: tuple[str, str]) -> None:
    # Models diff as if every line ended in a newline; the file's final-newline state stays.
    old, new = (t.rstrip("\n") for t in case)
    assume(old and new and old != new)
    patch = _difflib_patch(old + "\n", new + "\n")
    assert "\\ No newline" not in patch
    assert apply(old.encode(), patch) == new.encode()


def test_git_quoted_non_ascii_path_names_the_same_file() -> None:
    patch = (
        'diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"\n--- "a/caf\\303\\251.py"\n'
        '+++ "b/caf\\303\\251.py"\n@@ -1 +1 @@\n-x\n+y\n'
    )
    assert apply_patch(b"x\n", patch, path="café.py") == b"y\n"


_diffish = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "@@ @@",
                "@@ -1,2 +1,2 @@",
                "@@ -0,0 +1 @@",
                "@@ -3 +3,0 @@",
                "--- a/src/app.py",
                "+++ b/src/app.py",
                "\\ No newline at end of file",
                "-- ",
                "",
                "diff --git a/x b/x",
                "new file mode 100644",
                "```",
            ]
        ),
        st.text(alphabet=" -+\\@abc\r\t", max_size=6),
    ),
    max_size=20,
).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_diffish, st.sampled_from([b"", b"a\nb\nc\n", b"a\r\nb\r\n", b"a\nb", b"a\n\na\n"]))
def test_property_any_patch_text_gives_bytes_or_a_papayu_error(patch: str, original: bytes) -> None:
    try:
        result = apply(original, patch)
    except PapayuError as exc:
        assert exc.code in ("ERR_PATCH_NOT_UNIFIED", "ERR_PATCH_APPLY_FAILED", "ERR_PATCH_UNSUPPORTED")
        return
    assert result != original
