"""Landlock: the OS sandbox tier that needs no package (Linux >= 5.13, raw syscalls over ctypes).

A ruleset is an allow-list: once applied (by ``keel.policy.landlock_exec`` in a child of its own
process, right before it execs bash), the process and everything it starts can open only what
the rules grant, whatever its user — root included:

- read + write + execute in the workspace and in a private per-session temp dir;
- read + execute on system directories and the interpreter/toolchain prefixes in use; /etc entry
  by entry, without root-only secrets (``ETC_SECRETS``: shadow, sudoers, ssh host keys, ...);
- read + write on a few harmless devices (/dev/null, /dev/urandom, /dev/ptmx for a new pty, ...):
  never a terminal (/dev/pts, /dev/tty), and /dev/shm only while it holds nothing the command could
  overwrite (``shared_memory_free``);
- nothing else: the rest of ``$HOME`` (``~/.ssh``, ``~/.aws``, keel's own data), other users'
  files, ``/tmp`` and ``/var`` outside the workspace;
- from ABI 4, no TCP bind or connect unless the network was approved (this also stops a test
  that starts a local server: unlike bubblewrap there is no private loopback);
- from ABI 6, no signals to and no abstract unix sockets of processes outside the sandbox.

Each ABI adds rights; an older kernel simply enforces fewer of them, and ``describe`` says so.
What Landlock does not cover on any ABI up to 7: UDP, connecting to existing unix socket files,
and seeing other processes (there is no PID namespace). The exec helper adds a seccomp filter
(``keel.policy.seccomp``, x86_64) refusing every non-unix socket, device nodes, TIOCSTI and other
kernel-wide calls, kills every process the command leaves behind, and sets process and
address-space limits; unix socket files stay open.

This module has no side effects at import time: libc is loaded on first use.
"""

from __future__ import annotations

import contextlib
import ctypes
import fnmatch
import functools
import json
import os
import platform
import stat
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

# Syscall numbers: the generic table, shared by x86_64 and aarch64 (and every 64-bit arch but alpha).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_SUPPORTED_MACHINES = frozenset({"x86_64", "amd64", "aarch64", "arm64"})
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15          # ABI 2, 3, 5
_FS_V1 = (1 << 13) - 1
_FS_BY_ABI = {1: _FS_V1, 2: _FS_V1 | REFER, 3: _FS_V1 | REFER | TRUNCATE, 4: _FS_V1 | REFER | TRUNCATE}
_FS_LATEST = _FS_V1 | REFER | TRUNCATE | IOCTL_DEV
# Rights that make sense on a file (a rule on a regular file or device with others is EINVAL).
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1                   # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1       # ABI 6

READ_EXEC = EXECUTE | READ_FILE | READ_DIR
# Never MAKE_CHAR or MAKE_BLOCK: a device node in the workspace would open a raw disk or /dev/kmsg.
READ_WRITE = _FS_LATEST & ~(MAKE_CHAR | MAKE_BLOCK)
DEVICE_RW = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV

# System directories every command may read and execute from (those that exist).
SYSTEM_READ_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
                    "/sys", "/nix/store", "/snap")
# /etc is granted entry by entry, leaving out what only root may read because it is a secret
# (fnmatch patterns relative to /etc; a directory holding one is granted per entry in turn).
# Symlinks are not granted: their targets (mostly under /usr) are judged where they are.
ETC_SECRETS = ("shadow", "gshadow", "shadow-", "gshadow-", "shadow.*", "gshadow.*", "sudoers", "sudoers.d",
               "ssh/ssh_host_*_key", "ssh/*_key", "security/opasswd", "ssl/private", "pki/tls/private",
               "krb5.keytab", "ipsec.secrets", "ipsec.d/private", "ppp/chap-secrets", "ppp/pap-secrets",
               "wireguard", "NetworkManager/system-connections", "letsencrypt", "libvirt/secrets",
               "docker/key.json", "rancher/k3s/k3s.yaml", "kubernetes/admin.conf", "kubernetes/pki")
# Not all of /proc: Landlock still lets a command read /proc/<pid>/environ of keel itself (its
# parent, holding the API key), so only system-wide facts tools ask for are readable. Without a
# PID namespace there is no private /proc to offer instead; ps and psutil fail here.
PROC_READ = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime",
             "/proc/version", "/proc/filesystems", "/proc/sys")
# Devices commands write to as a matter of course; never raw disks or memory, and never a terminal:
# /dev/pts/N is the user's other terminals (typing into them, reading what they show), and /dev/tty
# is no use to a command without a controlling terminal. /dev/ptmx makes a new pseudo-terminal,
# whose other end a program reaches with TIOCGPTPEER (glibc's openpty), not through /dev/pts.
DEVICE_PATHS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx")
# POSIX shared memory and named semaphores (Python's multiprocessing locks) are files created here.
SHARED_MEMORY_DIR = "/dev/shm"
# Git needs the user's identity to commit; these hold settings, not credentials (~/.git-credentials
# stays unreadable).
HOME_READ_FILES = (".gitconfig", ".config/git")
# Toolchains users install under $HOME, read-only as bubblewrap leaves them: only the parts that
# hold compilers and downloaded packages, never the files beside them that hold tokens
# (~/.cargo/credentials.toml, ~/.m2/settings.xml, ~/.gradle/gradle.properties, ~/.npmrc).
HOME_TOOLCHAINS = (".rustup", ".cargo/bin", ".cargo/registry", ".cargo/git", ".pyenv", ".nvm", ".volta",
                   ".asdf", ".bun/bin", ".deno/bin", ".local/bin", ".local/lib", ".local/share/uv",
                   "go/bin", "go/pkg/mod", ".m2/repository", ".gradle/caches", ".gradle/wrapper",
                   ".sdkman/candidates", ".npm/_cacache")


class LandlockError(OSError):
    pass


@dataclass(frozen=True)
class LandlockPlan:
    """What one command may touch: plain data, so it crosses into the exec helper as JSON."""

    read_write: tuple[str, ...]
    read_exec: tuple[str, ...]
    devices: tuple[str, ...]
    network: bool
    address_space: int | None = None      # RLIMIT_AS of the command (counts shared mappings)
    shm_cleanup: bool = True              # remove what it left in /dev/shm (keel.policy.shm)
    # (resource, soft, hard) set for the command, and cgroups the helper joins before it forks
    # (keel.policy.limits: here instead of a wrapper, one exec fewer per command)
    rlimits: tuple[tuple[int, int, int], ...] = ()
    cgroups: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LandlockPlan:
        data = json.loads(text)
        return cls(tuple(data["read_write"]), tuple(data["read_exec"]), tuple(data["devices"]),
                   bool(data["network"]), data.get("address_space"), bool(data.get("shm_cleanup", True)),
                   tuple((int(r), int(s), int(h)) for r, s, h in data.get("rlimits", ())),
                   tuple(str(c) for c in data.get("cgroups", ())))


# ---------------------------------------------------------------- the kernel


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 where it is missing, disabled, or the machine is not supported."""
    if sys.platform != "linux" or platform.machine().lower() not in _SUPPORTED_MACHINES:
        return 0
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def fs_rights(abi: int) -> int:
    return _FS_BY_ABI.get(abi, _FS_LATEST) if abi >= 1 else 0


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock {what}: {os.strerror(errno)}")
    return result


def restrict(plan: LandlockPlan, abi: int) -> None:
    """Confine the calling process (and all it will exec or fork) to ``plan``. Irreversible.

    Missing paths are skipped; a failure to build or apply the ruleset raises, so the caller
    never runs a command it believed confined without confinement."""
    if abi < 1:
        raise LandlockError(0, "landlock is not available on this kernel")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4:
        size = 16
        # Handling TCP with no port rule denies every bind and connect.
        attr.handled_access_net = 0 if plan.network else NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    libc = _libc()
    ruleset = _check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "create_ruleset")
    try:
        for paths, rights in ((plan.read_exec, READ_EXEC), (plan.devices, DEVICE_RW), (plan.read_write, READ_WRITE)):
            for path in paths:
                _add_path_rule(libc, ruleset, path, rights & handled)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "restrict_self")
    finally:
        os.close(ruleset)


def _add_path_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return          # gone since the plan was made: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _check(libc.syscall(_SYS_ADD_RULE, ruleset, ctypes.c_uint32(_RULE_PATH_BENEATH), ctypes.byref(rule),
                            ctypes.c_uint32(0)), f"add_rule({path})")
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the plan (pure but for stat)


def _within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def toolchain_dirs(env: Mapping[str, str]) -> list[str]:
    """Where the interpreter and the tools on PATH live: prefixes of this Python (and its venv)
    plus every absolute directory on the command's PATH."""
    import site
    import sysconfig

    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))]
    found += [p for p in sysconfig.get_paths().values() if p]
    with contextlib.suppress(AttributeError):     # site imported with -S
        found += site.getsitepackages() + [site.getusersitepackages()]
    found += [p for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return found


def etc_entries(root: str = "/etc", secrets: Iterable[str] = ETC_SECRETS) -> list[str]:
    """What of ``root`` is granted: every entry but the secrets, descending only into the
    directories that hold one."""
    patterns = tuple(secrets)
    found: list[str] = []

    def walk(directory: str, rel: str) -> None:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            path, key = os.path.join(directory, name), rel + name
            if any(fnmatch.fnmatchcase(key, p) for p in patterns) or os.path.islink(path):
                continue
            if os.path.isdir(path) and any(p.startswith(key + "/") for p in patterns):
                walk(path, key + "/")
            else:
                found.append(path)

    walk(root, "")
    return found


# The read grants are the same for every command of a session: worked out once, then again after
# GRANTS_TTL_S (a toolchain installed meanwhile is granted from then on). ~100 ms each time.
GRANTS_TTL_S = 60.0
_grants: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], tuple[float, tuple[str, ...]]] = {}
_grants_lock = threading.Lock()


def _read_grants(env: Mapping[str, str], protected: Iterable[str], extra_read: Iterable[str]) -> tuple[str, ...]:
    homes = [h for h in {env.get("HOME", ""), os.environ.get("HOME", ""), os.path.expanduser("~")}
             if os.path.isabs(h) and h != "/"]
    guarded = [os.path.realpath(p) for p in [*homes, *protected] if os.path.isabs(p)]
    home_files = [os.path.join(h, name) for h in homes for name in (*HOME_READ_FILES, *HOME_TOOLCHAINS)]
    candidates = [*SYSTEM_READ_DIRS, *etc_entries(), *PROC_READ, *toolchain_dirs(env), *extra_read, *home_files]
    candidates.append(os.path.realpath("/etc/resolv.conf"))     # often a link into /run
    read: dict[str, None] = {}
    for path in candidates:
        real = os.path.realpath(path)
        if real == "/" or real in read or not os.path.exists(real):
            continue
        if any(_within(g, real) for g in guarded):
            continue
        read[real] = None
    return tuple(read)


def plan(workspace: str, temp_dir: str, env: Mapping[str, str], *, network: bool,
         extra_read: Iterable[str] = (), protected: Iterable[str] = (), address_space: int | None = None) -> LandlockPlan:
    """The rules for one command. A read grant that would contain a home directory or a
    ``protected`` path (keel's data, credential dirs) is dropped: granting ``/home`` to reach a
    tool would hand out every key beneath it."""
    key = (env.get("HOME", ""), env.get("PATH", ""), tuple(protected), tuple(extra_read))
    now = time.monotonic()
    with _grants_lock:
        cached = _grants.get(key)
        if cached is None or now - cached[0] > GRANTS_TTL_S:
            cached = _grants[key] = (now, _read_grants(env, key[2], key[3]))
    read = cached[1]
    rw = [os.path.realpath(workspace), os.path.realpath(temp_dir)]
    rw += [SHARED_MEMORY_DIR] if shared_memory_free() else []
    devices = [d for d in DEVICE_PATHS if os.path.exists(d)]
    return LandlockPlan(tuple(rw), read, tuple(devices), network, address_space)


def shared_memory_free(directory: str = SHARED_MEMORY_DIR, uid: int | None = None) -> bool:
    """Whether ``directory`` (the host's /dev/shm) may be granted to a command: it exists and holds
    no entry the command could open for writing. Landlock grants a directory whole, so the only way
    to keep the host's existing shared memory out of reach is not to grant it while it holds some
    this user can write (its own, or world-writable, or any at all for root): POSIX shared memory
    and semaphores (multiprocessing's locks) then fail for that command, and run_shell says why.
    ``uid``: whose commands (default: this process's)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        uid = os.geteuid() if uid is None else uid
        for name in os.listdir(fd):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if uid == 0 or st.st_uid == uid or st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
                return False
        return True
    finally:
        os.close(fd)


def describe(abi: int) -> str:
    """What the tier enforces on this kernel, in one sentence, without overstating it; it ends
    with what the tier cannot stop."""
    parts = ["writes only to the workspace and a private temp dir (TMPDIR)",
             "reads limited to the workspace, system directories and the toolchain (the rest of $HOME, "
             "with ~/.ssh, ~/.aws and keel's data, and root-only secrets in /etc are unreadable)"]
    from keel.policy import seccomp

    if seccomp.supported():
        parts.append("no sockets but unix ones unless the network is approved (seccomp; also UDP, raw, MPTCP)"
                     + ("; a local test server cannot listen either" if abi >= 4 else ""))
        parts.append("no terminal injection, device nodes, bpf, perf, keyrings, SysV IPC, io_uring, or "
                     "prlimit/setpriority on other processes (seccomp)")
    elif abi >= 4:
        parts.append("no TCP connect or bind unless the network is approved; UDP NOT confined (the seccomp filter "
                     f"exists for x86_64 only, this is {platform.machine()})")
    else:
        parts.append(f"network NOT confined (Landlock ABI {abi} < 4, no seccomp filter on {platform.machine()})")
    if abi < 2:
        parts.append("no renames across directories (ABI 1)")
    if abi >= 6:
        parts.append("no signals or abstract sockets to outside processes")
    parts.append("every process it starts is killed when it ends (subreaper); process, address-space, CPU and "
                 "file-size limits; /dev/shm files it made are removed; changes to .git/config, .git/hooks and "
                 ".keel/ are undone; root keeps no capabilities but file ownership; /proc limited to system-wide "
                 "files")
    parts.append("cannot stop: connecting to unix socket files, seeing other processes' pids (no PID namespace), "
                 "reading .env files in the workspace" + ("" if abi >= 6 else ", signals to this user's processes"))
    return f"landlock (ABI {abi}: {'fs+net' if abi >= 4 else 'fs'}): " + "; ".join(parts)


# ---------------------------------------------------------------- launching


def _import_root() -> str:
    """The directory ``keel`` is imported from, so the helper finds it without site or PYTHONPATH."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def exec_argv(plan: LandlockPlan) -> list[str]:
    """The argv prefix that runs a program under ``plan`` (the program and its args follow)."""
    boot = (f"import sys;sys.path.insert(0,{_import_root()!r});"
            "from keel.policy.landlock_exec import main;sys.exit(main())")
    return [sys.executable, "-I", "-S", "-c", boot, plan.to_json(), "--"]


def with_limits(argv_prefix: list[str], rlimits: list[tuple[int, tuple[int, int]]], cgroups: list[str]) -> list[str]:
    """``exec_argv``'s prefix with the helper also setting ``rlimits`` and joining ``cgroups``."""
    plan = replace(LandlockPlan.from_json(argv_prefix[5]), rlimits=tuple((r, s, h) for r, (s, h) in rlimits),
                   cgroups=tuple(cgroups))
    return [*argv_prefix[:5], plan.to_json(), *argv_prefix[6:]]


def probe() -> tuple[int, str | None]:
    """The kernel's Landlock ABI, and why the exec helper cannot confine a command here (None: it
    can). Runs ``true`` under a real ruleset once, so a kernel or seccomp filter that refuses the
    syscalls is found before any command relies on them."""
    import shutil
    import tempfile

    from keel.policy.process import run_argv

    abi = abi_version()
    if abi < 1:
        return 0, "Landlock is not available (Linux >= 5.13 with landlock among the enabled LSMs)"
    scratch = tempfile.mkdtemp(prefix="keel-probe-")
    try:
        argv = exec_argv(plan(scratch, scratch, os.environ, network=False)) + ["true"]
        result = run_argv(argv, "/", timeout_s=20, env=dict(os.environ), stderr_apart=True)
    except OSError as exc:
        return abi, f"the Landlock helper failed to start: {exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if result.exit_code != 0:
        reason = (result.stderr or "").strip().splitlines()
        return abi, f"Landlock does not work here: {reason[-1] if reason else f'exit {result.exit_code}'}"
    return abi, None
