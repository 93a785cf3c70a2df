"""Checks on what the user typed, made before anything runs: workspace, numbers, task text, log path.

Each returns a message for the user (or raises argparse's error), so the CLI can exit 2 with the
value named instead of a traceback halfway through a run.
"""

from __future__ import annotations

import argparse
import sys
import typing
from pathlib import Path
from typing import IO

from keel.cli.streams import not_utf8
from keel.policy.workspace import workspace_problem as workspace_problem  # the one check

OVERRIDE_FLAG = "--allow-any-cwd"


def check_workspace(raw: str, allow_any: bool, name: str = "--cwd") -> tuple[Path, str | None]:
    """The resolved workspace and a message when it is refused (``allow_any`` only lifts the
    system/home refusal, never the must-be-a-directory one). ``name``: what the caller calls the
    value (`--cwd`, MCP's `workspace`); each path is said once."""
    path = Path(raw).expanduser().resolve()
    problem = workspace_problem(path, allow_any=allow_any)
    if problem is None:
        return path, None
    if not path.is_dir():   # named as typed, and resolved when that differs
        problem = problem.removeprefix(f"{path}: ")
        return path, f"{name} {raw}{'' if str(path) == raw.rstrip('/') else f' ({path})'}: {problem}"
    if workspace_problem(path, allow_any=True) is None:   # the credential refusal: nothing lifts it
        problem += f" (pass {OVERRIDE_FLAG} to use it anyway)"
    if raw in (".", "./"):   # the default: nobody typed a --cwd, so say where keel was started instead
        return path, problem.replace(f"refusing {path} ", f"refusing {path} (the current directory) ", 1)
    return path, problem if str(path) == raw.rstrip("/") or raw == "/" else f"{name} {raw}: {problem}"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def log_path_problem(path: Path) -> str | None:
    """Open the log for appending now, so a bad --log fails before the run rather than during it."""
    if path.is_dir():
        return f"--log {path}: is a directory; give a file path such as {path / 'run.jsonl'}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as e:
        return f"--log {path}: cannot write the event log there ({e.strerror or e})"
    return None


def read_task(task: str | None, task_file: Path | None, stdin: IO[str]) -> tuple[str, str | None]:
    """The task text from the argument, '-' (stdin) or --task-file, and a problem if there is one.

    stdin and files exist for tasks longer than the OS argument limit (~128 KB)."""
    if task_file is not None and task is not None:
        return "", "give the task either as an argument or with --task-file, not both"
    if task_file is not None:
        source = f"--task-file {task_file}"
        try:
            raw = task_file.read_bytes()
        except OSError as e:
            return "", f"{source}: cannot read it ({e.strerror or e})"
        text, problem = _utf8(raw, source)
        if problem:
            return "", problem
    elif task == "-":
        source = "the task read from stdin"
        # bytes, not stdin's own decoding: that raises in a strict locale and smuggles the bad
        # bytes in as surrogates in a surrogateescape one (C.UTF-8), to fail later in the log
        raw_stdin = getattr(stdin, "buffer", None)
        text, problem = _utf8(raw_stdin.read(), source) if raw_stdin is not None else (stdin.read(), None)
        if problem or (where := not_utf8(text)):
            return "", problem or f"{source} is not valid UTF-8 ({where})"
    elif task is None:
        return "", "no task: pass it as an argument, '-' to read it from stdin, or --task-file PATH"
    else:
        text, source = task, "the task"
        if where := not_utf8(task):  # argv decoded with surrogateescape (main refuses it first)
            return "", f"{source} is not valid UTF-8 ({where})"
    if not text.strip():
        return "", f"{source} is empty: say what keel should do"
    return text, None


def _utf8(raw: bytes, source: str) -> tuple[str, str | None]:
    """``raw`` decoded, or a message naming the first byte that is not UTF-8 and where it is."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        return "", (f"{source} is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}, line {line}); "
                    "keel takes the task as UTF-8 (re-encode it, e.g. iconv -f LATIN1 -t UTF-8)")


class UsageExit(SystemExit):
    """argparse's exit 2 for a bad command line, carrying its message (for a JSON result object)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class UsageParser(argparse.ArgumentParser):
    """argparse's parser (its sub-parsers are of the same class), raising UsageExit on a usage error.
    ``commands``: sub-commands' parsers, for an error to be said with the command's own usage."""

    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> typing.NoReturn:
        message += self.did_you_mean(message)
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise UsageExit(f"{self.prog}: {message}")

    def did_you_mean(self, message: str) -> str:
        """` (did you mean --max-steps?)` for an unrecognized option close to one of this command's."""
        import difflib

        if not message.startswith("unrecognized arguments: "):
            return ""
        known = [o for o in self._option_string_actions if o.startswith("--")]
        close = [m[0] for word in message.split(": ", 1)[1].split() if word.startswith("--")
                 if (m := difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.7))]
        return f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""
