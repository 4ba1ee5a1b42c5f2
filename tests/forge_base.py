"""The scripted forges' common part (tests/forges.py): the forge's bare repository, with the
forge's own merges done in real git, and the serving of one repository's API over
forge_server.ForgeServer, git included."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

from forge_server import Answer, ForgeServer, Recorded

TOKEN = "tok_" + "f0rg3" * 4
_HOOK = """#!/bin/sh
while read old new ref; do
    echo "$old $new $ref" >> "$GIT_DIR/papayu-push-log"
    if grep -qx "$ref" "$GIT_DIR/papayu-protected" 2>/dev/null; then
        echo "protected branch: $ref may not be pushed" >&2
        exit 1
    fi
done
"""


class Bare:
    """The forge's repository: real git, the forge's merges done the way the forge does them."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", str(directory)], check=True)
        self.git("config", "http.receivepack", "true")
        hook = directory / "hooks" / "pre-receive"
        hook.write_text(_HOOK)
        hook.chmod(0o755)

    def git(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.dir, capture_output=True, text=True, env={**os.environ, **(env or {})}
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr}")
        return proc.stdout.strip()

    def tip(self, branch: str) -> str | None:
        return self.git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False) or None

    def protect(self, branch: str) -> None:
        with open(self.dir / "papayu-protected", "a") as f:
            f.write(f"refs/heads/{branch}\n")

    def pushes(self) -> list[str]:
        """The refs every push tried to update (the pre-receive hook's log)."""
        log = self.dir / "papayu-push-log"
        return [line.split()[2] for line in log.read_text().splitlines()] if log.exists() else []

    def update(self, branch: str, new: str, old: str) -> bool:
        proc = subprocess.run(
            ["git", "update-ref", f"refs/heads/{branch}", new, old], cwd=self.dir, capture_output=True
        )
        return proc.returncode == 0

    def delete(self, branch: str) -> bool:
        return self.tip(branch) is not None and not self.git("update-ref", "-d", f"refs/heads/{branch}")

    def ancestor(self, a: str, b: str) -> bool:
        return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=self.dir).returncode == 0

    def tree(self, rev: str) -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}")

    def three_way(self, base: str, ours: str, theirs: str) -> str | None:
        """The merged tree, None on a conflict (read-tree's 3-way merge in a scratch index)."""
        with tempfile.TemporaryDirectory() as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self.git("read-tree", "-m", "-i", "--aggressive", base, ours, theirs, env=env)
            proc = subprocess.run(
                ["git", "write-tree"], cwd=self.dir, capture_output=True, text=True, env={**os.environ, **env}
            )
            return proc.stdout.strip() if proc.returncode == 0 else None

    def commit(self, tree: str, parents: list[str], message: str, committer: str) -> str:
        args = ["commit-tree", tree, *[x for p in parents for x in ("-p", p)], "-m", message]
        return self.git(*args, env={"GIT_COMMITTER_NAME": committer, "GIT_COMMITTER_EMAIL": "forge@example.com"})

    def merged(self, style: str, base: str, head: str, *, title: str, committer: str) -> str | None:
        """The new tip of ``base`` after merging ``head`` the forge's way; None on a conflict or
        on a fast-forward that is not one. ``rebase`` rewrites every commit (GitHub);
        ``rebase-noop`` keeps a head already on the tip (Gitea's rebase, a git rebase);
        ``rebase_merge`` is GitLab's semi-linear merge commit, ``rebase-merge`` Gitea's."""
        tip = self.tip(base)
        assert tip is not None
        on_tip = self.ancestor(tip, head)
        if style in ("ff", "fast-forward-only"):
            return head if on_tip else None
        if style == "rebase_merge":
            return self._merge_commit(tip, head, title, committer) if on_tip else None
        if style in ("rebase", "rebase-noop", "rebase-merge"):
            rebased = head if on_tip and style != "rebase" else self._rebase(tip, head, committer)
            if rebased is None or style != "rebase-merge":
                return rebased
            return self._merge_commit(tip, rebased, title, committer)
        tree = self.three_way(self.git("merge-base", tip, head), tip, head)
        if tree is None:
            return None
        return self.commit(tree, [tip] if style == "squash" else [tip, head], title, committer)

    def _rebase(self, tip: str, head: str, committer: str) -> str | None:
        on = tip
        for c in self.git("rev-list", "--reverse", f"{tip}..{head}").split():
            tree = self.three_way(f"{c}^", on, c)
            if tree is None:
                return None
            on = self.commit(tree, [on], self.git("log", "-1", "--format=%B", c), committer)
        return on

    def _merge_commit(self, tip: str, head: str, title: str, committer: str) -> str:
        return self.commit(self.tree(head), [tip, head], title, committer)


@dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool = False
    state: str = "open"  # open, closed, merged
    merge_sha: str | None = None
    method: str = ""
    comments: list[str] = field(default_factory=list)
    checking: int = 1  # reads that still see the mergeability being computed


class ScriptedForge:
    """One repository on one scripted forge. ``sub``: the sub-path the forge is served under."""

    kind = ""
    api_prefix = ""
    token_var = ""

    def __init__(self, tmp_path: Path, *, sub: str = "", repo: str = "acme/widget", token: str = TOKEN) -> None:
        self.repo = repo
        self.sub = sub.strip("/")
        self.token = token
        self.root = tmp_path / "forge-git"
        self.bare = Bare(self.root / (f"{self.sub}/" if self.sub else "") / f"{repo}.git")
        self.server = ForgeServer(self.handle, git_root=self.root)
        self.pulls: dict[int, Pull] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.required: list[str] = []  # the contexts the protected target requires
        self.on_merge: Callable[[Pull], None] | None = None  # runs as a merge request arrives

    def __enter__(self) -> ScriptedForge:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    # --- what a test sets up ------------------------------------------------------------

    @property
    def remote_url(self) -> str:
        return f"{self.server.url}{self._sub()}/{self.repo}.git"

    @property
    def api_url(self) -> str:
        return f"{self.server.url}{self._sub()}{self.api_prefix}"

    def _sub(self) -> str:
        return f"/{self.sub}" if self.sub else ""

    def env(self, token: str | None = None) -> dict[str, str]:
        return {self.token_var: token or self.token}

    def protect(self, branch: str, *contexts: str) -> None:
        """The target may not be pushed, and a merge into it needs ``contexts`` green."""
        self.bare.protect(branch)
        self.required = list(contexts)

    def status(self, sha: str, context: str, state: str) -> None:
        self.statuses[sha].append({"context": context, "state": state, "id": len(self.statuses[sha]) + 1})

    def latest_statuses(self, sha: str) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for s in self.statuses.get(sha, []):
            latest[s["context"]] = s
        return sorted(latest.values(), key=lambda s: -s["id"])

    # --- serving ------------------------------------------------------------------------

    def handle(self, request: Recorded) -> Answer | None:
        prefix = f"{self._sub()}{self.api_prefix}"
        if not request.path.startswith(prefix + "/"):
            return None
        path = request.path[len(prefix) :]
        if not self.authorised(request):
            return self.unauthorised()
        for method, pattern, name in self.ROUTES:
            m = re.fullmatch(pattern, path)
            if m and method == request.method:
                if not self.knows(unquote(m.groupdict().get("repo", self.repo))):
                    return self.not_found()
                answer: Answer = getattr(self, name)(request, **{k: unquote(v) for k, v in m.groupdict().items()})
                return answer
        return self.not_found()

    ROUTES: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def knows(self, repo: str) -> bool:
        return repo == self.repo

    def authorised(self, request: Recorded) -> bool:
        raise NotImplementedError

    def unauthorised(self) -> Answer:
        return 401, {"message": "Unauthorized"}

    def not_found(self) -> Answer:
        return 404, {"message": "Not Found"}

    def new_pull(self, head: str, base: str, title: str, body: str, draft: bool) -> Pull | Answer:
        for pull in self.pulls.values():
            if pull.head == head and pull.base == base and pull.state == "open":
                return self.exists(pull)
        if self.bare.tip(head) is None or self.bare.tip(base) is None:
            return 422, {"message": "Validation Failed", "errors": [{"message": "head or base does not exist"}]}
        pull = Pull(len(self.pulls) + 1, head, base, title, body, draft)
        self.pulls[pull.number] = pull
        return pull

    def exists(self, pull: Pull) -> Answer:
        raise NotImplementedError

    def head_sha(self, pull: Pull) -> str:
        return self.bare.tip(pull.head) or self.bare.git("rev-parse", f"refs/pull/{pull.number}/head", check=False)

    def arrived(self, request: Recorded, n: str) -> Pull | None:
        """A merge request came in: what a concurrent user does then happens first (``on_merge``)."""
        pull = self.pulls.get(int(n))
        if pull is not None and self.on_merge is not None:
            self.on_merge(pull)
        return pull

    def merge(self, pull: Pull, style: str, sha: str, committer: str) -> str | None:
        """Do the merge in the bare repository; the new base tip, None if it could not be done."""
        head = self.head_sha(pull)
        # GitHub keeps refs/pull/N/head after the branch is deleted; here too.
        self.bare.git("update-ref", f"refs/pull/{pull.number}/head", head)
        tip = self.bare.tip(pull.base)
        assert tip is not None
        new = self.bare.merged(style, pull.base, head, title=f"Merge #{pull.number}: {pull.title}", committer=committer)
        if new is None or not self.bare.update(pull.base, new, tip):
            return None
        pull.state, pull.merge_sha, pull.method = "merged", new, style
        return new
