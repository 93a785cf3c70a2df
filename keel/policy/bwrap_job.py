"""What bubblewrap adds for one job beyond the tier's base mounts (keel.policy.sandbox).

- every nested repository's git directory read-only (keel.policy.leftovers finds them);
- the files outside the workspace the job may read (a hook's own session transcript), bound last
  so that no hidden directory covers them;
- the seccomp program that refuses setuid/setgid bits (keel.policy.seccomp), from a memfd;
- host unix sockets out of a command's reach unless the user allows one by path.

Sockets: bubblewrap binds ``/`` read-only, but ``connect()`` to a unix socket file needs no write access to
its mount: a command could talk to any daemon listening on a socket file (a database, a desktop
bus, a container engine, an editor's server) with this user's identity. So, for every command:

- ``/run`` (where daemons keep their sockets; ``/var/run`` points there) is an empty tmpfs; the
  entries commands need from it are bound back read-only: directories on ``PATH`` (NixOS keeps
  its tools under /run/current-system) and the target of ``/etc/resolv.conf``;
- socket files elsewhere on the host (``/var/lib/mysql/mysql.sock``, a socket under ``/srv`` or
  ``/var/tmp``) are covered by an empty file; they are found by a walk bounded in depth, entries and
  time, repeated at most every ``RESCAN_S`` seconds, skipping the system's program trees, installed
  software and caches, and the workspace (whose own sockets stay usable). A daemon that starts
  meanwhile is covered from the next walk on;
- ``[shell] allow_sockets`` (user config) names socket files bound back as they are.

``/tmp`` and ``/dev`` are private already, and abstract sockets live in the network namespace,
which is the command's own unless the network was approved.
"""

from __future__ import annotations

import os
import stat
import threading
import time

from keel.policy import seccomp
from keel.policy.leftovers import read_only_git

RUN = "/run"
# Where sockets are looked for beyond /run, in this order while the budget lasts.
SCAN_ROOTS = ("/var", "/srv", "/opt", "/mnt", "/media", "/home", "/root", "/etc")
# Trees that hold no sockets a command may reach, or that are huge and hold only images and caches.
SKIP = frozenset({"/var/run", "/var/lib/docker", "/var/lib/containers", "/var/cache", "/var/log",
                  "/var/lib/apt", "/var/lib/dpkg", "/var/lib/snapd", "/proc", "/sys", "/dev", "/tmp"})
# Folders of installed software and caches (in homes above all): thousands of entries, no sockets.
SKIP_NAMES = frozenset({".pyenv", ".cache", ".npm", ".cargo", ".rustup", ".nvm", ".local", ".m2", ".gradle",
                        "node_modules", ".git", "site-packages", "dist-packages", "__pycache__", ".venv", "venv",
                        "go", ".vscode-server", ".mozilla", ".config"})
MAX_DEPTH = 4       # /var/lib/mysql/mysql.sock, /home/USER/.gnupg/S.gpg-agent: 3 below a root
MAX_ENTRIES = 60_000
SCAN_BUDGET_S = 0.25
RESCAN_S = 20.0

_lock = threading.Lock()
_cache: tuple[float, tuple[str, ...]] | None = None


def _within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def host_sockets(skip: tuple[str, ...] = ()) -> list[str]:
    """Socket files outside /run found by a bounded walk (cached ``RESCAN_S`` seconds); ``skip``
    (the workspace) is left out."""
    global _cache
    with _lock:
        now = time.monotonic()
        if _cache is None or now - _cache[0] > RESCAN_S:
            _cache = (now, tuple(_walk()))
        found = _cache[1]
    return [s for s in found if not any(_within(s, p) for p in skip)]


def _walk() -> list[str]:
    found: list[str] = []
    seen = 0
    deadline = time.monotonic() + SCAN_BUDGET_S
    stack = [(r, 0) for r in reversed(SCAN_ROOTS) if os.path.isdir(r) and not os.path.islink(r)]
    while stack and seen < MAX_ENTRIES and time.monotonic() < deadline:
        directory, depth = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        if depth < MAX_DEPTH and entry.path not in SKIP and entry.name not in SKIP_NAMES:
                            stack.append((entry.path, depth + 1))
                    elif not entry.is_symlink():
                        try:
                            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                                found.append(entry.path)
                        except OSError:
                            continue
        except OSError:
            continue
    return found


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def run_bind_backs(path_env: str) -> list[str]:
    """What under /run commands still need once it is hidden: PATH directories and resolv.conf's
    target (real paths that exist)."""
    wanted = [os.path.realpath(p) for p in path_env.split(os.pathsep) if os.path.isabs(p)]
    wanted.append(os.path.realpath("/etc/resolv.conf"))
    return sorted({p for p in wanted if _within(p, RUN) and p != RUN and os.path.exists(p)})


def socket_args(workspace: str, path_env: str, allowed: list[str], empty_file: str) -> list[str]:
    """bwrap arguments that put host unix sockets out of reach, the allowed ones bound back."""
    args: list[str] = []
    if os.path.isdir(RUN) and not os.path.islink(RUN) and not _within(workspace, RUN):
        args += ["--tmpfs", RUN]
        for path in run_bind_backs(path_env):
            args += ["--ro-bind", path, path]
    for sock in host_sockets(skip=(workspace,)):
        # the walk's list may be seconds old: a socket gone since would make bwrap fail to cover it
        if not any(_within(sock, a) for a in allowed) and _is_socket(sock):
            args += ["--ro-bind", empty_file, sock]
    for sock in allowed:
        real = os.path.realpath(sock)
        if os.path.isabs(sock) and os.path.exists(real):
            args += ["--bind", real, real]
    return args


def job_binds(ws: str, read_paths: tuple[str, ...], seccomp_fd: int | None) -> list[str]:
    """Nested repositories read-only, the job's own outside reads and the setuid filter."""
    argv: list[str] = []
    for path in read_only_git(ws):
        argv += ["--ro-bind", path, path]
    for path in read_paths:
        real = os.path.realpath(path)
        if os.path.exists(real):
            argv += ["--ro-bind", real, real]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv


def setid_filter_fd() -> int | None:
    """A memfd holding bubblewrap's seccomp program, or None on a machine without the filter. The
    caller passes it to the child and closes it after the start."""
    if not seccomp.supported():
        return None
    fd = os.memfd_create("keel-seccomp", os.MFD_CLOEXEC)
    os.write(fd, seccomp.setid_filter_bytes())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
