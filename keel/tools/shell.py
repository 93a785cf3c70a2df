"""run_shell: one bash command in the workspace, through the shell policy and the OS sandbox.

Flow: policy (the approval gate, or the risk classifier when no gate is configured; never
fail open) -> sandbox (bubblewrap, landlock or rlimits, allow-listed environment) -> run with timeout, tree
kill and output cap -> a result whose first line is the exit status, plus a CheckRun so the
stop decider can count passing tests/builds as evidence.
"""

from __future__ import annotations

import dataclasses
import re
import signal as signals
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from keel.context.output import OUTPUTS_DIR, OutputFacts, OutputSpill, present
from keel.policy.runner import Job, JobResult, run
from keel.policy.sandbox import HidingIncomplete, SandboxPolicy
from keel.tools.base import (
    CheckRun,
    Tool,
    ToolAnnotations,
    ToolArgs,
    ToolContext,
    ToolResult,
    ToolSpec,
    before_change,
)

MAX_TIMEOUT_S = 600
# Below this much of the run's wall clock left, a command is not started at all.
MIN_USEFUL_S = 1.0


class RunShellArgs(ToolArgs):
    command: str = Field(
        min_length=1,
        description=(
            "The bash command line to run, e.g. `python -m pytest -q tests/test_api.py` or "
            "`git diff --stat`. Chain steps with && in one command."
        ),
    )
    timeout: int | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_S,
        description="Seconds before the command and every process it started are killed "
                    "(default 120, max 600). Raise it only for slow builds or test suites.",
    )


DESCRIPTION = (
    "Run a bash command in the workspace root and get its exit code and combined stdout/stderr. "
    "Use it to run tests, builds, linters, type checkers, git and project scripts. For reading, "
    "listing and searching files prefer read_file, list_dir, grep and find_files; to change files "
    "use edit_file and write_file, not sed or echo redirection. "
    "The command is non-interactive: stdin is closed, so anything that prompts fails; pass flags "
    "such as -y, --yes, --no-edit or -m. Each call starts a fresh shell in the workspace root: "
    "`cd` and exported variables do not carry over. Background processes are stopped when the "
    "command ends, so start a server and the client that tests it in the same command. Files "
    "outside the workspace may be read-only and network access may be blocked. Long output of "
    "tests, builds, linters and failed commands is reduced to the failures, errors and summary line, "
    "and the full output is saved to a file whose path is given (read it with read_file)."
)


@dataclass
class _Authorization:
    allowed: bool
    message: str
    decision: str
    network: bool = False


def _authorize(command: str, ctx: ToolContext) -> _Authorization:
    """Ask the approval gate; without one, apply the risk classifier. Never fail open."""
    if ctx.approval is not None:
        outcome = ctx.approval.authorize_shell(command)
        return _Authorization(bool(outcome.allowed), str(getattr(outcome, "message", "") or ""),
                              str(getattr(outcome, "decision", "")), bool(getattr(outcome, "network", False)))
    from keel.policy.sandbox import active_sandbox
    from keel.policy.shell.risk import classify_command

    tier = active_sandbox(ctx.sandbox)
    verdict = classify_command(command, ctx.workspace, confined=tier.confining, pid_namespace=tier.kind == "bubblewrap")
    decision = str(getattr(verdict, "decision", ""))
    reason = str(getattr(verdict, "reason", "") or "").rstrip(".")
    part = getattr(verdict, "part", None)
    where = f" (in `{part}`)" if part and part != command else ""
    if decision == "allow":
        return _Authorization(True, "", decision)
    if decision == "ask":
        return _Authorization(False, f"Not run: this command needs a person's approval{where}: {reason}. No one "
                                     "can approve commands in this run; find a safer way to reach the goal.",
                              decision)
    return _Authorization(False, f"Refused{where}: {reason or 'the shell policy denies this command'}.",
                          decision or "deny")


_SIGNAL_NOTES: dict[int, str] = {
    signals.SIGXCPU: "the CPU time limit was reached",
    signals.SIGXFSZ: "the file size limit was reached",
    signals.SIGKILL: "possibly out of memory or over the hard CPU limit",
    signals.SIGSEGV: "segmentation fault",
    signals.SIGABRT: "aborted",
}
_READ_ONLY_SIGNS = ("Read-only file system",)
_NETWORK_SIGNS = ("Temporary failure in name resolution", "Network is unreachable", "Could not resolve host",
                  "Name or service not known", "getaddrinfo failed", "No address associated with hostname")


def _status_line(result: JobResult, timeout_s: float) -> str:
    if result.stopped:
        return f"exit code: none — stopped at the {result.stopped} limit for one command"
    if result.timed_out:
        return f"timed out after {timeout_s:g} s — the whole process tree was killed"
    if result.signal is not None and result.exit_code is None:
        return f"exit code: none — killed by {_describe_signal(result.signal)}"
    code = result.exit_code
    # Shells (and bubblewrap) report a child killed by signal N as exit code 128+N.
    if code is not None and 128 < code < 128 + 32:
        return f"exit code: {code} (128+{code - 128}: probably killed by {_describe_signal(code - 128)})"
    return f"exit code: {code}"


def _describe_signal(number: int) -> str:
    try:
        name = signals.Signals(number).name
    except ValueError:
        name = str(number)
    note = _SIGNAL_NOTES.get(number)
    return f"signal {name}" + (f" ({note})" if note else "")


# A socket or a TCP bind/connect refused: Python's PermissionError from socket()/bind/connect, node's
# "listen EACCES", Go's "bind: permission denied". Under Landlock the seccomp filter answers EPERM to
# socket() of every family but unix, and the TCP rule EACCES to bind/connect.
_NET_REFUSED = re.compile(r"(?i)(?:\b(?:socket|bind|connect|listen|server_bind|create_connection|urlopen)\b.{0,400}?"
                          r"(?:permission denied|EACCES|Errno 13|Operation not permitted|EPERM|Errno 1\b))"
                          r"|(?:listen EACCES)", re.DOTALL)
LANDLOCK_NETWORK_HINT = (
    "[sandbox (landlock): the network rule refused this: a command gets no network socket here (unix sockets "
    "only, by the seccomp filter) and no TCP bind or connect (Landlock's TCP rule), not even a test server on "
    "127.0.0.1. To allow it, set `[shell] network = true` in your user config (~/.config/keel/config.toml), or "
    "let a person approve a command that needs the network; where bubblewrap works, commands get a private "
    "loopback instead]")


def _sandbox_hints(output: str, kind: str, network: bool) -> list[str]:
    """Explain failures the sandbox caused, so the model does not chase a phantom bug."""
    hints = []
    if kind == "bubblewrap" and any(s in output for s in _READ_ONLY_SIGNS):
        hints.append("[sandbox: only the workspace and /tmp are writable; install packages into a "
                     "virtualenv inside the workspace]")
        if ".git" in output or ".keel" in output:
            # git add/commit fail here by design (hooks and config run code later, outside any sandbox)
            hints.append("[sandbox: .git and .keel are read-only for commands (git add, commit, config and hooks "
                         "cannot change them); leave committing to the person, edit the files only]")
    if kind == "bubblewrap" and not network and any(s in output for s in _NETWORK_SIGNS):
        hints.append("[sandbox: network access is off for this command]")
    if kind == "landlock" and not network and _NET_REFUSED.search(output):
        hints.append(LANDLOCK_NETWORK_HINT)
    if kind == "landlock" and "Permission denied" in output:
        # Landlock refuses with EACCES for files and sockets alike, so name both causes.
        hints.append("[sandbox (landlock): only the workspace and $TMPDIR are writable; outside them only system "
                     "and toolchain directories are readable (not the rest of $HOME); terminals (/dev/pts) and, "
                     "while it holds files of yours, /dev/shm (POSIX shared memory, multiprocessing locks) are out "
                     "of reach; install packages into the workspace (a venv, or pip install --target)]")
    if kind == "landlock" and "Operation not permitted" in output:
        hints.append("[sandbox (landlock): refused here: " + ("sockets other than unix ones (the network is "
                     "off), " if not network else "") + "device nodes, System V IPC, bpf, perf, keyrings, "
                     "and changing other processes' limits or priority]")
    return hints


def keep_later(ctx: ToolContext) -> Callable[[str], bool]:
    """Whether a command's change to another program's run-later config may stand: the approval
    gate's answer for an edit of that path (a person, or an edit(...) allow rule; never unasked)."""
    authorize = getattr(ctx.approval, "authorize_edit", None)

    def keep(path: str) -> bool:
        return bool(authorize is not None and authorize(path).allowed)

    return keep


def _check_run(command: str, kind: str | None, exit_code: int | None, timed_out: bool, output: str) -> CheckRun:
    """The command as evidence: a test run says how many tests ran and whether it ran the whole suite."""
    from keel.outputs.checks import whole_test_run
    from keel.outputs.counts import run_counts

    counts = run_counts(output) if kind == "test" else None
    return CheckRun(command=command, exit_code=exit_code, kind=kind, timed_out=timed_out,
                    tests_ran=counts.ran if counts is not None else None,
                    deselected=counts.deselected if counts is not None else 0,
                    whole_suite=kind == "test" and whole_test_run(command))


def _check_kind(command: str) -> str | None:
    from keel.outputs.checks import classify_check

    return classify_check(command)


def _exposure(command: str, ctx: ToolContext, exc: HidingIncomplete) -> ToolResult | None:
    """Where the tier cannot hide every secret file (keel.policy.hide), a person decides; the command
    never runs silently with secrets in view. None: allowed to run with them in view."""
    confirm = getattr(ctx.approval, "authorize_exposure", None)
    exposed = confirm(command, str(exc)) if confirm is not None else None
    if exposed is None or not exposed.allowed:
        return ToolResult.error(str(getattr(exposed, "message", "")) or f"Not run: {exc}; no one can allow it.",
                                decision="ask")
    return None


def _meta(result: JobResult, decision: str, saved: object) -> dict[str, Any]:
    return {
        "elapsed_s": round(result.elapsed_s, 3), "sandbox": result.sandbox, "truncated": result.truncated,
        "total_bytes": result.total_bytes, "timed_out": result.timed_out, "exit_code": result.exit_code,
        "signal": result.signal, "network": result.network, "decision": decision,
        "saved_output": str(saved) if saved else None, "undone": list(result.undone),
        "stripped": list(result.stripped), "kept": list(result.kept), "stopped": result.stopped,
    }


def run_shell(args: RunShellArgs, ctx: ToolContext, *, for_model: bool = False) -> ToolResult:
    """Run one command. ``for_model``: long output is reduced to what matters and saved in full under
    the session directory (keel.context.output); the verification gate calls without it and judges
    the output itself."""
    command = args.command
    if "\x00" in command:
        return ToolResult.error("The command contains a NUL byte; bash cannot run it.")
    if not ctx.workspace.is_dir():
        return ToolResult.error(f"The workspace {ctx.workspace} does not exist; nothing was run.")

    auth = _authorize(command, ctx)
    if not auth.allowed:
        return ToolResult.error(auth.message or "The shell policy refused this command.", decision=auth.decision)
    before_change(ctx)   # approved: the run's baseline checks (once) before the command may change anything

    policy = ctx.sandbox if ctx.sandbox is not None else SandboxPolicy()
    timeout_s = min(float(args.timeout) if args.timeout is not None else ctx.shell_timeout_s, MAX_TIMEOUT_S)
    run_capped = False
    if ctx.deadline is not None:
        remaining = ctx.deadline - time.monotonic()
        if remaining < MIN_USEFUL_S:
            return ToolResult.error("Not run: the run's wall-clock limit is reached; finish with what you have.",
                                    decision=auth.decision)
        run_capped = remaining < timeout_s
        timeout_s = min(timeout_s, remaining)
    spill = OutputSpill(ctx.session_dir / OUTPUTS_DIR, command) if for_model and ctx.session_dir else None
    job = Job(ctx.workspace, command=command, policy=policy, network=auth.network, timeout_s=timeout_s,
              output_cap=ctx.output_cap_bytes, on_output=spill.feed if spill else None,
              keep_later=keep_later(ctx), cancel=ctx.cancel)
    try:
        try:
            result = run(job)
        except HidingIncomplete as exc:
            refused = _exposure(command, ctx, exc)
            if refused is not None:
                return refused
            result = run(dataclasses.replace(job, policy=dataclasses.replace(policy, scan_secrets=False)))
    except OSError as exc:
        return ToolResult.error(f"Could not start the command: {exc}")
    except BaseException:
        if spill is not None:
            spill.discard()
        raise
    network = result.network
    ctx.left_behind += [{"path": p, "kept": True} for p in result.kept]
    ctx.left_behind += [{"path": p, "kept": False} for p in result.refused]

    status = _status_line(result, timeout_s)
    if result.timed_out and run_capped:
        status += " (the timeout was cut to the run's remaining wall-clock time)"
    kind = _check_kind(command)
    body, saved = result.output, None
    full = spill.text() if spill is not None else result.output   # read before present() closes the spill
    if spill is not None:
        facts = OutputFacts(command, full, result.total_bytes, result.exit_code, result.timed_out, kind,
                            str(ctx.workspace))
        body, saved = present(spill, facts, result.output, result.truncated)
    if ctx.redact is not None:   # the gate calls run_shell directly: its outputs go to the model too
        body = ctx.redact(body)
    lines = [status, body if body else "(no output)"]
    lines += _sandbox_hints(result.output, result.sandbox, network)
    lines += result.notes()
    meta = _meta(result, auth.decision, saved)
    return ToolResult(
        ok=result.exit_code == 0,
        output="\n".join(line.rstrip("\n") for line in lines),
        check=_check_run(command, kind, result.exit_code, result.timed_out, full),
        meta=meta,
    )


RUN_SHELL = Tool(
    spec=ToolSpec(
        name="run_shell",
        description=DESCRIPTION,
        args=RunShellArgs,
        annotations=ToolAnnotations(read_only=False, destructive=True),
    ),
    execute=lambda args, ctx: run_shell(args, ctx, for_model=True),   # reduced, long output saved
)
