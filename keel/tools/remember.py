"""remember: append one learning to the project's AGENTS.md, under a "## Learnings" heading.

Later sessions start with AGENTS.md in their first message (keel.context.memory), so a fact found
the hard way ("the tests need `make fixtures` first") is not rediscovered every time. It is an edit
like any other: the same path jail, approval (``edit`` rules, the approval mode), snapshot for undo
and ``files_changed`` as write_file. Text that looks like a credential is refused
(keel.context.secrets): AGENTS.md is committed and read by every later session.
"""

from __future__ import annotations

import re

from pydantic import Field

from keel.context.secrets import secret_kind
from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, display_path, resolve_in_workspace
from keel.tools.base import (
    Tool,
    ToolAnnotations,
    ToolArgs,
    ToolContext,
    ToolResult,
    ToolSpec,
    approval_refusal,
)
from keel.tools.files import file_session
from keel.tools.textfile import write_workspace_file

MEMORY_FILE = "AGENTS.md"
HEADING = "## Learnings"
MAX_LEARNING_CHARS = 500
_HEADING_LINE = re.compile(r"^##\s+Learnings\s*#*\s*$", re.IGNORECASE)
_SECTION_END = re.compile(r"^#{1,2}\s")    # the next heading of the same or a higher level


class RememberArgs(ToolArgs):
    learning: str = Field(
        min_length=1, max_length=MAX_LEARNING_CHARS,
        description="One fact about this project worth knowing in later sessions, in one or two sentences: "
                    "how to run or test something, a convention, a pitfall and its fix. Not secrets, not "
                    "task progress.")


DESCRIPTION = (
    "Save a lasting learning about this project to AGENTS.md (under '## Learnings'), which every later "
    "session reads at its start. Use it for facts you had to discover and that will hold next time, e.g. "
    "'Run tests with `make test`; plain pytest misses the fixtures'. Never for secrets or for notes about "
    "the current task.")


def append_learning(text: str, learning: str) -> str:
    """``text`` (an AGENTS.md, possibly empty) with ``- learning`` added at the end of its Learnings
    section, which is created at the end of the file when there is none. Line endings are kept."""
    newline = "\r\n" if text.count("\r\n") > text.count("\n") // 2 and "\r\n" in text else "\n"
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    item = f"- {learning}"
    start = next((i for i, line in enumerate(lines) if _HEADING_LINE.match(line)), None)
    if start is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ([""] if lines else []) + [HEADING, "", item]
    else:
        end = next((i for i in range(start + 1, len(lines)) if _SECTION_END.match(lines[i])), len(lines))
        last = end
        while last > start + 1 and not lines[last - 1].strip():
            last -= 1
        insert = [item] if last > start + 1 else ["", item]
        lines[last:last] = insert
        if last + len(insert) < len(lines) and lines[last + len(insert)].strip():
            lines.insert(last + len(insert), "")   # keep a blank line before the next heading
    return newline.join(lines) + newline


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run_remember(args: RememberArgs, ctx: ToolContext) -> ToolResult:
    learning = _one_line(args.learning).removeprefix("- ").strip()
    if not learning:
        return ToolResult.error("Nothing to remember: the learning is empty.")
    kind = secret_kind(args.learning)
    if kind is not None:
        return ToolResult.error(
            f"Not remembered: the text looks like it contains {kind}. AGENTS.md is committed and shown to every "
            "later session, so secrets never go there. Write where the secret is kept instead (e.g. 'the API "
            "key is read from $SERVICE_API_KEY'), without its value.", refused="secret")
    try:
        real = resolve_in_workspace(ctx.workspace, MEMORY_FILE, for_write=True)
    except PathJailError as exc:
        return ToolResult.error(str(exc))
    shown = display_path(ctx.workspace, real)
    existed = real.exists()
    if existed and not real.is_file():
        return ToolResult.error(f"{shown} exists and is not a regular file; nothing was remembered.")
    try:
        old = read_beneath(*anchor(real)) if existed else b""   # no symlink followed
        old_text = old.decode("utf-8")
    except OSError as exc:
        return ToolResult.error(f"Cannot read {shown}: {exc.strerror or exc}; nothing was remembered.")
    except UnicodeDecodeError:
        return ToolResult.error(f"{shown} is not UTF-8 text; nothing was remembered.")
    if any(_one_line(line).removeprefix("- ") == learning for line in old_text.splitlines()):
        return ToolResult(ok=True, output=f"Already in {shown}: - {learning}", meta={"unchanged": True})
    refusal = approval_refusal(ctx, "edit", shown)
    if refusal is not None:
        return ToolResult.error(refusal)
    data = append_learning(old_text, learning).encode("utf-8")
    session = file_session(ctx)
    try:
        session.snapshot(real)
        write_workspace_file(real, data, make_parents=True)   # keeps an existing file's mode; a new one: 0o666 less the umask
    except OSError as exc:
        return ToolResult.error(f"Could not write {shown}: {exc.strerror or exc}; nothing was changed.")
    session.record_write(real, data)
    verb = "Added to" if existed else "Created"
    return ToolResult(ok=True, output=f"{verb} {shown} under '{HEADING}': - {learning}",
                      files_changed=[shown], meta={"created": not existed})


REMEMBER = Tool(
    spec=ToolSpec(name="remember", description=DESCRIPTION, args=RememberArgs,
                  annotations=ToolAnnotations(read_only=False, destructive=False)),
    execute=run_remember,
)
