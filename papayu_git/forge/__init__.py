"""GitHub / GitLab / Gitea: where a remote's forge is (`remote`), its REST API (`http`), pull
requests (`pulls`), the checks a branch requires (`checks`) and the wait for them (`wait`);
the remote's branches over git (`remote_refs`). docs/DESIGN.md, "Hooks and PRs".

The names other modules use are here; the rooms stay small enough to read at once.
"""

from __future__ import annotations

from papayu_git.forge.checks import Checks, ChecksState, Required, combine, evaluate, required_checks
from papayu_git.forge.http import Api, ForgeError, client, connect, message_of
from papayu_git.forge.pulls import (
    Merged,
    PullRequest,
    PullState,
    close_with_comment,
    delete_branch,
    merge_pull,
    open_pull_request,
    read_pull,
    wait_mergeable,
)
from papayu_git.forge.remote import (
    TOKEN_ENV,
    Forge,
    ForgeKind,
    RemoteRepo,
    compare_url,
    guess_kind,
    locate,
    parse_remote_url,
    resolve_forge,
)
from papayu_git.forge.wait import wait_until_green

__all__ = [
    "TOKEN_ENV",
    "Api",
    "Checks",
    "ChecksState",
    "Forge",
    "ForgeError",
    "ForgeKind",
    "Merged",
    "PullRequest",
    "PullState",
    "RemoteRepo",
    "Required",
    "client",
    "close_with_comment",
    "combine",
    "compare_url",
    "connect",
    "delete_branch",
    "evaluate",
    "guess_kind",
    "locate",
    "merge_pull",
    "message_of",
    "open_pull_request",
    "parse_remote_url",
    "read_pull",
    "required_checks",
    "resolve_forge",
    "wait_mergeable",
    "wait_until_green",
]
