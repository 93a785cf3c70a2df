"""What the bubblewrap tier hides from every command, and how.

Hidden: credential folders and files under every HOME keel knows of (``DEFAULT_HIDDEN_PATHS``), keel's
own data and configuration wherever ``KEEL_HOME`` / ``XDG_*_HOME`` put them (other projects' session
logs, the snapshot pack that holds the bytes of each ``.env``), daemon sockets, root-only files, and
the workspace's secret-looking files at any depth: the one list, ``keel.policy.paths.SECRET_PATTERNS``,
the same the file tools and the shell policy use. A directory is covered by an empty tmpfs, a file by
an empty read-only file (it reads as empty, so a dotenv loader does not break, and refuses writes).

The workspace scan has no entry cap. It runs before every command, so it is incremental: a
directory is listed again only when its (device, inode, mtime) changed, or when its mtime was too
close to the last listing to prove nothing changed after it (a coarse clock; git's "racily clean").
Trees that hold dependencies, caches or VCS data (``SCAN_SKIPPED``, and any virtualenv) are not
entered: what they hold is not the user's secrets. When the hidden files are too many to pass to
``bwrap``, a directory whose every file is secret is hidden whole; if that is still too many, hiding
cannot be complete, and ``HidingIncomplete`` says so (run_shell then asks a person first).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from keel.policy.listing import DIR, FILE, list_beneath
from keel.policy.paths import SECRET_DIRS, is_secret_name

DEFAULT_HIDDEN_PATHS: tuple[str, ...] = (
    "~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.netrc", "~/.docker", "~/.config/keel",
    "~/.local/share/keel", "~/.kube", "~/.azure", "~/.config/gh", "~/.git-credentials", "~/.pypirc", "~/.npmrc",
    "~/.password-store", "~/.local/share/keyrings", "~/.vault-token",
    # More tools' credential files (the shell policy's list in keel.policy.shell.paths cites each source).
    "~/.config/sops", "~/.databrickscfg", "~/.terraformrc", "~/.terraform.d", "~/.cargo/credentials",
    "~/.cargo/credentials.toml", "~/.m2/settings.xml", "~/.gradle/gradle.properties", "~/.config/rclone",
    "~/.s3cfg", "~/.boto", "~/.config/doctl", "~/.oci", "~/.pgpass", "~/.my.cnf", "~/.mylogin.cnf",
    "~/.kaggle", "~/.huggingface", "~/.cache/huggingface/token", "~/.config/op", "~/.gem/credentials",
    "~/.composer/auth.json", "~/.config/composer/auth.json", "~/.yarnrc.yml", "~/.bundle/config",
    "~/.ngrok2", "~/.config/ngrok", "~/.config/helm", "~/.config/containers/auth.json", "~/.config/glab-cli",
    "~/.fly", "~/.config/configstore", "~/.pulumi/credentials.json", "~/.config/heroku", "~/.vercel",
    "~/.config/vercel", "~/.snowflake", "~/.dbt", "~/.config/hub",
    # Sockets of daemons that would run anything as their (privileged) owner.
    "/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
    "/run/podman/podman.sock", "/run/user",
)

# Trees the workspace scan does not enter: dependencies, caches and VCS data (a virtualenv, whatever
# its name, is recognised by its pyvenv.cfg).
SCAN_SKIPPED = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "site-packages", "__pycache__",
                          ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
STABLE_NS = 2 * 10**9      # a directory changed this close to its listing is listed again next time
MAX_HIDDEN = 3000          # mounts passed to bwrap (each costs three arguments)


class HidingIncomplete(Exception):
    """The tier cannot hide every secret file from the command: the message says why."""


@dataclass(frozen=True)
class _Listed:
    key: tuple[int, int, int]     # (device, inode, mtime_ns) when listed
    listed_ns: int
    secrets: tuple[str, ...]      # names of secret files in it
    hidden_dirs: tuple[str, ...]  # names of credential folders in it (.ssh, .gnupg, .aws)
    subdirs: tuple[str, ...]      # names of the directories the scan enters
    files: int                    # how many regular files it holds


@dataclass(frozen=True)
class Found:
    files: list[str]              # absolute paths of secret files
    dirs: list[str]               # absolute paths of directories to hide whole


class SecretScan:
    """The secret files of one workspace, kept between commands (``scan`` is incremental)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._listed: dict[str, _Listed] = {}
        self._lock = threading.Lock()

    def scan(self) -> Found:
        with self._lock:
            files: list[str] = []
            dirs: list[str] = []
            whole: list[tuple[str, int]] = []      # directories of nothing but secrets, with their count
            seen: dict[str, _Listed] = {}
            stack = ["."]
            while stack:
                rel = stack.pop()
                listed = self._current(rel)
                if listed is None:
                    continue
                seen[rel] = listed
                base = self.root if rel == "." else os.path.join(self.root, rel)
                files += [os.path.join(base, n) for n in listed.secrets]
                dirs += [os.path.join(base, n) for n in listed.hidden_dirs]
                if listed.secrets and len(listed.secrets) == listed.files and rel != "." and not listed.subdirs:
                    whole.append((base, len(listed.secrets)))
                stack += [n if rel == "." else f"{rel}/{n}" for n in listed.subdirs]
            self._listed = seen
        return _fit(Found(files, dirs), whole)

    def _current(self, rel: str) -> _Listed | None:
        path = self.root if rel == "." else os.path.join(self.root, rel)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        old = self._listed.get(rel)
        if old is not None and old.key == key and st.st_mtime_ns < old.listed_ns - STABLE_NS:
            return old
        now = time.time_ns()
        try:
            entries = list_beneath(self.root, rel, path)
        except OSError:
            return None
        names = {e.name for e in entries}
        if rel != "." and "pyvenv.cfg" in names:
            return _Listed(key, now, (), (), (), 0)
        secrets, hidden, subdirs, count = [], [], [], 0
        for e in entries:
            if e.kind == DIR:
                if e.name in SECRET_DIRS:
                    hidden.append(e.name)
                elif e.name not in SCAN_SKIPPED:
                    subdirs.append(e.name)
            elif e.kind == FILE:
                count += 1
                if is_secret_name(f"{rel}/{e.name}"):
                    secrets.append(e.name)
        return _Listed(key, now, tuple(secrets), tuple(hidden), tuple(subdirs), count)


def _fit(found: Found, whole: list[tuple[str, int]]) -> Found:
    """``found`` within MAX_HIDDEN mounts: directories of nothing but secrets hidden whole, largest
    first, until it fits; HidingIncomplete when even that is not enough."""
    if len(found.files) + len(found.dirs) <= MAX_HIDDEN:
        return found
    files, dirs = set(found.files), list(found.dirs)
    for directory, _count in sorted(whole, key=lambda w: -w[1]):
        dirs.append(directory)
        files -= {f for f in files if os.path.dirname(f) == directory}
        if len(files) + len(dirs) <= MAX_HIDDEN:
            return Found(sorted(files), dirs)
    raise HidingIncomplete(f"the workspace holds {len(found.files):,} secret-looking files in too many folders "
                           f"to hide each from commands (at most {MAX_HIDDEN:,})")


_scans: dict[str, SecretScan] = {}
_scans_lock = threading.Lock()


def find_secret_files(workspace: str) -> Found:
    """The secret files and credential folders of ``workspace`` (a real path), at any depth."""
    with _scans_lock:
        scan = _scans.setdefault(workspace, SecretScan(workspace))
    return scan.scan()


def hidden_by_tier(root: Path) -> list[Path]:
    """What bubblewrap hides of the workspace (secret files and whole folders); nothing when the
    hiding cannot be complete (then the command asks before it runs)."""
    try:
        found = find_secret_files(str(root))
    except HidingIncomplete:
        return []
    return [Path(p) for p in (*found.files, *found.dirs)]


# ---------------------------------------------------------------- whose secrets


def homes(command_env: Mapping[str, str]) -> list[str]:
    """Every HOME whose secrets must be hidden: the command's and keel's own, and when keel runs
    as root (which may keep CAP_DAC_OVERRIDE inside the sandbox) every user's."""
    found = [command_env.get("HOME", ""), os.environ.get("HOME", ""), os.path.expanduser("~")]
    if os.geteuid() == 0:
        found += [entry.pw_dir for entry in pwd.getpwall()]
    return list(dict.fromkeys(h for h in found if h and os.path.isabs(h) and h != "/"))


def keel_dirs(command_env: Mapping[str, str]) -> list[str]:
    """keel's own data and configuration directories (session logs, snapshot packs, API keys),
    wherever ``KEEL_HOME`` and ``XDG_DATA_HOME`` / ``XDG_CONFIG_HOME`` moved them."""
    found = []
    for env in (command_env, os.environ):
        if env.get("KEEL_HOME"):
            found.append(env["KEEL_HOME"])
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            if env.get(var):
                found.append(os.path.join(env[var], "keel"))
    return [d for d in dict.fromkeys(found) if os.path.isabs(d)]


def expand(entry: str, home_dirs: Iterable[str]) -> list[str]:
    if entry == "~" or entry.startswith("~/"):
        return [os.path.join(home, entry[2:]) for home in home_dirs]
    return [entry] if os.path.isabs(entry) else []


def within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def _ancestors(path: str) -> Iterable[str]:
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def hidden_targets(candidates: Iterable[str], workspace: str, exposed: Iterable[str] = ()) -> list[str]:
    """The real paths to cover, shortest first, none inside another, never the workspace itself;
    the host's /tmp is replaced by an empty tmpfs anyway, except where the workspace is. A path in
    ``exposed`` (or inside one) stays visible."""
    shown = [os.path.realpath(p) for p in exposed]
    targets: list[str] = []
    chosen: set[str] = set()
    for real in sorted({os.path.realpath(c) for c in candidates if os.path.lexists(c)}, key=len):
        if real == workspace or any(a in chosen for a in _ancestors(real)) or any(within(real, e) for e in shown):
            continue
        if within(real, "/tmp") and not (within(workspace, real) or within(real, workspace)):
            continue
        targets.append(real)
        chosen.add(real)
    return targets


_empty_lock = threading.Lock()
_empty_path: str | None = None


def empty_file() -> str:
    """A read-only empty regular file to mount over secret files. (/dev/null bound by bwrap is
    ``nodev``: opening fails, breaking tools that merely read an optional ~/.npmrc; bound as a
    device it silently swallows writes. An empty file reads as empty and refuses writes.)"""
    global _empty_path
    with _empty_lock:
        if _empty_path is None or not os.path.isfile(_empty_path):
            directory = tempfile.mkdtemp(prefix="keel-sandbox-")
            atexit.register(shutil.rmtree, directory, True)
            path = os.path.join(directory, "empty")
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o444))
            _empty_path = path
        return _empty_path


def hide_args(path: str) -> list[str] | None:
    """bwrap arguments that make ``path`` (a real path) empty, or None if it does not exist."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return ["--tmpfs", path]
    return ["--ro-bind", empty_file(), path]
