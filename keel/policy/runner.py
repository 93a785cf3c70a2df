"""The one door: every process keel starts for the model or on its behalf starts here.

The model's shell commands, the verification gate's checks and ``keel checks --run`` (through
run_shell), hooks, the interpreter probes of check detection, grep's ripgrep, eval's acceptance
commands and MCP servers are each a ``Job``. ``run`` applies, in this order:

- the tier (keel.policy.sandbox: bubblewrap, Landlock, or none), unless the job is not to be
  sandboxed (a hook the *user* marked ``sandbox = false``, an MCP server, keel's own ``git`` and
  ``keel run`` in eval);
- the environment: keel.policy.cmdenv's for every command, then the job's own variables;
- the limits: CPU, per-process memory and file size, the process budget, and what the whole tree
  may use of memory and disk (keel.policy.limits);
- the working directory and the timeout (the caller cuts it to the run's deadline);
- after it, on a workspace it could write: keel.policy.leftovers (setuid bits stripped, every
  repository's run-later files put back, other programs' run-later config kept only if a person
  says so).

It returns a ``JobResult``: exit, signal, stop reason, output, timing and what was put back, as
fields the caller reads instead of parsing text. Only keel.policy.process starts the process
(``prepare`` hands a long-running server's argv and environment to the MCP SDK instead).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from keel.policy import landlock, limits, runlater
from keel.policy.leftovers import Aftercare, Report
from keel.policy.process import KILL_GRACE_S, CommandResult, run_argv
from keel.policy.sandbox import (
    SandboxKind,
    SandboxLaunch,
    SandboxPolicy,
    active_sandbox,
    build_sandboxed,
    session_temp_dir,
)


@dataclass
class Job:
    """One process to start: what, where, and how much it may do."""

    workspace: Path                            # the writable root, and the working directory
    argv: Sequence[str] | None = None          # a program and its arguments, or
    command: str | None = None                 # a bash command line
    policy: SandboxPolicy | None = None        # tier and limits (None: the defaults)
    sandbox: bool = True                       # False: no OS confinement (the user's or keel's own choice)
    limits: bool = True                        # rlimits and the tree's memory/disk bounds
    network: bool = False
    timeout_s: float = 120.0
    output_cap: int = 30_000
    stdin: bytes | None = None
    stderr_apart: bool = False
    env: Mapping[str, str] | None = None       # the environment it starts from (None: keel's own)
    extra_env: Mapping[str, str] = field(default_factory=dict)   # set after scrubbing
    scrub: bool = True                         # False: keel's own child keeps ``env`` as given
    cwd: Path | None = None                    # only where the job is not sandboxed (else: workspace)
    read_paths: tuple[str, ...] = ()           # files outside the workspace it may read
    aftercare: bool = True                     # check the workspace afterwards (it could write it)
    keep_later: runlater.Keep | None = None    # asked before keeping a change to run-later config
    on_output: Callable[[bytes], None] | None = None
    kill_grace_s: float = KILL_GRACE_S
    # set from another thread: the job stops as on Ctrl-C (CommandInterrupted, its tree killed); a run
    # that is not on the main thread cannot be sent SIGINT (keel mcp-serve, ACP)
    cancel: threading.Event | None = None


@dataclass(frozen=True)
class JobResult:
    """What one job did. ``exit_code`` is None when it was killed (``signal``), timed out or stopped
    by a bound (``stopped``: "memory" or "disk")."""

    exit_code: int | None
    output: str                      # stdout (with stderr unless asked apart), capped
    stderr: str | None
    timed_out: bool
    stopped: str | None
    signal: int | None
    truncated: bool
    total_bytes: int
    elapsed_s: float
    sandbox: SandboxKind
    network: bool
    bounds: str = ""                 # how the tree's memory was bounded: "cgroup" or "watch" ("" : none)
    undone: tuple[str, ...] = ()     # run-later changes put back (keel.policy.leftovers)
    stripped: tuple[str, ...] = ()   # files whose setuid/setgid bit was removed
    kept: tuple[str, ...] = ()       # run-later config a person let stand
    refused: tuple[str, ...] = ()    # run-later config put back for want of a person's yes
    checked_all: bool = True         # False: the workspace was too large to check after it

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def notes(self) -> list[str]:
        """Lines for the model or the person: what keel did after the job, and a stop by a bound."""
        out = []
        if self.stopped == "memory":
            out.append("[keel stopped the command: its processes together used more memory than the limit "
                       f"({self.bounds or 'watch'})]")
        elif self.stopped == "disk":
            out.append("[keel stopped the command: it filled the disk by more than the limit for one command]")
        out += Report(list(self.undone), list(self.stripped), list(self.kept), self.checked_all).lines()
        return out


def run(job: Job) -> JobResult:
    """Start ``job`` through the sandbox, limits and aftercare, and wait for its end.

    Raises OSError when it cannot be started (a missing program, a bad working directory) and
    CommandInterrupted on Ctrl-C; a refused or killed job is a result, never an exception."""
    policy = _policy_of(job)
    kind = active_sandbox(policy).kind
    care = Aftercare.begin(str(job.workspace), full=not _setid_refused(kind)) if job.aftercare else None
    launch, env, program = _launch(job, policy)
    bounds = None
    prefix: list[str] = []
    if job.limits:
        writable = [str(job.workspace), *([session_temp_dir(policy)] if launch.kind == "landlock" else [])]
        bounds = limits.bound_tree(policy.memory_bytes, policy.disk_bytes, writable, launch.nproc_budget)
        prefix = bounds.wrapper(launch.rlimits) if launch.kind != "landlock" else []
    helper = launch.argv_prefix
    if bounds is not None and launch.kind == "landlock":      # its exec helper sets them: no wrapper
        helper = landlock.with_limits(helper, bounds.all_rlimits(launch.rlimits), bounds.joins)
    try:
        result = run_argv(
            [*prefix, *helper, *program], _cwd(job, launch.kind), timeout_s=job.timeout_s, env=env,
            output_cap_bytes=job.output_cap, on_output=job.on_output, stdin=job.stdin,
            stderr_apart=job.stderr_apart, watch=bounds.watch() if bounds else None, pass_fds=launch.pass_fds,
            kill_grace_s=job.kill_grace_s, cancel=job.cancel)
    finally:
        for fd in launch.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        oom = bounds.finish() if bounds else None
        report = care.finish(job.keep_later) if care is not None else None
    return _result(result, launch.kind, job.network or policy.network, oom, bounds, report)


def run_logged(argv: Sequence[str], log: IO[str], timeout_s: float = 3600.0) -> int:
    """keel's own program (pip fetching the default model: keel.engine.model_mirror.Run), not the model's:
    no sandbox, its environment as given, every byte of its output to ``log``; the exit code (-1 when
    it was killed or timed out)."""
    def tee(data: bytes) -> None:
        log.write(data.decode("utf-8", "replace"))
        log.flush()

    with tempfile.TemporaryDirectory(prefix="keel-run-") as cwd:
        done = run(Job(Path(cwd), argv=list(argv), sandbox=False, limits=False, scrub=False, aftercare=False,
                       timeout_s=timeout_s, output_cap=4096, on_output=tee))
    return done.exit_code if done.exit_code is not None else -1


@dataclass(frozen=True)
class Prepared:
    """A long-running process (an MCP server) for another to start: its argv, environment and
    working directory, with the runner's tier, environment and limits already in them."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    sandbox: SandboxKind
    bounds: str


def prepare(job: Job) -> Prepared:
    """What ``run`` would start for ``job``, for a caller whose library starts it (the MCP SDK). The
    tree's memory is bounded by a cgroup where one can be made (removed at exit); no watch runs
    beside it, so no disk bound and no memory watch; rlimits apply."""
    policy = _policy_of(job)
    launch, env, program = _launch(job, policy)
    if launch.pass_fds:
        raise ValueError("a prepared job cannot pass descriptors (bubblewrap's filter): run it sandboxed with run()")
    prefix: list[str] = []
    bounds = ""
    if job.limits:
        tree = limits.bound_tree(policy.memory_bytes, policy.disk_bytes, [], launch.nproc_budget)
        prefix, bounds = tree.wrapper(launch.rlimits), tree.how
        limits.remove_at_exit(tree.joins)
    return Prepared([*prefix, *launch.argv_prefix, *program], env, _cwd(job, launch.kind), launch.kind, bounds)


def _launch(job: Job, policy: SandboxPolicy) -> tuple[SandboxLaunch, dict[str, str], list[str]]:
    """The tier's argv prefix and rlimits, the environment (cmdenv's, then the job's own variables;
    as given for keel's own children) and the program."""
    base = dict(job.env if job.env is not None else os.environ)
    launch = build_sandboxed(base, job.workspace, policy, job.network, read_paths=job.read_paths)
    env = {**(launch.env if job.scrub else base), **job.extra_env}
    program = list(job.argv) if job.argv is not None else ["bash", "-c", job.command or ""]
    return launch, env, program


def _policy_of(job: Job) -> SandboxPolicy:
    policy = job.policy if job.policy is not None else SandboxPolicy()
    if job.sandbox or not policy.enabled:
        return policy
    # Not sandboxed: the same limits, no tier (a copy: the session's temp dir stays the original's).
    return replace(policy, enabled=False)


def _setid_refused(kind: SandboxKind) -> bool:
    """Whether this tier refuses setuid/setgid modes (so a file's mode cannot change unseen)."""
    from keel.policy import seccomp

    return kind in ("bubblewrap", "landlock") and seccomp.supported()


def _cwd(job: Job, kind: SandboxKind) -> Path:
    # bubblewrap starts in the workspace (--chdir); elsewhere the job's own directory may differ.
    return job.cwd if job.cwd is not None and kind != "bubblewrap" else job.workspace


def _result(result: CommandResult, kind: SandboxKind, network: bool, oom: str | None,
            bounds: limits.TreeBounds | None, report: Report | None) -> JobResult:
    stopped = result.stopped or oom
    return JobResult(
        exit_code=None if stopped else result.exit_code, output=result.output, stderr=result.stderr,
        timed_out=result.timed_out, stopped=stopped, signal=result.signal, truncated=result.truncated,
        total_bytes=result.total_bytes, elapsed_s=result.elapsed_s, sandbox=kind, network=network,
        bounds=bounds.how if bounds else "",
        undone=tuple(report.undone) if report else (), stripped=tuple(report.stripped) if report else (),
        kept=tuple(report.kept) if report else (), checked_all=report.complete if report else True,
        refused=tuple(report.refused) if report else ())


def neutral_dir() -> Path:
    """An empty directory of its own, for a job that needs no workspace (an interpreter probe):
    nothing there to import or read. The caller removes it."""
    return Path(tempfile.mkdtemp(prefix="keel-neutral-"))
