"""A plan's commit as a diff (docs/DESIGN.md, "Landing"): the commit (``plan_commit``), its diff
against its parent as git writes it, uncoloured and with no external driver or textconv
(``plan_diff``: the files are the model's), the same for a terminal (``render_diff``: control
characters escaped, then coloured by papayu), ``diffstat`` and ``numstat_files``. `show`, `diff`,
the landing question (report.py) and best-of's dedupe read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.git import run_git
from papayu_git.secrets import printable, safe_text

if TYPE_CHECKING:
    import pygit2


def plan_commit(repo: pygit2.Repository, plan_id: str, recorded_commit: str | None) -> str | None:
    """papayu/<id>, or the recorded commit once landed; None before the plan has a commit."""
    # The object model loads when a commit is read, not for `apply --help`, whose report imports
    # this module (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.objects import generated_branches

    commit = generated_branches(repo).get(plan_id) or recorded_commit
    return commit if commit and commit in repo else None


def plan_diff(
    repo: pygit2.Repository, plan_id: str, recorded_commit: str | None, formats: tuple[str, ...] = ("--stat", "--patch")
) -> str:
    """`git diff` of the plan's commit (plan_commit) against its parent in ``formats``,
    uncoloured: the files are the model's (see render_diff)."""
    commit = plan_commit(repo, plan_id, recorded_commit)
    if commit is None:
        return ""
    from papayu_git.objects import commit_of  # see plan_commit

    parent = str(commit_of(repo, commit).parents[0].id)
    # No external diff driver or textconv: attributes a plan may have written never run a program.
    args = ["diff", "--no-ext-diff", "--no-textconv", *formats, "--color=never", parent, commit]
    return str(run_git(args, cwd=repo.workdir).stdout)


def render_diff(diff: str, colour: bool) -> str:
    """The diff for the terminal: control characters escaped, then coloured by papayu (git's
    own colours would pass an ESC written into a file through as it is)."""
    lines = printable(diff, multiline=True).split("\n")
    return "\n".join(_coloured(line) for line in lines) if colour else "\n".join(lines)


_DIFF_COLOURS = (
    ("diff --git ", "bold"),
    ("index ", "bold"),
    ("--- ", "bold"),
    ("+++ ", "bold"),
    ("@@", "cyan"),
    ("+", "green"),
    ("-", "red"),
)


def _coloured(line: str) -> str:
    for prefix, name in _DIFF_COLOURS:
        if line.startswith(prefix):
            return output.colour(line, name)
    return line


def diffstat(commit: str) -> str:
    """What landed, as `git show --stat` would say it (paths escaped: they are the model's)."""
    proc = run_git(["diff", "--no-ext-diff", "--no-textconv", "--stat", f"{commit}^", commit], check=False)
    return safe_text(proc.stdout.rstrip("\n"), multiline=True) if proc.returncode == 0 else ""


def numstat_files(text: str) -> list[dict[str, Any]]:
    """`git diff --numstat -z` as {path, old_path (renamed), added, deleted}; counts are None for binary files."""
    fields, files, index = text.split("\0"), [], 0
    while index < len(fields) and fields[index]:
        added, deleted, path = fields[index].split("\t", 2)
        entry: dict[str, Any] = {"path": path}
        if path:
            index += 1
        else:  # a rename: the old and the new path follow
            entry = {"path": fields[index + 2], "old_path": fields[index + 1]}
            index += 3
        entry.update(added=None if added == "-" else int(added), deleted=None if deleted == "-" else int(deleted))
        files.append(entry)
    return files
