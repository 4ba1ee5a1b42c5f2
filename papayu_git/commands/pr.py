"""`git papayu pr ID`: push `papayu/<id>` and open a pull/merge request (docs/DESIGN.md, "Hooks and PRs").

The forge's CI then runs the check; `git papayu land ID --when-green` (commands/when_green.py)
merges the pull request at the same commit once the checks its target requires are green.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, plans
from papayu_git.checked import enforce, nothing_to_land, verdict
from papayu_git.commands.drop import resolve_generated
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.forge import TOKEN_ENV, compare_url, connect, open_pull_request, resolve_forge
from papayu_git.forge.http import ensure_usable
from papayu_git.forge.remote_refs import remote_url
from papayu_git.git import run_git, scrubbed_env
from papayu_git.housekeeping import open_checkout
from papayu_git.land_hooks import hook_policy, say_skipped
from papayu_git.objects import branch_name, commit_of, generated_branches
from papayu_git.secrets import mask, safe_text

if TYPE_CHECKING:
    import pygit2

    from papayu_git.plans import StoredPlan

FORGES = ("github", "gitlab", "gitea")


@dataclass(frozen=True)
class Generated:
    """A kept `papayu/<id>` branch, its commit and its plan record (None if the record is gone)."""

    repo: pygit2.Repository
    root: Path
    pdir: Path
    plan_id: str
    sha: str
    plan: StoredPlan | None

    @property
    def branch(self) -> str:
        return branch_name(self.plan_id)

    @property
    def record(self) -> dict[str, Any]:
        return dict((self.plan.extra.get("pr") if self.plan else None) or {})

    def target(self) -> str:
        apply = (self.plan.extra.get("apply") or {}) if self.plan else {}
        return str(apply.get("target") or (self.plan.branch if self.plan else "") or "")


def load_generated(plan_id: str, *, landing: bool = False) -> Generated:
    """The kept branch of ``plan_id``; without one, ERR_BRANCH_NOT_FOUND (`pr`), or what became
    of the plan (``landing``: ERR_NOTHING_TO_LAND, as `land ID` says)."""
    repo, root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    sha = generated_branches(repo).get(resolved)
    try:
        plan: StoredPlan | None = plans.load(pdir, resolved)
    except PapayuError:
        plan = None
    if sha is None and landing:
        raise nothing_to_land(resolved, plan)
    if sha is None:
        raise PapayuError(
            "ERR_BRANCH_NOT_FOUND",
            f"no branch {branch_name(resolved)}",
            hint="Keep the commit with 'git papayu apply ID --review' first.",
        )
    return Generated(repo, root, pdir, resolved, sha, plan)


def pick_remote(gen: Generated, remote: str | None) -> str:
    """--remote, else the one `pr` used, else the target branch's upstream remote, else origin."""
    if remote or gen.record.get("remote"):
        return str(remote or gen.record["remote"])
    target = gen.target()
    configured = run_git(["config", f"branch.{target}.remote"], cwd=gen.root, check=False).stdout.strip()
    return configured if target and configured and configured != "." else "origin"


def push(gen: Generated, remote: str) -> None:
    """Hooks (pre-push) only as landing allows them: a work tree on papayu/<id> (checked out for
    review) holds the plan's own hook files (land_hooks.py)."""
    ref = f"refs/heads/{gen.branch}"
    env = scrubbed_env({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    commit = commit_of(gen.repo, gen.sha)
    hooks = hook_policy(gen.repo, gen.root, commit.parents[0].tree, commit.tree)
    args = [*hooks.git_args, "push", "--porcelain", remote, f"{ref}:{ref}"]
    with output.progress(f"pushing {gen.branch} to {remote}"):
        proc = run_git(args, cwd=gen.root, check=False, env=env)
    if proc.returncode != 0:
        detail = mask((proc.stderr + proc.stdout).strip()[-1500:])
        raise PapayuError("ERR_PUSH_FAILED", f"git push {remote} {gen.branch} failed: {detail}", path=remote)
    say_skipped(gen.repo, gen.root, "pre-push", hooks)


def title_of(gen: Generated) -> str:
    """The summary's first line, masked and escaped before it is cut (a cut token no longer matches)."""
    response = (gen.plan.response if gen.plan else None) or {}
    summary = response.get("summary", "") if isinstance(response, dict) else ""
    line = safe_text((summary or (gen.plan.goal if gen.plan else "") or gen.branch).strip().split("\n")[0])
    return "papayu: " + (line if len(line) <= 70 else line[:69] + "…")


def body_of(gen: Generated) -> str:
    """Summary, plan steps, risks, check result and trace id, masked and escaped (safe_text)."""
    plan = gen.plan
    response = (plan.response if plan else None) or {}
    response = response if isinstance(response, dict) else {}
    apply = (plan.extra.get("apply") or {}) if plan else {}
    parts = ["## Summary", response.get("summary") or (plan.goal if plan else "") or "-"]
    steps = [
        f"{i}. {s.get('step', '')}" + (f" — {s['details']}" if s.get("details") else "")
        for i, s in enumerate(response.get("plan") or [], 1)
        if isinstance(s, dict)
    ]
    if steps:
        parts += ["", "## Plan", *steps]
    if response.get("risks"):
        parts += ["", "## Risks", *[f"- {r}" for r in response["risks"]]]
    check = apply.get("check") or {}
    verdict = (
        "not run"
        if not check
        else f"`{check.get('command')}` {'passed' if check.get('passed') else 'FAILED'} "
        f"(exit {check.get('exit_code')}, {float(check.get('duration_sec') or 0):.1f}s)"
    )
    if check and apply.get("commit") != gen.sha:  # pushed with --force after an amend
        verdict += f" on {str(apply.get('commit') or '?')[:12]}, NOT on this commit"
    trace = apply.get("trace_id") or (plan.trace_id if plan else "")
    parts += [
        "",
        "## Check",
        f"Local check: {verdict}",
        "",
        "---",
        f"Papayu-Plan: {gen.plan_id}",
        f"Papayu-Trace: {trace or '-'}",
        f"Commit: {gen.sha}",
        f"Land when CI is green: `git papayu land {gen.plan_id} --when-green`",
    ]
    return safe_text("\n".join(parts), multiline=True)


def record_pr(gen: Generated, data: dict[str, Any], *, replace: bool = False) -> None:
    """Keep ``data`` in the plan record's `extra.pr` (merged into what is there unless ``replace``),
    read afresh: a landing may have rewritten the record since ``gen`` was loaded."""
    if gen.plan is None:
        return
    try:
        plan = plans.load(gen.pdir, gen.plan_id)
    except PapayuError:
        return
    pr = data if replace else {**(plan.extra.get("pr") or {}), **data}
    plans.save(gen.pdir, dataclasses.replace(plan, extra={**plan.extra, "pr": pr}))


def run(
    plan_id: str,
    remote: str | None = None,
    base: str | None = None,
    draft: bool = False,
    forge_kind: str | None = None,
    as_json: bool = False,
    force: bool = False,
) -> int:
    gen = load_generated(plan_id)
    # The forge's CI checks the PR, so an unchecked commit may go; a red or changed one may not.
    forced = enforce(verdict(gen.plan_id, gen.plan, gen.sha, unchecked_ok=True), force=force, doing="pushing")
    remote = pick_remote(gen, remote)
    forge = resolve_forge(remote_url(gen.root, remote), forge_kind or gen.record.get("forge"), cwd=str(gen.root))
    base = base or gen.target() or "main"
    if forge.token:  # fail before anything leaves the machine
        ensure_usable(forge)
    push(gen, remote)
    data: dict[str, Any] = {
        "remote": remote,
        "forge": forge.kind.value,
        "base": base,
        "head": gen.branch,
        "sha": gen.sha,
        "number": None,
        "url": None,
        "existing": False,
    }
    if forced:
        data["forced"] = True
    if forge.token:
        try:
            with connect(forge) as api:
                pr = open_pull_request(
                    api, head=gen.branch, base=base, title=title_of(gen), body=body_of(gen), draft=draft
                )
        except PapayuError as err:
            raise PapayuError(
                err.code,
                f"pushed {gen.branch} ({gen.sha[:12]}) to {remote}, but opening the pull request failed: {err.reason}",
                path=err.path,
                hint=f"{err.hint} The push stands: 'git papayu pr {gen.plan_id}' again opens the pull request.",
            ) from None
        data.update(number=pr.number, url=pr.url, existing=pr.existing)
        output.event("PR_OPENED", plan_id=gen.plan_id, forge=forge.kind.value, number=pr.number, existing=pr.existing)
    record_pr(gen, data, replace=True)
    compare = "" if forge.token else compare_url(forge, base, gen.branch)
    if as_json:
        output.emit_json({"ok": True, "plan_id": gen.plan_id, **data, "compare_url": compare or None})
    elif forge.token:
        word = "reused the open" if data["existing"] else "opened"
        output.result(
            f"pushed {gen.branch} ({gen.sha[:12]}) to {remote}; {word} pull request #{data['number']}: {data['url']}"
        )
    else:
        names = "/".join(TOKEN_ENV[forge.kind])
        output.result(f"pushed {gen.branch} ({gen.sha[:12]}) to {remote}")
        output.result(f"open the pull request: {compare or f'{gen.branch} -> {base} on your forge'}")
        output.info(f"(set {names} to open it automatically)")
    return 0


@click.command("pr")
@click.argument("plan_id", metavar="ID")
@click.option("--remote", metavar="R", help="Remote to push to (default: the target branch's upstream, else origin).")
@click.option("--base", metavar="B", help="Branch to merge into (default: the branch the plan was applied to).")
@click.option("--draft", is_flag=True, help="Open the pull request as a draft.")
@click.option(
    "--forge",
    "forge_kind",
    type=click.Choice(FORGES),
    help="Forge type (default: guessed from the remote's host name, or papayu.forge.type).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Push even a red papayu/ID (ERR_CHECK_NOT_PASSED) or one changed "
    "since its check (ERR_BRANCH_CHANGED_SINCE_CHECK), with a warning.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(
    plan_id: str, remote: str | None, base: str | None, draft: bool, forge_kind: str | None, force: bool, as_json: bool
) -> None:
    """Push papayu/ID and open a pull/merge request for it (PR-based apply).

    \b
    Tokens come from the environment and are never printed or stored:
      GitHub GH_TOKEN or GITHUB_TOKEN, GitLab GITLAB_TOKEN, Gitea GITEA_TOKEN.
    Without a token the branch is pushed and the compare URL is printed.
    The API and web URLs keep the remote's scheme, port and sub-path;
    override with papayu.forge.apiUrl / papayu.forge.repository (owner/name).
    When the forge's CI is green: git papayu land ID --when-green
    (merges the pull request on the forge; papayu.forge.land=local lands locally)
    A red papayu/ID, or one changed since its local check, is not pushed
    unless --force; one no local check ran on is (the forge's CI checks it).
    """
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, remote, base, draft, forge_kind, as_json, force))
