"""Command output the model sees: long test/build/lint output reduced to what matters.

A 60 KB pytest or ruff log costs the model thousands of tokens on every later request, and most of
it (passing tests, progress bars, the 200th lint finding) says nothing. Past a small size, run_shell
shows the model a reduced view instead — failing tests with their assertion and location, error
lines, the runner's own summary line — built by the verification gate's failure summariser
(keel.outputs.summarize and its failure_parsers: pytest, unittest, jest/vitest, go test, cargo test,
tsc, ruff, eslint, mypy/pyright, and a generic error-line fallback). Every byte the command wrote is
saved under the session directory first, and the view names that file, so nothing is lost: the model
can page through it with read_file.

``OutputSpill`` is the I/O half (memory first, a file once large); ``reduced_view`` is pure.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# Up to this size output is shown as it is: a short traceback or a one-screen diff is what the model
# asked for, and a pointer to a file would only cost it a turn.
VERBATIM_MAX_BYTES = 6_000
VERBATIM_MAX_LINES = 120
# Output of other commands (a diff, a file printed on purpose) stays as it is up to this size.
PLAIN_MAX_BYTES = 12_000
# What one saved output may take on disk; a command printing more keeps its first part and a note.
SAVE_MAX_BYTES = 16 * 1024 * 1024
# What the summariser reads back from a saved file (parsing 16 MB of log is not worth the time).
PARSE_MAX_BYTES = 4 * 1024 * 1024
_MEMORY_BYTES = 64 * 1024
SUMMARY_MAX_LINES = 30
TAIL_LINES = 6
HEAD_LINES = 8
OK_TAIL_LINES = 10
NOTABLE_MAX = 10
OUTPUTS_DIR = "outputs"   # in the session dir: run_shell's saved outputs
CHECKS_DIR = "checks"     # ... and the gate's saved check outputs (a pushback names them)

_NOTABLE = re.compile(r"\b(?:errors?|warn(?:ing)?s?|fail(?:ed|ures?)?|exception|traceback|fatal|panic|"
                      r"deprecat\w*)\b", re.IGNORECASE)
_NOT_NOTABLE = re.compile(r"\b0 (?:errors?|warnings?|failures?|failed)\b|\bno (?:errors?|warnings?)\b", re.IGNORECASE)
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class OutputSpill:
    """Every byte of one command's output: kept in memory while small, written to a file under
    ``directory`` once large. ``save()`` names the file by its content, so the same output run twice
    gives the same path (the loop's repetition guard compares results byte for byte)."""

    def __init__(self, directory: Path, command: str, *, max_bytes: int = SAVE_MAX_BYTES) -> None:
        self.directory, self.command, self.max_bytes = directory, command, max_bytes
        self.memory = bytearray()
        self.total = 0
        self.kept = 0
        self.failed: str | None = None      # why the output could not be saved, if it could not
        self._digest = hashlib.sha256()
        self._file: IO[bytes] | None = None

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.max_bytes - self.kept
        if room <= 0 or self.failed:
            return
        chunk = chunk[:room]
        self.kept += len(chunk)
        self._digest.update(chunk)
        if self._file is None and len(self.memory) + len(chunk) <= _MEMORY_BYTES:
            self.memory += chunk
            return
        try:
            self._open().write(chunk)
        except OSError as exc:
            self._fail(exc)

    def text(self, limit: int = PARSE_MAX_BYTES) -> str:
        """The saved output (its first ``limit`` bytes) as text."""
        if self._file is None:
            return bytes(self.memory[:limit]).decode("utf-8", errors="replace")
        try:
            self._file.flush()
            with open(self._file.name, "rb") as fh:
                return fh.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def save(self) -> Path | None:
        """Put the whole output in its file; returns the path, or None when it could not be written."""
        if self.failed:
            return None
        digest = self._digest.hexdigest()[:16]
        words = [w for w in self.command.split() if "=" not in w]   # not the VAR=value prefixes
        slug = _SLUG.sub("-", "-".join(w.rsplit("/", 1)[-1] for w in words[:3]))[:40].strip("-.") or "command"
        target = self.directory / f"{slug}-{digest}.log"
        try:
            file = self._open()
            if self.total > self.kept:
                file.write(f"\n[keel: output cut here after {self.kept} bytes; the command wrote "
                                 f"{self.total} bytes in all]\n".encode())
            file.close()
            os.replace(file.name, target)
        except OSError as exc:
            self._fail(exc)
            return None
        return target

    def _open(self) -> IO[bytes]:
        """The file, created on first need with what was kept in memory so far."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            # It stays open across feed() calls until save() or discard(): no context manager fits.
            self._file = tempfile.NamedTemporaryFile(dir=self.directory, prefix=".partial-", delete=False)  # noqa: SIM115
            self._file.write(self.memory)
            self.memory = bytearray()
        return self._file

    def discard(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
                os.unlink(self._file.name)

    def _fail(self, exc: OSError) -> None:
        self.failed = exc.strerror or str(exc)
        self.discard()


@dataclass(frozen=True)
class OutputFacts:
    """What the view is built from: the command, how it ended, and its whole output."""

    command: str
    output: str               # the whole output (or its first PARSE_MAX_BYTES)
    total_bytes: int
    exit_code: int | None
    timed_out: bool = False
    check_kind: str | None = None     # keel.outputs.checks.classify_check of the command
    workspace: str | None = None


def is_short(output: str, total_bytes: int) -> bool:
    return total_bytes <= VERBATIM_MAX_BYTES and output.count("\n") <= VERBATIM_MAX_LINES


def wants_reduction(facts: OutputFacts, capped: bool) -> bool:
    """Reduce long output of checks and of failed commands; other output (a diff, a file the model
    printed on purpose) only when it is very long or the cap would cut it anyway."""
    if is_short(facts.output, facts.total_bytes):
        return False
    failed = facts.timed_out or facts.exit_code != 0
    return (capped or failed or facts.check_kind in ("test", "lint", "type", "build")
            or facts.total_bytes > PLAIN_MAX_BYTES)


def reduced_view(facts: OutputFacts, saved: str) -> str:
    """The text the model sees instead of the whole output; ``saved`` is where the whole output is."""
    # Imported here: the parsers cost ~50 ms to import, and most commands never need them.
    from keel.outputs.failure_parsers.common import clean_lines
    from keel.outputs.summarize import summarize_failure

    lines = clean_lines(facts.output)
    while lines and not lines[-1].strip():
        lines.pop()
    header = (f"[long output reduced to what matters: {facts.total_bytes:,} bytes, {len(lines):,} lines. "
              f"The full output is in {saved} — read_file that path (with offset/limit) to see any part of it.]")
    if facts.timed_out or facts.exit_code != 0:
        summary = summarize_failure(facts.command, facts.output, facts.exit_code, timed_out=facts.timed_out,
                                    max_lines=SUMMARY_MAX_LINES, workspace=facts.workspace)
        body = summary.text().split("\n")
        tail = _fresh(_tail(lines, TAIL_LINES), "\n".join(body))
        if tail:
            body += ["last lines:", *("  " + line for line in tail)]
        return "\n".join([header, *body])
    return "\n".join([header, *_success_digest(lines)])


def _success_digest(lines: list[str]) -> list[str]:
    """Long output of a command that succeeded: its start, the lines that mention problems, its end
    (where runners and compilers print their summary)."""
    from keel.outputs.failure_parsers.common import clip

    if len(lines) <= HEAD_LINES + OK_TAIL_LINES:
        return [clip(line) for line in lines]
    head, middle, tail = lines[:HEAD_LINES], lines[HEAD_LINES:-OK_TAIL_LINES], lines[-OK_TAIL_LINES:]
    notable = [line for line in middle if _NOTABLE.search(line) and not _NOT_NOTABLE.search(line)]
    out = [clip(line) for line in head]
    out.append(f"… {len(middle):,} lines not shown"
               + (f"; {len(notable)} of them mention warnings or errors:" if notable else " …"))
    out += ["  " + clip(line.strip()) for line in notable[:NOTABLE_MAX]]
    if len(notable) > NOTABLE_MAX:
        out.append(f"  … and {len(notable) - NOTABLE_MAX} more such lines in the full output")
    if notable:
        out.append("…")
    out += [clip(line) for line in tail]
    return out


def _tail(lines: list[str], n: int) -> list[str]:
    return [line.rstrip() for line in lines if line.strip()][-n:]


def _fresh(lines: list[str], shown: str) -> list[str]:
    """The lines whose text the summary does not already show."""
    from keel.outputs.failure_parsers.common import clip

    return [clip(line) for line in lines if line.strip(" =-*_")[:60] not in shown]


def present(spill: OutputSpill, facts: OutputFacts, capped_output: str, capped: bool) -> tuple[str, Path | None]:
    """What run_shell shows the model: the capped output as it is when short (the spill is dropped),
    else the reduced view naming the saved file. When the file cannot be written the capped output
    stays, with a note, because a reduced view without the full output would lose the rest."""
    if not wants_reduction(facts, capped):
        spill.discard()
        return capped_output, None
    saved = spill.save()
    if saved is None:
        return f"{capped_output}\n[keel could not save the full output ({spill.failed})]", None
    return reduced_view(facts, str(saved)), saved


def saved_output(session_dir: Path | None, path: str, *, by_name: bool = False) -> Path | None:
    """The real path of a saved output ``path`` names, or None when it names anything else: a command's
    output (run_shell) or a check's (the gate's pushback names it). ``by_name``: a relative path that ends
    in the folder and name of one counts too (the 1.5B read "session/checks/002-test-….log" for the
    absolute path its pushback gave, and was told "File not found").

    read_file reads these outside the workspace jail: keel wrote them from a command the policy had
    already allowed, and they hold nothing the command's own result did not show."""
    if session_dir is None or not path.endswith(".log"):
        return None
    folders = [os.path.realpath(session_dir / name) for name in (OUTPUTS_DIR, CHECKS_DIR)]
    if by_name and not os.path.isabs(path):
        parts = path.replace("\\", "/").split("/")
        if len(parts) < 2 or parts[-2] not in (OUTPUTS_DIR, CHECKS_DIR) or parts[-1] in ("", ".", ".."):
            return None
        path = os.path.join(session_dir, parts[-2], parts[-1])
    real = os.path.realpath(path)
    if os.path.dirname(real) not in folders or not os.path.isfile(real):
        return None
    return Path(real)
