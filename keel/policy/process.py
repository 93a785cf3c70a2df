"""Start one child process and see it through: bounded time, output and memory, nothing left running.

The one module of keel that starts processes (the Landlock exec helper forks its own command);
everything else reaches it through keel.policy.runner, which adds the sandbox, the environment and
the limits. What happens here, for every process:

- a new session, so the whole process tree can be signalled as one group;
- stdin is /dev/null, or the bytes the caller gives, written as the child reads them;
- stdout and stderr (merged, or kept apart) are capped *while* they are read: the head and a
  ring-buffered tail are kept, the middle is only counted, so 5 GB of output costs kilobytes;
- a watch the caller gives (memory, disk) is asked every ``WATCH_EVERY_S`` and can stop the tree;
- on timeout the group and every descendant found under the child get SIGTERM, then SIGKILL
  after a grace; reading then stops within a bounded time even if an escaped grandchild
  still holds the pipe open;
- when the child exits normally its leftover background jobs are stopped the same way, so a
  command never leaves processes behind (inside bubblewrap the PID namespace already does this).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal as signals
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# How long a process tree gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 1.0
# After the shell has exited (or been killed), how long to keep reading output that is still
# in flight before giving up on writers that escaped the process group.
DRAIN_AFTER_EXIT_S = 1.0
# How often a watch (keel.policy.limits) is asked whether the process tree went over a bound.
WATCH_EVERY_S = 0.25
_READ_CHUNK = 256 * 1024    # per read: bounds what one chunk costs in memory (tests hold it under 1 MB)
# Pipes this big let a fast writer (ripgrep's matches) fill them between two of our reads: a
# tenth of the wakeups and reads of the 64 KiB default. Linux allows it unprivileged up to
# /proc/sys/fs/pipe-max-size (1 MiB by default); elsewhere the default stays.
_PIPE_SIZE = 1024 * 1024
_F_SETPIPE_SZ = 1031
_HEAD_SHARE = 0.4
_MIN_CAP = 256


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None      # None when killed by a signal (see ``signal``) or timed out
    output: str                # merged stdout+stderr, capped, with a marker where bytes were cut
    timed_out: bool
    truncated: bool
    total_bytes: int           # everything the command wrote, kept or not
    elapsed_s: float
    signal: int | None         # the signal that ended the command, if one did
    stderr: str | None = None  # stderr on its own, when it was asked for apart from stdout
    stopped: str | None = None  # what a watch stopped it for ("memory", "disk"), if one did


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM/SIGHUP, which the CLI turns into it) while a command ran; still an
    interrupt to everyone above, but it carries the command's output up to that moment."""

    def __init__(self, partial_output: str) -> None:
        super().__init__(partial_output)   # in args: unpickled from them (a keel eval worker's Ctrl-C)
        self.partial_output = partial_output


class CappedOutput:
    """Keeps the first ~40% of ``cap`` bytes and the last ~60%, counting what falls between."""

    def __init__(self, cap: int, tee: Callable[[bytes], None] | None = None) -> None:
        cap = max(cap, _MIN_CAP)
        self.tee = tee   # also receives every chunk, e.g. to save the whole output to a file
        self.head_cap = int(cap * _HEAD_SHARE)
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.dropped_bytes = 0
        self.dropped_lines = 0

    def feed(self, chunk: bytes) -> None:
        if self.tee is not None:
            self.tee(chunk)
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            self.dropped_lines += self.tail.count(b"\n", 0, excess)
            self.dropped_bytes += excess
            del self.tail[:excess]

    @property
    def truncated(self) -> bool:
        return self.dropped_bytes > 0

    def render(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        head, tail = bytes(self.head), bytes(self.tail)
        head_keep = _head_cut(head)
        tail_start = _tail_cut(tail)
        omitted = self.dropped_bytes + (len(head) - head_keep) + tail_start
        lines = self.dropped_lines + head.count(b"\n", head_keep) + tail.count(b"\n", 0, tail_start)
        marker = f"... [{omitted} bytes ({lines} lines) omitted; total {self.total} bytes] ..."
        head_text = head[:head_keep].decode("utf-8", errors="replace")
        tail_text = tail[tail_start:].decode("utf-8", errors="replace")
        sep_before = "" if head_text.endswith("\n") or not head_text else "\n"
        return f"{head_text}{sep_before}{marker}\n{tail_text}"


def _head_cut(head: bytes) -> int:
    """Where to end the kept head: after a newline near the end, else on a UTF-8 boundary."""
    newline = head.rfind(b"\n")
    if newline >= 0 and newline >= len(head) * 3 // 4:
        return newline + 1
    end = len(head)
    # Back up over an incomplete multi-byte sequence (at most 3 bytes of it can be present).
    for back in range(1, min(4, end) + 1):
        byte = head[end - back]
        if byte & 0xC0 == 0xC0:            # a lead byte: is its sequence complete?
            need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
            return end if back >= need else end - back
        if byte & 0xC0 != 0x80:            # ASCII: nothing pending
            return end
    return end


def _tail_cut(tail: bytes) -> int:
    """Where to start the kept tail: after a newline near the start, else past continuation bytes."""
    newline = tail.find(b"\n", 0, len(tail) // 4)
    if newline >= 0:
        return newline + 1
    start = 0
    while start < min(3, len(tail)) and tail[start] & 0xC0 == 0x80:
        start += 1
    return start


def live_tree(leader: int) -> list[int]:
    """Live (non-zombie) PIDs in ``leader``'s process group or below it, from one /proc scan.

    Both are needed: a job that called setsid left the group but is still a descendant, and a
    background job whose parent already exited was re-parented away but is still in the group.
    """
    parents: dict[int, list[int]] = {}
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: fields resume after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3 or fields[0] == b"Z":
            continue
        pid = int(entry)
        parents.setdefault(int(fields[1]), []).append(pid)
        if int(fields[2]) == leader and pid != leader:
            members.append(pid)
    found = set(members)
    stack = [leader]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return sorted(found)


def _signal_all(pgid: int, pids: list[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


def _exited(pid: int) -> bool:
    """True once ``pid`` has exited, without reaping it (so its PID/PGID cannot be reused yet)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def kill_tree(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> int | None:
    """SIGTERM the shell, its process group and all descendants; SIGKILL what is left after ``grace_s``.

    Returns the last signal sent, or None when nothing was running any more.
    """
    leader = proc.pid  # start_new_session makes the shell its own group leader
    pids = live_tree(leader)
    if _exited(leader) and not pids:
        return None
    _signal_all(leader, pids, signals.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if _exited(leader) and not any(_pid_alive(p) for p in pids):
            return signals.SIGTERM
        time.sleep(0.02)
    _signal_all(leader, pids + live_tree(leader), signals.SIGKILL)
    return signals.SIGKILL


# A watch gets the child's pid every WATCH_EVERY_S and answers why the tree must stop, or None.
Watch = Callable[[int], "str | None"]


def run_command(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    output_cap_bytes: int = 30_000,
    env: dict[str, str],
    argv_prefix: list[str] | None = None,
    preexec: Callable[[], None] | None = None,
    on_output: Callable[[bytes], None] | None = None,
    cancel: threading.Event | None = None,
) -> CommandResult:
    """Run ``bash -c command`` (inside ``argv_prefix``, e.g. a bwrap argv ending in ``--``)."""
    return run_argv([*(argv_prefix or []), "bash", "-c", command], cwd, timeout_s=timeout_s,
                    output_cap_bytes=output_cap_bytes, env=env, preexec=preexec, on_output=on_output,
                    cancel=cancel)


def run_argv(
    argv: Sequence[str],
    cwd: Path | str,
    *,
    timeout_s: float,
    env: dict[str, str],
    output_cap_bytes: int = 30_000,
    preexec: Callable[[], None] | None = None,
    on_output: Callable[[bytes], None] | None = None,
    cancel: threading.Event | None = None,
    stdin: bytes | None = None,
    stderr_apart: bool = False,
    watch: Watch | None = None,
    pass_fds: Sequence[int] = (),
    kill_grace_s: float = KILL_GRACE_S,
) -> CommandResult:
    """Run ``argv`` to its end (or its timeout, or a watch's stop) and return what it did.

    ``on_output`` gets every byte of stdout (merged with stderr unless ``stderr_apart``), also the
    ones the cap leaves out. Raises OSError when the program cannot be started at all (missing
    program, bad cwd), CommandInterrupted on Ctrl-C (after the tree is killed). ``cancel``, set from
    another thread, stops it as Ctrl-C would: a run that is not on the main thread cannot be sent SIGINT."""
    if timeout_s <= 0:
        raise ValueError(f"timeout must be positive, got {timeout_s}")
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr_apart else subprocess.STDOUT,
        start_new_session=True, preexec_fn=preexec, close_fds=True, pass_fds=tuple(pass_fds),
    )
    streams = _Streams(proc, CappedOutput(output_cap_bytes, tee=on_output),
                       CappedOutput(output_cap_bytes) if stderr_apart else None, stdin or b"")
    timed_out = False
    kill_signal: int | None = None
    try:
        timed_out, stopped = _pump(proc, streams, start + timeout_s, watch, cancel)
        if timed_out or stopped:
            kill_signal = kill_tree(proc, grace_s=kill_grace_s if timed_out else 0.0)
        else:
            # Background jobs the child left behind: they must not outlive it.
            kill_tree(proc, grace_s=0.2)
        _drain(streams, time.monotonic() + DRAIN_AFTER_EXIT_S)
    except KeyboardInterrupt:
        # The tree is killed in `finally`; what the command printed so far goes to the event log.
        raise CommandInterrupted(streams.out.render()) from None
    finally:
        streams.close()
        if proc.poll() is None:
            kill_tree(proc, grace_s=0.0)
        returncode = proc.wait()
    elapsed = time.monotonic() - start
    signal_seen = -returncode if returncode < 0 else None
    return CommandResult(
        exit_code=None if (timed_out or stopped or returncode < 0) else returncode,
        output=streams.out.render(),
        timed_out=timed_out,
        truncated=streams.out.truncated or bool(streams.err and streams.err.truncated),
        total_bytes=streams.out.total + (streams.err.total if streams.err else 0),
        elapsed_s=elapsed,
        signal=signal_seen if signal_seen is not None else kill_signal,
        stderr=streams.err.render() if streams.err is not None else None,
        stopped=stopped,
    )


class _Streams:
    """The child's pipes: stdout (and stderr) read into caps, stdin written from ``feed``."""

    def __init__(self, proc: subprocess.Popen[bytes], out: CappedOutput, err: CappedOutput | None,
                 feed: bytes) -> None:
        assert proc.stdout is not None
        self.out, self.err, self.feed = out, err, memoryview(feed)
        self.readers: dict[int, CappedOutput] = {proc.stdout.fileno(): out}
        if err is not None:
            assert proc.stderr is not None
            self.readers[proc.stderr.fileno()] = err
        self.stdin = proc.stdin
        self.writer = proc.stdin.fileno() if proc.stdin is not None else None
        self.files = [f for f in (proc.stdout, proc.stderr) if f is not None]
        for fd in [*self.readers, *([self.writer] if self.writer is not None else [])]:
            os.set_blocking(fd, False)
        for fd in self.readers:
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)

    def write(self) -> bool:
        """Write what stdin takes now. False once everything is written (or the child closed it):
        the caller then closes it, so the child reads end of file."""
        assert self.writer is not None
        try:
            sent = os.write(self.writer, self.feed[:_READ_CHUNK])
        except BlockingIOError:
            return True
        except OSError:             # the child closed its stdin: the rest is not wanted
            sent = len(self.feed)
        self.feed = self.feed[sent:]
        return bool(self.feed)

    def close_stdin(self) -> None:
        if self.stdin is not None:
            with contextlib.suppress(OSError):
                self.stdin.close()
            self.stdin = self.writer = None

    def close(self) -> None:
        self.close_stdin()
        for fh in self.files:
            with contextlib.suppress(OSError, ValueError):
                fh.close()


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pump(proc: subprocess.Popen[bytes], streams: _Streams, deadline: float,
          watch: Watch | None, cancel: threading.Event | None = None) -> tuple[bool, str | None]:
    """Read output (and write stdin) until the child exits, ``deadline`` passes or ``watch`` says
    stop. Returns (timed out, the watch's reason); raises KeyboardInterrupt once ``cancel`` is set."""
    pidfd = _open_pidfd(proc.pid)
    next_watch = time.monotonic() + WATCH_EVERY_S if watch is not None else None
    with selectors.DefaultSelector() as sel:
        for fd in streams.readers:
            sel.register(fd, selectors.EVENT_READ, "out")
        if streams.writer is not None:
            sel.register(streams.writer, selectors.EVENT_WRITE, "in")
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return True, None
                if cancel is not None and cancel.is_set():
                    raise KeyboardInterrupt
                if next_watch is not None and now >= next_watch:
                    assert watch is not None
                    reason = watch(proc.pid)
                    if reason:
                        return False, reason
                    next_watch = now + WATCH_EVERY_S
                # Without a pidfd, wake up regularly to notice the exit of the child; with one, still
                # once a second: a signal another thread received runs its handler only then.
                wait = min(deadline - now, 1.0) if pidfd is not None else min(deadline - now, 0.05)
                if next_watch is not None:
                    wait = min(wait, max(next_watch - now, 0.0))
                if cancel is not None:     # a cancel is noticed within a tenth of a second
                    wait = min(wait, 0.1)
                for key, _ in sel.select(wait):
                    if key.data == "exit":
                        continue
                    going = _read_once(key.fd, streams.readers[key.fd]) if key.data == "out" else streams.write()
                    if not going:
                        sel.unregister(key.fd)
                        if key.data == "in":
                            streams.close_stdin()
                if _exited(proc.pid):
                    return False, None
                if len(sel.get_map()) == 0:
                    time.sleep(0.01)  # nothing left to select on: avoid a busy loop
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _read_once(fd: int, captured: CappedOutput) -> bool:
    """Read what is available. False at end of file."""
    try:
        chunk = os.read(fd, _READ_CHUNK)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    captured.feed(chunk)
    return True


def _drain(streams: _Streams, deadline: float) -> None:
    """Collect output still in the pipes; stop at EOF or ``deadline`` (an escaped writer may never close them)."""
    streams.close_stdin()
    with selectors.DefaultSelector() as sel:
        for fd in streams.readers:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for key, _ in sel.select(remaining):
                if not _read_once(key.fd, streams.readers[key.fd]):
                    sel.unregister(key.fd)
