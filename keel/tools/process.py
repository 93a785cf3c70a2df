"""Run one shell command: bounded time, bounded memory, and nothing left running afterwards.

- ``bash -c`` in a new session, so the whole process tree can be signalled as one group;
- stdin is /dev/null: a command that waits for input gets EOF instead of hanging until timeout;
- stdout and stderr are merged into one pipe and capped *while* it is read: the head and a
  ring-buffered tail are kept, the middle is only counted, so 5 GB of output costs kilobytes;
- on timeout the group and every descendant found under the shell get SIGTERM, then SIGKILL
  after a short grace; reading then stops within a bounded time even if an escaped grandchild
  still holds the pipe open;
- when the shell exits normally its leftover background jobs are stopped the same way, so a
  command never leaves processes behind (inside bubblewrap the PID namespace already does this).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal as signals
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# How long a process tree gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 1.0
# After the shell has exited (or been killed), how long to keep reading output that is still
# in flight before giving up on writers that escaped the process group.
DRAIN_AFTER_EXIT_S = 1.0
_READ_CHUNK = 64 * 1024
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


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM/SIGHUP, which the CLI turns into it) while a command ran; still an
    interrupt to everyone above, but it carries the command's output up to that moment."""

    def __init__(self, partial_output: str) -> None:
        super().__init__()
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


def _live_tree(leader: int) -> list[int]:
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
    pids = _live_tree(leader)
    if _exited(leader) and not pids:
        return None
    _signal_all(leader, pids, signals.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if _exited(leader) and not any(_pid_alive(p) for p in pids):
            return signals.SIGTERM
        time.sleep(0.02)
    _signal_all(leader, pids + _live_tree(leader), signals.SIGKILL)
    return signals.SIGKILL


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
    """Run ``bash -c command`` (inside ``argv_prefix``, e.g. a bwrap argv ending in ``--``).

    ``on_output`` gets every byte the command writes, also the ones the cap leaves out. ``cancel``,
    set from another thread, stops the command as Ctrl-C would (CommandInterrupted, the tree killed):
    a run that is not on the main thread cannot be sent SIGINT.

    Raises OSError when the command cannot be started at all (missing bash or bwrap, bad cwd).
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout must be positive, got {timeout_s}")
    argv = [*(argv_prefix or []), "bash", "-c", command]
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec,
        close_fds=True,
    )
    assert proc.stdout is not None
    captured = CappedOutput(output_cap_bytes, tee=on_output)
    timed_out = False
    kill_signal: int | None = None
    try:
        timed_out = _pump(proc, captured, start + timeout_s, cancel)
        if timed_out:
            kill_signal = kill_tree(proc)
        else:
            # Background jobs the shell left behind: they must not outlive the command.
            kill_tree(proc, grace_s=0.2)
        _drain(proc, captured, time.monotonic() + DRAIN_AFTER_EXIT_S)
    except KeyboardInterrupt:
        # The tree is killed in `finally`; what the command printed so far goes to the event log.
        raise CommandInterrupted(captured.render()) from None
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            kill_tree(proc, grace_s=0.0)
        returncode = proc.wait()
    elapsed = time.monotonic() - start
    signal_seen = -returncode if returncode < 0 else None
    return CommandResult(
        exit_code=None if (timed_out or returncode < 0) else returncode,
        output=captured.render(),
        timed_out=timed_out,
        truncated=captured.truncated,
        total_bytes=captured.total,
        elapsed_s=elapsed,
        signal=signal_seen if signal_seen is not None else kill_signal,
    )


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pump(proc: subprocess.Popen[bytes], captured: CappedOutput, deadline: float,
          cancel: threading.Event | None = None) -> bool:
    """Read output until the shell exits or ``deadline`` passes. Returns True on timeout; raises
    KeyboardInterrupt once ``cancel`` is set."""
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    os.set_blocking(out_fd, False)
    pidfd = _open_pidfd(proc.pid)
    with selectors.DefaultSelector() as sel:
        sel.register(out_fd, selectors.EVENT_READ, "out")
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        try:
            pipe_open = True
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return True
                if cancel is not None and cancel.is_set():
                    raise KeyboardInterrupt
                # Without a pidfd, wake up regularly to notice the exit of the shell (or a cancel).
                wait = remaining if pidfd is not None else min(remaining, 0.05)
                wait = min(wait, 0.1) if cancel is not None else wait
                for key, _ in sel.select(wait):
                    if key.data == "out" and not _read_once(out_fd, captured):
                        sel.unregister(out_fd)
                        pipe_open = False
                if _exited(proc.pid):
                    return False
                if not pipe_open and pidfd is None:
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


def _drain(proc: subprocess.Popen[bytes], captured: CappedOutput, deadline: float) -> None:
    """Collect output still in the pipe; stop at EOF or ``deadline`` (an escaped writer may never close it)."""
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(out_fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if sel.select(remaining) and not _read_once(out_fd, captured):
                return
