"""Acceptance checks: the commands the task itself (or the user, with ``--accept``) names as proof.

"Fix the crash so that `python test_app.py` prints OK" names both a command and what its output
must contain. Extraction is deliberately narrow, because a wrong acceptance check blocks a correct
finish:

- only code spans count (`inline` or fenced blocks), never commands guessed from prose;
- the span's first word must be a command runner (python, pytest, npm, node, make, go, cargo, a
  shell script, ./script), and it must not install or rewrite anything;
- the sentence around it must say it is proof: "must pass", "passes", "prints", "so that",
  "make sure", "until", "to verify", "green", "succeeds", "exits 0" …;
- "prints X" after the command records X as the expected output when X is quoted, in a code span,
  or an upper-case token such as OK or PASSED ("prints no errors" records nothing);
- one exception to "code spans only": a script of the workspace the task tells to run ("then run
  check.py", "run `./check.sh`", "run python3 tests/run.py") is the task's own check, with or
  without a code span or a word of proof, unless negated ("do not run deploy.sh"). The file must
  exist, so this needs the workspace.

The files the command runs (`python test_app.py` → test_app.py) are recorded as ``protects``:
editing them to make the check pass is tampering, not fixing.

The request's sentences, spans and wording are read once by keel.core.request (``Request.sentences``,
``Request.spans``, keel.core.request.wording); this module decides which spans are commands keel may
run and which scripts exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from keel.core.request import PLACEHOLDER, Request
from keel.core.request.wording import LEADING, TRAILING, expected_after, names_proof, run_phrases
from keel.verify.detect.commands import is_mutating, words_of
from keel.verify.plan import PlannedCheck

_SUBCOMMANDS = {
    "go": {"test", "run", "build", "vet"},
    "cargo": {"test", "run", "build", "check", "clippy"},
}
_RUNNERS = {"python", "python3", "pytest", "npm", "yarn", "pnpm", "node", "make", "go", "cargo", "bash", "sh"}
_PYTHON = re.compile(r"python3?(?:\.\d+)?$")
_SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".bash", ".rb", ".pl")

def looks_like_command(text: str) -> bool:
    """Is this code span a command keel may run as an acceptance check?"""
    words = words_of(text.strip())
    if not words or is_mutating(text):
        return False
    head = words[0]
    if head.startswith("./") and len(head) > 2:
        return True
    if head not in _RUNNERS and not _PYTHON.match(head):
        return False
    if head in _SUBCOMMANDS:
        return len(words) > 1 and words[1] in _SUBCOMMANDS[head]
    if head in {"bash", "sh"}:   # a script, not `bash -c '…'` strings or an interactive shell
        return len(words) > 1 and words[1].endswith((".sh", ".bash"))
    if head == "node" or _PYTHON.match(head):
        return len(words) > 1          # a bare interpreter is a REPL, not a check
    return True


def protected_files(command: str, workspace: Path | None = None) -> tuple[str, ...]:
    """The script and test files ``command`` runs, as written in it (``./`` and ``::test`` ids dropped).

    With a workspace, only files that exist inside it are kept."""
    words = words_of(command)
    out: list[str] = []
    skip_next = False
    for i, word in enumerate(words):
        if skip_next:
            skip_next = False
            continue
        if word in {"-m", "-c"} and i > 0:     # `python -m pytest`: the module name is not a file
            skip_next = True
            continue
        if word.startswith("-"):
            continue
        path = word.split("::", 1)[0]
        if not (path.endswith(_SCRIPT_SUFFIXES) or (i == 0 and path.startswith("./"))):
            continue
        path = path[2:] if path.startswith("./") else path
        if workspace is not None and not _inside_file(workspace, path):
            continue
        if path not in out:
            out.append(path)
    return tuple(out)


def _inside_file(workspace: Path, rel: str) -> bool:
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        return False
    return (workspace / rel).is_file()


def _expected_output(rest: str, spans: Sequence[str]) -> str | None:
    """The text "prints X" asks for, from the part of the sentence after the command."""
    span, literal = expected_after(rest)
    if span is not None:
        value = spans[span]
        return None if looks_like_command(value) else value
    return literal


def acceptance_checks(request: Request, *, workspace: Path | None = None) -> list[PlannedCheck]:
    """Acceptance checks the request names, in its order, without duplicates (see the module doc)."""
    spans, checks, previous = request.spans, list[PlannedCheck](), ""
    for sentence in request.sentences:
        # A sentence that is only a code block takes its wording from the sentence before it
        # ("Run this to verify:" + block).
        only_code = not PLACEHOLDER.sub("", sentence).strip()
        context = f"{previous} {sentence}" if only_code else sentence
        previous = sentence
        if workspace is not None:
            for command in _scripts_to_run(sentence, spans, workspace):
                if all(c.command != command for c in checks):
                    checks.append(_named_script(command, context, spans, workspace))
        if not names_proof(context):
            continue
        for match in PLACEHOLDER.finditer(sentence):
            command = spans[int(match.group(1))]
            if not looks_like_command(command) or any(c.command == command for c in checks):
                continue
            following = PLACEHOLDER.search(sentence, match.end())
            rest = sentence[match.end(): following.start() if following and _is_command_at(following, spans)
                            else len(sentence)]
            expect = _expected_output(rest, spans)
            quote = _quote(PLACEHOLDER.sub(lambda m: f"`{spans[int(m.group(1))]}`", context))
            reason = f"the task names it: “{quote}”"
            if expect is not None:
                reason += f"; its output must contain {expect!r}"
            checks.append(PlannedCheck(category="acceptance", command=command, reason=reason, source="task",
                                       protects=protected_files(command, workspace), expect_output=expect))
    return checks


_INTERPRETERS = {".py": "python", ".sh": "bash", ".bash": "bash", ".js": "node", ".mjs": "node", ".cjs": "node"}


def _scripts_to_run(sentence: str, spans: Sequence[str], workspace: Path) -> list[str]:
    """Commands for the workspace scripts ``sentence`` tells to run ("then run check.py"), in order."""
    found: list[str] = []
    for after in run_phrases(sentence):
        command = _run_target(after, spans, workspace)
        if command is not None and command not in found:
            found.append(command)
    return found


def _run_target(words: list[str], spans: Sequence[str], workspace: Path) -> str | None:
    """The command for what follows "run": a code span that runs a workspace script, a script path,
    or an interpreter and a script path."""
    first = words[0].rstrip(TRAILING).lstrip(LEADING)
    span = PLACEHOLDER.fullmatch(first)
    if span is not None:
        text = spans[int(span.group(1))]
        if looks_like_command(text) and protected_files(text, workspace):
            return text
        return _script_command(text, workspace) if len(text.split()) == 1 else None
    if (first in _RUNNERS or _PYTHON.match(first)) and len(words) > 1:
        path = words[1].rstrip(TRAILING).lstrip(LEADING)
        script = _script_command(path, workspace)
        return f"{first} {path}" if script is not None and PLACEHOLDER.search(path) is None else None
    return _script_command(first, workspace)


def _script_command(path: str, workspace: Path) -> str | None:
    """`python check.py`, `bash check.sh`, `./check.sh` (executable) for a script file of the workspace."""
    rel = path[2:] if path.startswith("./") else path
    suffix = "." + rel.rsplit(".", 1)[-1] if "." in rel else ""
    interpreter = _INTERPRETERS.get(suffix)
    if interpreter is None or not _inside_file(workspace, rel):
        return None
    if path.startswith("./") and (workspace / rel).stat().st_mode & 0o111:
        return path
    return f"{interpreter} {rel}"


def _named_script(command: str, context: str, spans: Sequence[str], workspace: Path) -> PlannedCheck:
    quote = _quote(PLACEHOLDER.sub(lambda m: f"`{spans[int(m.group(1))]}`", context))
    return PlannedCheck(category="acceptance", command=command, reason=f"the task names it: “{quote}”",
                        source="task", protects=protected_files(command, workspace))


def _is_command_at(match: re.Match[str], spans: Sequence[str]) -> bool:
    return looks_like_command(spans[int(match.group(1))])


def _quote(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def accept_checks(commands: Iterable[str], *, workspace: Path | None = None) -> list[PlannedCheck]:
    """Acceptance checks given by the user (``--accept CMD`` or ``[verify] accept``): taken as
    written, any command — the user, not the task text, vouches for them. A blank one is an error,
    not skipped: the user asked for a gate (often through an empty shell variable) and would
    otherwise get a run verified without it."""
    checks: list[PlannedCheck] = []
    for raw in commands:
        command = raw.strip()
        if not command:
            raise ValueError("an acceptance command (--accept or [verify] accept) is empty")
        if all(c.command != command for c in checks):
            checks.append(PlannedCheck(category="acceptance", command=command, source="accept",
                                       reason="given by the user (--accept or [verify] accept)",
                                       protects=protected_files(command, workspace)))
    return checks
