"""One Exercism exercise through Aider's Python API, by Aider's benchmark protocol; run by bench/exercism.py
with the interpreter of Aider's own virtual environment (it never imports keel).

The protocol follows Aider-AI/aider benchmark/benchmark.py (``run_test_real``, commit 5dc9490bb): one
Coder with the solution files, ``use_git=False``, no streaming, prompt caching on, no shell-command
suggestions, other files' mentions ignored; the exercise's instructions plus Aider's addendum as the
first message; after each try the tests are run, and on a failure their output plus Aider's
"test failures" text is the next message, up to ``--tries`` (2). The two message texts are Aider's
(benchmark/prompts.py, same commit), quoted as data. With ``--read`` the test file is in the chat as
a read-only file from the start (how keel sees it); without it the tests are hidden, as in Aider's run.

Writes a JSON summary to ``--result``: the outcome of each try, seconds, tokens, malformed replies.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path

# Aider-AI/aider benchmark/prompts.py at 5dc9490bb (the texts, verbatim)
INSTRUCTIONS_ADDENDUM = """
####

Use the above instructions to modify the supplied files: {file_list}
Don't change the names of existing functions or classes, as they may be referenced from other code like unit tests, etc.
Only use standard libraries, don't suggest installing any packages.
"""
TEST_FAILURES = """
####

See the testing errors above.
The tests are correct, don't try and change them.
Fix the code in {file_list} to resolve the errors.
"""


def run_tests(workspace: Path, tests: dict[str, str], command: list[str], timeout: float) -> str | None:
    """The original tests put back, then run; None when they pass, else their output (timings and the
    folder's path taken out, as Aider's cleanup does)."""
    for name, text in tests.items():
        (workspace / name).write_text(text)
    try:
        proc = subprocess.run(command, cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return "Tests timed out!"
    if proc.returncode == 0:
        return None
    out = re.sub(r"\bin \d+\.\d+s\b", "", proc.stdout)
    return out.replace(str(workspace), workspace.name)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--instructions", type=Path, required=True, help="the exercise's instructions (markdown)")
    p.add_argument("--files", required=True, help="comma-separated solution files")
    p.add_argument("--tests", type=Path, required=True, help="folder holding the original test files")
    p.add_argument("--read", action="store_true", help="show the test files read-only from the start")
    p.add_argument("--model", default="openai/local-gguf")
    p.add_argument("--tries", type=int, default=2)
    p.add_argument("--test-command", required=True, help="JSON list: the command that runs the tests")
    p.add_argument("--result", type=Path, required=True)
    args = p.parse_args()

    from aider import models
    from aider.coders import Coder
    from aider.io import InputOutput

    ws = args.workspace
    fnames = [ws / f for f in args.files.split(",") if f]
    tests = {f.name: f.read_text() for f in sorted(args.tests.iterdir()) if f.is_file()}
    file_list = " ".join(f.name for f in fnames)
    message = args.instructions.read_text() + INSTRUCTIONS_ADDENDUM.format(file_list=file_list)
    io = InputOutput(pretty=False, yes=True, chat_history_file=ws / ".aider.chat.history.md")
    model = models.Model(args.model)
    read_only = [str(ws / name) for name in tests] if args.read else None
    if args.read:   # shown as keel sees them: in the workspace, read-only in the chat
        for name, text in tests.items():
            (ws / name).write_text(text)
    coder = Coder.create(model, "whole", io, fnames=[str(f) for f in fnames], read_only_fnames=read_only,
                         use_git=False, stream=False, cache_prompts=True, suggest_shell_commands=False,
                         ignore_mentions=set(tests))
    coder.get_file_mentions = lambda _content: set()   # no other file is brought in
    outcomes: list[bool] = []
    spent = 0.0
    command = json.loads(args.test_command)
    for _ in range(args.tries):
        started = time.monotonic()
        coder.run(with_message=message, preproc=False)
        spent += time.monotonic() - started
        errors = run_tests(ws, tests, command, 180)
        outcomes.append(errors is None)
        if errors is None:
            break
        message = errors + TEST_FAILURES.format(file_list=file_list)
        result = {"tests_outcomes": outcomes, "duration": round(spent, 1)}
        args.result.write_text(json.dumps(result))   # a try's outcome survives a kill in the next one
    args.result.write_text(json.dumps({
        "tests_outcomes": outcomes, "duration": round(spent, 1), "prompt_tokens": coder.total_tokens_sent,
        "completion_tokens": coder.total_tokens_received, "malformed": coder.num_malformed_responses,
        "exhausted_context": coder.num_exhausted_context_windows, "errors_shown": io.num_error_outputs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
