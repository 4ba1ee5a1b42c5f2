"""One run's view of the machine: the command line and environment the check gets.

Sandboxed, the plan's checkout stands at the repository's own path with the project's
environment laid over it copy-on-write (environment.py); unsandboxed, the check runs in the
checkout itself, and whatever in the project's environment points into the user's tree is
named, since the check may then test the user's code instead of the plan's (docs/DESIGN.md,
"The check's environment").

The runners' reports go to a directory papayu reads through the check's first process
(results/inside.py, pid 1 of the sandbox): sandboxed, a tmpfs of the check's own, sized like
/tmp, gone with it; unsandboxed, a fresh directory in the slot, removed after the run (what
papayu reads of it is bounded the same way; what the check writes there is not).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git import settings
from papayu_git.check import environment, lockfiles, mtimes, project_copies, seccomp
from papayu_git.check.environment import Kind, Layout, Mount
from papayu_git.check.limits import limits_prefix
from papayu_git.check.results.channel import node_options, plugin_path, wrapper_argv, write_helpers
from papayu_git.check.results.instrument import NODE_REPORTS_VAR, NODE_TEST_VAR
from papayu_git.check.sandbox import bwrap_argv, check_env
from papayu_git.worktree import remove_tree

if TYPE_CHECKING:
    from papayu_git.check.sandbox import Sandbox
    from papayu_git.worktree import CheckCheckout


REPORT_INSIDE = "/run/papayu-report"
HELPERS_INSIDE = "/run/papayu-check"  # papayu's helpers (results/channel.py), read-only


@dataclass
class CheckView:
    prefix: list[str]  # bwrap and its options, or nothing
    env: dict[str, str]
    limits: str = ""  # shell words bounding the check's processes (run.limits_prefix)
    report: str = ""  # where the runners write their results, as the check sees it
    root: str = ""  # the check's working directory, as the check sees it
    wrap: list[str] = field(default_factory=list)  # what runs before the command (the port relay)
    user_tree_links: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # for the check's log: what it was not given
    seccomp_fd: int | None = None  # the filter bwrap reads (passed to it, rewound for each command)
    helpers: str = ""  # papayu's helpers' directory (results/channel.py), as the check sees it
    host_helpers: str = ""  # the same on papayu's side
    host_reports: Path | None = None  # unsandboxed: the report directory on disk, removed by close()
    carried: tuple[str, ...] = ()  # the user's ignored lockfiles copied into the checkout (lockfiles.py)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        if self.seccomp_fd is None:
            return ()
        os.lseek(self.seccomp_fd, 0, os.SEEK_SET)  # each bwrap reads it from the start
        return (self.seccomp_fd,)

    def close(self) -> None:
        if self.seccomp_fd is not None:
            os.close(self.seccomp_fd)
            self.seccomp_fd = None
        if self.host_reports is not None:
            remove_tree(self.host_reports)
            self.host_reports = None

    @classmethod
    def prepare(
        cls,
        checkout: CheckCheckout,
        sandbox: Sandbox,
        repo_root: Path,
        *,
        python_safe_path: bool | None = None,
    ) -> CheckView:
        """``python_safe_path``: the command's PYTHONSAFEPATH (check/safe_path.py), None: as is."""
        helpers = write_helpers(checkout.slot)
        carried = tuple(lockfiles.carry(repo_root, checkout.path))
        if sandbox.bwrap is None:
            return cls._unsandboxed(checkout, repo_root, helpers, python_safe_path, carried)
        home = Path(os.path.expanduser("~"))
        (checkout.path / ".git").unlink(missing_ok=True)  # the git dir is mounted there instead
        layout = Layout(repo_root, checkout.path, checkout.gitdir, _objects_of(checkout.gitdir))
        env = check_env(str(home), "/tmp", str(repo_root), python_safe_path=python_safe_path)
        if not sandbox.network:  # cargo would retry the registry for ~20 s, then fail anyway
            env.setdefault("CARGO_NET_OFFLINE", "true")
        gitconfig = environment.write_gitconfig(checkout.slot)
        env.update({"GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"})
        placed, notes = environment.mounts(layout, env)
        laid = [Path(m.dest) for m in placed if m.kind is Kind.OVERLAY and repo_root in Path(m.dest).parents]
        _stand_in_for_copies(repo_root, checkout.path, laid, str(repo_root), env, notes)
        placed.append(Mount(Kind.RO, str(gitconfig), str(home / ".gitconfig")))
        placed.append(Mount(Kind.RO, str(helpers), HELPERS_INSIDE))
        build_state = [Path(m.dest) for m in placed if m.kind is Kind.OVERLAY]
        if any(p.name in mtimes.BUILD_STATE_DIRS or str(p) == env.get("GOCACHE") for p in build_state):
            mtimes.sync(repo_root, checkout.path, checkout.gitdir)
        wrap: list[str] = []
        from papayu_git.check import relay  # sockets and threads: only when ports are relayed

        ports = relay.configured_ports(repo_root)
        if ports and not sandbox.network:
            inner = relay.start(ports)
            placed.append(Mount(Kind.BIND, str(inner), relay.INSIDE))
            wrap = relay.inner_command(ports)
        fd = seccomp.program_fd()
        argv = bwrap_argv(sandbox.bwrap, placed, chdir=str(repo_root), network=sandbox.network, seccomp_fd=fd)
        argv += _report_tmpfs(repo_root)
        limits = limits_prefix(repo_root)
        return cls(
            argv,
            env,
            limits,
            REPORT_INSIDE,
            str(repo_root),
            wrap,
            notes=notes,
            seccomp_fd=fd,
            helpers=HELPERS_INSIDE,
            host_helpers=str(helpers),
            carried=carried,
        )

    @classmethod
    def _unsandboxed(
        cls,
        checkout: CheckCheckout,
        repo_root: Path,
        helpers: Path,
        python_safe_path: bool | None,
        carried: tuple[str, ...],
    ) -> CheckView:
        # The same allowlisted environment, with HOME and TMPDIR private to the slot.
        private = checkout.slot / "tmp"
        shutil.rmtree(private, ignore_errors=True)
        (private / "home").mkdir(parents=True)
        env = check_env(str(private / "home"), str(private), str(repo_root), python_safe_path=python_safe_path)
        dirs = [p for p in (repo_root / n for n in environment.ENV_DIR_NAMES) if p.is_dir()]
        dirs += environment.env_dirs(repo_root, checkout.path, checkout.gitdir)
        links = environment.links_into(repo_root, sorted(set(dirs)))
        notes: list[str] = []
        _stand_in_for_copies(repo_root, checkout.path, dirs, str(checkout.path), env, notes)
        report = checkout.slot / "report"
        if report.exists() or report.is_symlink():
            remove_tree(report)
        report.mkdir(parents=True)
        view = cls(
            [], env, limits_prefix(repo_root), str(report), str(checkout.path), user_tree_links=links, notes=notes
        )
        view.helpers = view.host_helpers = str(helpers)
        view.host_reports = report
        view.carried = carried
        return view

    def command_line(
        self, command: str, extra_env: dict[str, str] | None = None, reports: dict[str, object] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The command's argv and environment. ``reports``: the report channel's part of the
        first process's configuration (results/inside.py); None: a command whose reports are
        not read (a proposed command after the check)."""
        shell = ["/bin/sh", "-c", self.limits + command]
        if self.wrap:
            shell = [*self.wrap, *shell]
        config = {"files_fd": -1, "stream_fd": -1, "names": [], "junit": [], "tools": [], **(reports or {})}
        config.update(report_dir=self.report, root=self.root)
        first = [*wrapper_argv(self.helpers, config), *shell]
        env = {**self.env, **(extra_env or {})}
        if reports is not None:
            env["PYTHONPATH"] = plugin_path(self.helpers, env.get("PYTHONPATH", ""))
        if reports is not None and NODE_REPORTS_VAR in env:
            reporter = NODE_TEST_VAR in env
            env["NODE_OPTIONS"] = node_options(self.helpers, env.get("NODE_OPTIONS", ""), test_reporter=reporter)
            env["PAPAYU_CHECK_ROOT"] = self.root  # the node hook's shield: which frames are the checked tree's
        return ([*self.prefix, "--", *first] if self.prefix else first), env


def _stand_in_for_copies(
    repo_root: Path, work: Path, env_dirs: list[Path], inside: str, env: dict[str, str], notes: list[str]
) -> None:
    """Puts the checkout's directories standing in for the project's installed copies first on
    ``env``'s PYTHONPATH (``inside``: the checkout's path as the check sees it; tox passes it on:
    instrument.tox_override) and says so in ``notes``."""
    found = project_copies.copies(repo_root, work, project_copies.virtualenvs(env_dirs))
    roots = project_copies.python_path(found, inside)
    notes += project_copies.notes(found, repo_root, work)
    if roots:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (*roots, env.get("PYTHONPATH", ""))))


def _report_tmpfs(repo_root: Path) -> list[str]:
    """The report directory, sized like /tmp, and the check's first process as the sandbox's
    pid 1 (results/inside.py: what the check starts cannot kill it)."""
    size = max(settings.get_int("check_tmp_mb", str(repo_root)), 16) * 1024 * 1024
    return ["--size", str(size), "--tmpfs", REPORT_INSIDE, "--as-pid-1"]


def _objects_of(gitdir: Path) -> Path:
    """The user's object store: the first line of the checkout's alternates (worktree.py)."""
    text = (gitdir / "objects" / "info" / "alternates").read_text(encoding="utf-8")
    return Path(text.splitlines()[0].strip())
