"""Where tools keep credentials: one table for the whole machine (docs/DESIGN.md, "The check's
environment").

The check's view is an allowlist, and this table is what that allowlist must never let through
by accident: a tool's home that holds one of these files is no toolchain mount (toolchains.py),
one that a mounted directory contains anyway (a package cache, a tool's directory) is hidden
(environment.py), and the system's are hidden in /etc. Unsandboxed, the files' values are
masked instead (secret_files.py). A directory entry ends with "/": everything in it is private.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

# Relative to HOME (or to a relocated home: CARGO_HOME's credentials.toml sits at its top).
HOME_CREDENTIALS = (
    # git and forges
    ".git-credentials", ".config/git/credentials", ".config/gh/hosts.yml", ".config/hub",
    ".config/glab-cli/config.yml", ".config/tea/config.yml", ".config/github-copilot/",
    # HTTP and generic
    ".netrc", "_netrc", ".pgpass", ".my.cnf", ".vault-token", ".s3cfg", ".boto", ".config/rclone/rclone.conf",
    # Python
    ".pypirc", ".config/pip/pip.conf", ".pip/pip.conf", ".config/uv/uv.toml", ".local/share/uv/credentials/",
    ".config/pypoetry/auth.toml", ".local/share/pypoetry/auth.toml", ".condarc",
    ".cache/huggingface/token", ".cache/huggingface/stored_tokens", ".huggingface/token", ".kaggle/kaggle.json",
    # JavaScript
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".config/pnpm/rc", ".bunfig.toml", ".config/configstore/",
    # Rust, Ruby, PHP, .NET, JVM
    ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".local/share/gem/credentials",
    ".bundle/config", ".composer/auth.json", ".config/composer/auth.json", ".nuget/NuGet/NuGet.Config",
    ".m2/settings.xml", ".m2/settings-security.xml", ".gradle/gradle.properties", ".sbt/credentials",
    ".ivy2/.credentials",
    # containers, clusters, clouds, infrastructure
    ".docker/config.json", ".dockercfg", ".config/containers/auth.json", ".kube/config", ".config/helm/",
    ".aws/", ".azure/", ".config/gcloud/", ".oci/", ".config/doctl/", ".config/hcloud/", ".databrickscfg",
    ".fly/config.yml", ".pulumi/credentials.json", ".terraform.d/credentials.tfrc.json", ".terraformrc",
    ".circleci/cli.yml",
    # keys and secret stores
    ".ssh/", ".gnupg/", ".password-store/", ".local/share/keyrings/", ".config/sops/", ".config/op/",
    # model providers and papayu itself
    ".config/papayu/", ".codex/", ".config/openai/",
)  # fmt: skip

# The system's: files whose readers are trusted, the package managers' and git's global settings
# (often an index URL with a password in it), and private keys.
SYSTEM_CREDENTIALS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/security/opasswd", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private", "/etc/pki/tls/private",
    "/etc/krb5.keytab", "/etc/ppp/*-secrets", "/etc/letsencrypt", "/etc/wireguard", "/etc/openvpn",
    "/etc/NetworkManager/system-connections", "/etc/kubernetes", "/etc/rancher",
    "/etc/environment", "/etc/gitconfig", "/etc/netrc", "/etc/wgetrc", "/etc/boto.cfg",
    "/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc",
    "/etc/yarnrc", "/etc/gemrc", "/etc/conda/.condarc", "/etc/conda/condarc", "/etc/uv/uv.toml",
    "/etc/apt/auth.conf", "/etc/apt/auth.conf.d", "/etc/docker", "/etc/containers/auth.json",
)  # fmt: skip

# Files named by the environment that hold credentials: hidden wherever they are.
CREDENTIAL_FILE_VARS = (
    "KUBECONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "DOCKER_CONFIG",
    "NETRC",
    "PGPASSFILE",
    "PIP_CONFIG_FILE",
    "NPM_CONFIG_USERCONFIG",
    "GIT_CONFIG_GLOBAL",
    "SSH_AUTH_SOCK",
    "GNUPGHOME",
    "PASSWORD_STORE_DIR",
    "VAULT_CONFIG_PATH",
    "HF_TOKEN_PATH",
)


def home_credentials(home: Path) -> list[Path]:
    """The table's entries under ``home`` that exist (files, directories, or links)."""
    return [p for p in (home / rel.rstrip("/") for rel in HOME_CREDENTIALS) if os.path.lexists(p)]


def named_credentials(environ: Mapping[str, str]) -> list[Path]:
    """The files the credential variables of ``environ`` name."""
    values = (v for name in CREDENTIAL_FILE_VARS for v in environ.get(name, "").split(os.pathsep))
    return [Path(v) for v in values if v and os.path.isabs(v)]


def holds_credentials(directory: Path, home: Path) -> bool:
    """Whether ``directory`` is, holds at any depth or lies inside a credential file or directory
    of HOME, or holds one of the table's files at its own top (another home, a relocated tool
    home)."""
    try:
        real, home_dir = str(directory.resolve()), str(home.resolve())
    except OSError:
        return True
    # Strings, not Paths: a check asks this of every toolchain candidate (dozens), and pathlib's
    # joins and parents cost milliseconds each time (bench/check_cost_bench.py).
    inside = real.rstrip("/") + "/"
    for entry, name in _ENTRIES:
        mine = os.path.join(home_dir, entry)
        related = mine == real or mine.startswith(inside) or real.startswith(mine + "/")
        if related and os.path.lexists(mine):
            return True
        if os.path.lexists(os.path.join(real, entry)):
            return True
        if name not in _TOO_COMMON and name != entry and os.path.lexists(os.path.join(real, name)):
            return True
    return False


_ENTRIES = tuple((rel.rstrip("/"), os.path.basename(rel.rstrip("/"))) for rel in HOME_CREDENTIALS)
# Names of the table too common to mean a credential when they stand alone in a directory.
_TOO_COMMON = frozenset(
    {
        "config",
        "config.yml",
        "config.json",
        "cli.yml",
        "rc",
        "hub",
        "token",
        "helm",
        "configstore",
        "op",
        "openai",
        "doctl",
        "hcloud",
        "sops",
    }
)


@lru_cache(maxsize=1)
def system_hidden() -> tuple[str, ...]:
    """What the check must not see of the system: the table's entries that exist, and every file
    or directory under /etc that is not readable by all (papayu may run as root, which reads
    them: "readable by us" is no test). Walked once per process (~1000 entries, a few ms)."""
    found = [os.path.realpath(p) for pattern in SYSTEM_CREDENTIALS for p in sorted(glob.glob(pattern))]
    found += _not_world_readable("/etc")  # symlinks are judged where they point
    return _outermost(found)


def _not_world_readable(top: str, limit: int = 20000) -> list[str]:
    out: list[str] = []
    stack, seen = [top], 0
    while stack and seen < limit:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue  # judged where it points, if that is mounted at all
            if stat.S_ISDIR(mode):
                if mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
                    out.append(entry.path)
                else:
                    stack.append(entry.path)
            elif not mode & stat.S_IROTH:
                out.append(entry.path)
    return out


def _outermost(paths: list[str]) -> tuple[str, ...]:
    """``paths`` without those inside another one (a hidden directory hides its content; bubblewrap
    cannot mount over a file inside the empty read-only directory standing in for it)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path.startswith(k + "/") for k in kept):
            kept.append(path)
    return tuple(kept)
