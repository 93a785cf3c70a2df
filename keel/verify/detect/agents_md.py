"""Commands the project's agent instructions name for testing, linting, type checking or building.

AGENTS.md (and CLAUDE.md, .github/copilot-instructions.md) is where a project tells coding agents
how it wants to be checked. A command counts when it is written as code — an inline backtick span
or a line of a fenced block — and the line, the prose just before the block, or the heading it sits
under talks about tests, lint, types, checks or builds. Prose is never parsed for commands, and
commands that change files or install things are never taken (see keel.verify.detect.commands).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from keel.verify.detect.commands import categorize, mentions_check, program_of
from keel.verify.detect.common import Findings, read_text
from keel.verify.plan import Category

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
_MAX_COMMANDS = 8
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_PROMPT = re.compile(r"^\s*(?:\$|>)\s+")


@dataclass(frozen=True)
class NamedCommand:
    command: str
    category: Category
    where: str           # "AGENTS.md line 12"


def commands_in_markdown(text: str, filename: str) -> list[NamedCommand]:
    """Check commands named in a Markdown instructions file, in document order, without duplicates."""
    found: list[NamedCommand] = []
    heading, previous_line, fence_context = "", "", None
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            # Opening a block: its context is the heading plus the prose line that introduced it.
            fence_context = None if fence_context is not None else f"{heading}\n{previous_line}"
            continue
        if fence_context is not None:
            command = _PROMPT.sub("", line).strip()
            if command and not command.startswith("#") and not command.endswith("\\"):
                _add(found, command, fence_context, f"{filename} line {number}")
            continue
        match = _HEADING.match(line)
        if match:
            heading = match.group(1)
            continue
        if line.strip():
            previous_line = line
        for span in _INLINE.findall(line):
            _add(found, _PROMPT.sub("", span).strip(), f"{heading}\n{line}", f"{filename} line {number}")
    return found


def _add(found: list[NamedCommand], command: str, context: str, where: str) -> None:
    if not mentions_check(context) or any(c.command == command for c in found):
        return
    category = categorize(command, context)
    if category is not None:
        found.append(NamedCommand(command, category, where))


def detect_agents_md(workspace: Path, found: Findings) -> None:
    named: list[NamedCommand] = []
    for filename in INSTRUCTION_FILES:
        text = read_text(workspace / filename)
        if text:
            named += [c for c in commands_in_markdown(text, filename) if all(c.command != n.command for n in named)]
    for entry in named[:_MAX_COMMANDS]:
        program = program_of(entry.command)
        why = f"{entry.where} names it"
        if program is None:
            continue
        if "/" in program:
            # A project script: it must exist in the workspace; its interpreter is its own business.
            if (workspace / program).is_file():
                found.plan(entry.category, entry.command, f"{why}; {program} exists", source="agents_md")
            else:
                found.skip(entry.category, entry.command, f"{why}, but {program} does not exist", "agents_md")
            continue
        at = found.which(program)
        if at:
            found.plan(entry.category, entry.command, f"{why}; {program} found at {at}", source="agents_md")
        else:
            found.skip(entry.category, entry.command, f"{why}, but {program} is not installed", "agents_md")
