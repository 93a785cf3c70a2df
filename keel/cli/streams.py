"""stdout and stderr that a reader going away cannot break, and argv that must be UTF-8.

`keel run … | head -1` closes keel's stdout after one line. Python ignores SIGPIPE, so the next
write raises BrokenPipeError wherever it happens: inside the loop that aborted the run half-way,
in a listing command it printed a traceback. Here the first failed write points the descriptor at
/dev/null and every later write is dropped, so the work goes on to its end and its result is saved
(the session, the log). Exit codes: `keel run` keeps the run's own code (the result is in the
session; `keel log` shows it); every other command, whose printed output *is* its result, exits
141 (128 + SIGPIPE, what a shell reports for a writer the closed pipe killed) once its stdout was
lost, after finishing its work (`keel undo` is never left half-done).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

EXIT_PIPE = 141


class GuardedStream:
    """Wraps a text stream: a write or flush that fails because the reader left (or the device is
    full) drops that and all later output instead of raising; everything else is the stream's."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.lost: OSError | None = None

    def _lose(self, error: OSError) -> None:
        self.lost = error
        try:  # the interpreter's last flush at exit must find a descriptor that accepts anything
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return self._stream.write(text)
            except OSError as e:  # BrokenPipeError, ENOSPC, EIO: the output cannot be delivered
                self._lose(e)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self._stream.flush()
            except OSError as e:
                self._lose(e)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, …
        return getattr(self._stream, name)


@contextmanager
def guarded_streams() -> Iterator[GuardedStream]:
    """Guard sys.stdout and sys.stderr for the duration; yields the stdout guard (``.lost``)."""
    saved = sys.stdout, sys.stderr
    for stream in saved:  # a stray undecodable byte (a file name) prints escaped instead of raising
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    out, err = GuardedStream(sys.stdout), GuardedStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        yield out
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved


def not_utf8(text: str) -> str | None:
    """Where ``text`` (decoded with surrogateescape, as Python decodes argv) holds bytes that are
    not UTF-8: "byte 0xff at position 4", or None when it is clean."""
    for i, ch in enumerate(text):
        if "\udc80" <= ch <= "\udcff":
            return f"byte 0x{ord(ch) - 0xDC00:02x} at position {i}"
        if "\ud800" <= ch <= "\udfff":
            return f"a lone surrogate at position {i}"
    return None


def argv_problem(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8, named by its place and flag; keel's logs, its
    JSON and the engine's requests are UTF-8, so such a task would fail later with a traceback."""
    for i, arg in enumerate(argv):
        where = not_utf8(arg)
        if where is None:
            continue
        before = argv[i - 1] if i and argv[i - 1].startswith("-") and "=" not in argv[i - 1] else None
        name = f"the value of {before}" if before else f"argument {i + 1}"
        shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return (f"{name} is not valid UTF-8 ({where}): \"{shown[:80]}\"; keel takes text as UTF-8 "
                "(re-encode it, e.g. iconv -t UTF-8)")
    return None


def json_format(argv: list[str]) -> str | None:
    """``json`` or ``stream-json`` when a `keel run` command line asks for it, read from the raw
    arguments (they may not have parsed); None for text and other commands."""
    if not argv or argv[0] != "run":
        return None
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--output-format" and i + 1 < len(argv) else None
        if arg.startswith("--output-format="):
            value = arg.split("=", 1)[1]
        if value in ("json", "stream-json"):
            return value
    return None


def print_usage_result(argv: list[str], message: str) -> None:
    """A usage error before anything ran: json front ends still read one result object."""
    output_format = json_format(argv)
    if output_format is None:
        return
    from keel.cli.render import print_json, result_object
    from keel.loop.result import RunResult

    error = RunResult(status="error", stop_reason="config_error", error=message)
    print_json(result_object(error, output_format))


def run_guarded(argv: list[str], dispatch: Callable[[list[str]], int]) -> int:
    """``dispatch(argv)`` with guarded streams; the exit code as the module docstring says."""
    with guarded_streams() as out:
        try:
            code = dispatch(argv)
        except KeyboardInterrupt:
            code = 130
        except SystemExit:  # argparse's --help/--version into a closed pipe: the same 141 as below
            sys.stdout.flush()
            if out.lost is None:
                raise
            code = EXIT_PIPE
        except BrokenPipeError:  # a write that went around sys.stdout (its .buffer): stop quietly
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
            code = EXIT_PIPE
    if out.lost is not None and not isinstance(out.lost, BrokenPipeError):
        print(f"keel: cannot write to stdout: {out.lost.strerror or out.lost}", file=sys.stderr)
    # `keel run` exits with the run's own code (its result is in the session); for every other
    # command the output was the result, and it did not arrive.
    return code if out.lost is None or argv[0] == "run" else EXIT_PIPE
