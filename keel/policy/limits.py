"""Bounds on what a command and all its children use together: memory and disk.

The rlimits of keel.policy.sandbox bound each process (RLIMIT_DATA, and RLIMIT_AS under Landlock;
RLIMIT_FSIZE per file); twenty children each under them add up to twenty times as much. Here the
whole tree is bounded:

- **memory**: a memory cgroup holding the tree, where keel can make one (root, with a writable
  memory controller, cgroup v1 or v2): the kernel stops the tree at the limit. Elsewhere a watch
  sums the tree's proportional set size (``Pss`` of /proc/PID/smaps_rollup: pages shared by forked
  children counted once) every half second and stops the tree above the limit.
- **disk**: a watch of every filesystem the command can write (the workspace's, the Landlock tier's
  private temp dir's): the tree is stopped once that filesystem has filled by more than the disk
  budget since it started, or by more than it had free, less a reserve. Others writing the same
  filesystem at the same time count too; the budget is generous. bubblewrap's private /tmp and
  /dev/shm are tmpfs of that size (keel.policy.sandbox).

The process budget (keel.policy.bwrap: a pids cgroup for root, else RLIMIT_NPROC) and the rlimits
are applied by ``wrapper``: a ``bash`` that sets them with ``ulimit``, joins the cgroups and execs
the command. (A Python ``preexec_fn`` would do it too, but makes Python fork the whole of keel for
every command instead of vfork: 60 ms per command for a 300 MB keel, more with a model in memory.)

``mode()`` names which memory bound this machine gives; the tiers' detail lines say it.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import resource
import shlex
import shutil
import threading
import time
from dataclasses import dataclass, field

from keel.policy.bwrap import nproc_limit, pids_cgroup
from keel.policy.process import Watch, live_tree

MIB = 1024**2
DISK_RESERVE = 256 * MIB          # never let a command take a filesystem's last bytes
MIN_DISK_BUDGET = 64 * MIB
MEMORY_EVERY = 2                  # the memory watch reads the tree every 2nd call (0.5 s)
# Where a memory controller may be mounted: cgroup v1's own hierarchy, v2 unified and hybrid.
_MOUNTS = (("memory", "/sys/fs/cgroup/memory"), ("", "/sys/fs/cgroup"), ("", "/sys/fs/cgroup/unified"))
_serial = itertools.count()
_pending: list[str] = []
_lock = threading.Lock()


@dataclass
class TreeBounds:
    """The bounds of one command tree: the cgroups it joins, the watch for keel.policy.process,
    and what stopped it."""

    memory_bytes: int
    disk_bytes: int
    cgroup: str | None = None                 # the memory cgroup, when one holds the tree
    version: int = 0                          # 1 or 2 (cgroup v1 or v2)
    writable: list[str] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)       # every cgroup the tree joins (memory, pids)
    nproc: int | None = None                  # RLIMIT_NPROC, where no pids cgroup bounds the processes
    _start_used: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    _calls: int = 0
    _oom_before: int = 0
    _pool_key: tuple[int, int | None] = (0, None)
    _made: tuple[str, int, bool] | None = None

    @property
    def how(self) -> str:
        return "cgroup" if self.cgroup else "watch"

    def all_rlimits(self, rlimits: list[tuple[int, tuple[int, int]]]) -> list[tuple[int, tuple[int, int]]]:
        """``rlimits`` and RLIMIT_NPROC where no pids cgroup bounds the processes."""
        extra = [(resource.RLIMIT_NPROC, (self.nproc, self.nproc))] if self.nproc is not None else []
        return rlimits + extra

    def wrapper(self, rlimits: list[tuple[int, tuple[int, int]]]) -> list[str]:
        """The argv prefix that applies ``rlimits`` (and RLIMIT_NPROC) and joins the cgroups."""
        return wrapper(self.all_rlimits(rlimits), self.joins)

    def start(self) -> None:
        """Take the filesystems' fill before the command starts."""
        for path in self.writable:
            with contextlib.suppress(OSError):
                st = os.stat(path)
                if st.st_dev not in self._start_used:
                    fs = os.statvfs(path)
                    self._start_used[st.st_dev] = (path, _used(fs), fs.f_bavail * fs.f_frsize)

    def watch(self) -> Watch:
        def check(pid: int) -> str | None:
            self._calls += 1
            if self._over_disk():
                return "disk"
            if self.cgroup is None and self._calls % MEMORY_EVERY == 0 and tree_memory(pid) > self.memory_bytes:
                return "memory"
            return None

        return check

    def _over_disk(self) -> bool:
        for path, used, free in self._start_used.values():
            try:
                grown = _used(os.statvfs(path)) - used
            except OSError:
                continue
            if grown > max(min(self.disk_bytes, free - DISK_RESERVE), MIN_DISK_BUDGET):
                return True
        return False

    def finish(self) -> str | None:
        """Give the memory cgroup back for the next command (kept while empty: making one costs more
        than the command's own start); "memory" when the kernel killed in it for the limit."""
        if self.cgroup is None:
            return None
        hit = _oom_kills(self.cgroup, self.version) > self._oom_before
        if self._made is not None:
            _release(self._made, self._pool_key)
        return "memory" if hit else None


# ulimit's option and unit for each rlimit keel sets (bash: sizes in 1024-byte blocks).
_ULIMIT = {resource.RLIMIT_CPU: ("-t", 1), resource.RLIMIT_FSIZE: ("-f", 1024), resource.RLIMIT_DATA: ("-d", 1024),
           resource.RLIMIT_CORE: ("-c", 1024), resource.RLIMIT_NPROC: ("-u", 1), resource.RLIMIT_AS: ("-v", 1024)}


def wrapper(rlimits: list[tuple[int, tuple[int, int]]], joins: list[str]) -> list[str]:
    """``bash -c SCRIPT keel-limits`` to put before a program: the script sets each rlimit (soft,
    then hard), writes itself into each cgroup, then execs the program. If any step fails the
    program does not run (exit 126): a command believed bounded never runs unbounded."""
    steps = []
    for rid, (soft, hard) in rlimits:
        flag, unit = _ULIMIT[rid]
        values = ["unlimited" if v == resource.RLIM_INFINITY else str(max(v // unit, 0)) for v in (soft, hard)]
        steps.append(f"ulimit -S {flag} {values[0]} && ulimit -H {flag} {values[1]}")
    steps += [f"printf 0 > {shlex.quote(os.path.join(j, 'cgroup.procs'))}" for j in joins]
    script = " && ".join(steps) if steps else "true"
    script += ' || { echo "keel: could not apply the command\'s limits, not run" >&2; exit 126; }; exec "$@"'
    return [_bash(), "--noprofile", "--norc", "-c", script, "keel-limits"]


def _bash() -> str:
    return shutil.which("bash") or "/bin/bash"


def _used(fs: os.statvfs_result) -> int:
    return (fs.f_blocks - fs.f_bfree) * fs.f_frsize


def tree_memory(leader: int) -> int:
    """Bytes the tree under ``leader`` holds: its proportional set sizes (resident sizes where the
    kernel has no smaps_rollup)."""
    total = 0
    for pid in [leader, *live_tree(leader)]:
        total += _pss(pid)
    return total


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# ---------------------------------------------------------------- the memory cgroup


def _own_paths() -> dict[str, str]:
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(","):
                    own[name] = path
    except (OSError, ValueError):
        pass
    return own


def _parents() -> list[tuple[str, int]]:
    """Directories a memory cgroup may be made in: (path, cgroup version)."""
    own = _own_paths()
    found: list[tuple[str, int]] = []
    for controller, mount in _MOUNTS:
        if controller not in own:
            continue
        for candidate in (os.path.join(mount, own[controller].lstrip("/")), mount):
            if controller == "memory" and os.path.exists(os.path.join(candidate, "memory.limit_in_bytes")):
                found.append((candidate, 1))
                break
            if controller == "" and _v2_memory(candidate):
                found.append((candidate, 2))
                break
    return found


def _v2_memory(directory: str) -> bool:
    try:
        with open(os.path.join(directory, "cgroup.subtree_control"), encoding="ascii") as fh:
            return "memory" in fh.read().split()
    except OSError:
        return False


# Empty memory cgroups of earlier commands, by (limit, process budget): the next command takes one.
_free: dict[tuple[int, int | None], list[tuple[str, int, bool]]] = {}


def _take(limit: int, nproc_budget: int | None) -> tuple[str, int, bool] | None:
    with _lock:
        pool = _free.get((limit, nproc_budget), [])
        while pool:
            made = pool.pop()
            if _empty(made[0]):
                return made
            _pending.append(made[0])          # something of an earlier command still runs there
    return None


def _release(made: tuple[str, int, bool], key: tuple[int, int | None]) -> None:
    if not _empty(made[0]):
        _remove(made[0])
        return
    with _lock:
        _free.setdefault(key, []).append(made)


def _empty(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            return not fh.read().strip()
    except OSError:
        return False


def memory_cgroup(limit: int, nproc_budget: int | None = None) -> tuple[str, int, bool] | None:
    """A fresh memory cgroup of ``limit`` bytes (swap included) for one command tree: (its path, the
    cgroup version, whether it also bounds the processes to ``nproc_budget``: v2 with the pids
    controller), or None where none can be made here."""
    _remove_pending()
    for parent, version in _parents():
        path = os.path.join(parent, f"keel-mem-{os.getpid()}-{next(_serial)}")
        try:
            os.mkdir(path, 0o755)
        except OSError:
            continue
        try:
            if version == 1:
                _write(path, "memory.limit_in_bytes", limit)
                with contextlib.suppress(OSError):     # absent without swap accounting
                    _write(path, "memory.memsw.limit_in_bytes", limit)
            else:
                _write(path, "memory.max", limit)
                with contextlib.suppress(OSError):
                    _write(path, "memory.swap.max", 0)
                with contextlib.suppress(OSError):     # the whole tree goes when one of it must
                    _write(path, "memory.oom.group", 1)
                if nproc_budget is not None and os.path.exists(os.path.join(path, "pids.max")):
                    _write(path, "pids.max", nproc_budget)
                    return path, version, True
            return path, version, False
        except OSError:
            _remove(path)
    return None


def _write(directory: str, name: str, value: int) -> None:
    with open(os.path.join(directory, name), "w", encoding="ascii") as fh:
        fh.write(str(value))


def _oom_kills(path: str, version: int) -> int:
    name = "memory.oom_control" if version == 1 else "memory.events"
    try:
        with open(os.path.join(path, name), encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _remove(path: str) -> None:
    """Remove a cgroup once its processes are gone (they may still be exiting: tried again later)."""
    for _ in range(20):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
    with _lock:
        _pending.append(path)


def remove_at_exit(paths: list[str]) -> None:
    """Cgroups of a process that outlives this call (an MCP server): removed when keel exits."""
    with _lock:
        _pending.extend(paths)


@atexit.register
def _remove_all() -> None:
    with _lock:
        for pool in _free.values():
            _pending.extend(path for path, _, _ in pool)
        _free.clear()
    _remove_pending()


def _remove_pending() -> None:
    with _lock:
        for path in list(_pending):
            with contextlib.suppress(OSError):
                os.rmdir(path)
                _pending.remove(path)


_mode_lock = threading.Lock()
_mode: str | None = None


def mode() -> str:
    """"cgroup" when this process can bound a tree's memory with a cgroup, else "watch" (probed once)."""
    global _mode
    with _mode_lock:
        if _mode is None:
            made = memory_cgroup(64 * MIB)
            _mode = "cgroup" if made else "watch"
            if made:
                _remove(made[0])
        return _mode


def describe() -> str:
    how = ("a memory cgroup" if mode() == "cgroup"
           else "a watch of its summed memory (no writable memory cgroup here), plus rlimits per process")
    return (f"memory of the whole command tree bounded by {how}; disk it fills bounded by a watch of the "
            "filesystems it writes")


def bound_tree(memory_bytes: int, disk_bytes: int, writable: list[str], nproc_budget: int | None) -> TreeBounds:
    """The bounds for one command tree; ``writable``: where it may write (for the disk watch);
    ``nproc_budget``: processes it may add (None: no bound)."""
    made = _take(memory_bytes, nproc_budget) or memory_cgroup(memory_bytes, nproc_budget)
    bounds = TreeBounds(memory_bytes, disk_bytes, made[0] if made else None, made[1] if made else 0,
                        list(writable), [made[0]] if made else [])
    if made:
        bounds._oom_before, bounds._pool_key = _oom_kills(made[0], made[1]), (memory_bytes, nproc_budget)
        bounds._made = made
    if nproc_budget is not None and not (made and made[2]):
        # A v2 process is in one cgroup only: beside a v2 memory cgroup, no second one for pids.
        pids = pids_cgroup(nproc_budget) if not (made and made[1] == 2) else None
        if pids is not None:
            bounds.joins.insert(0, pids)
        else:
            _, hard = resource.getrlimit(resource.RLIMIT_NPROC)     # raising a hard limit needs privileges
            wanted = nproc_limit(nproc_budget)
            bounds.nproc = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    bounds.start()
    return bounds
