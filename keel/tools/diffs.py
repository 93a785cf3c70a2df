"""A unified diff of each file edit_file / write_file changed, for front ends (result.meta["diff"]).

The model never sees it: the runner puts it in the `tool_call` event, so the REPL, `keel log` and
stream-json readers all show the same change. Computed from the file's bytes just before and just
after the tool ran, so it is the change on disk, whatever matching the edit tool did.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.policy.beneath import anchor, read_beneath_stat
from keel.policy.paths import PathJailError, display_path, resolve_in_workspace
from keel.policy.reads import shows
from keel.tools.base import Tool, ToolContext, ToolResult

DIFFED_TOOLS = ("edit_file", "write_file", "change_file")
MAX_FILE_BYTES = 512_000   # larger files: no diff (reading twice and diffing would cost more than it shows)
MAX_DIFF_CHARS = 8_000     # a rewritten file's diff is cut here, with a note


def _text(path: Path) -> str | None:
    """The file as text; "" when absent; None when binary, huge or unreadable (no diff then)."""
    try:   # the jail's real path, read with no symlink followed and never blocking (keel.policy.beneath)
        data, st = read_beneath_stat(*anchor(path), limit=MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    if st.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{name}" if before else "/dev/null", tofile=f"b/{name}", n=2)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF_CHARS:
        cut = text[:MAX_DIFF_CHARS].rsplit("\n", 1)[0]
        text = f"{cut}\n… diff cut at {MAX_DIFF_CHARS:,} characters\n"
    return text


def preview_diff(before: str, after: str, name: str) -> Callable[[], str]:
    """The diff an edit would make, computed only when a person is asked (difflib costs time on big
    files, and most edits are asked about by no one)."""
    def diff() -> str:
        if len(before) + len(after) > 2 * MAX_FILE_BYTES:
            return f"(no diff shown: {name} is over {MAX_FILE_BYTES // 1000:,} kB)\n"
        return unified_diff(before, after, name)
    return diff


def with_diff(tool: Tool) -> Tool:
    def execute(args: Any, ctx: ToolContext) -> ToolResult:
        try:
            real = resolve_in_workspace(ctx.workspace, str(getattr(args, "path", "")), for_write=True)
        except (PathJailError, OSError, ValueError):
            return tool.execute(args, ctx)   # the tool itself reports the bad path
        if not shows(ctx.approval)(real):   # a secret's bytes never go to the event log (keel.policy.reads)
            result = tool.execute(args, ctx)
            if result.ok and result.files_changed:
                result.meta["diff_withheld"] = "reading this file needs approval: its diff is not shown"
            return result
        before = _text(real)
        result = tool.execute(args, ctx)
        if result.ok and result.files_changed and before is not None:
            after = _text(real)
            if after is not None and after != before:
                result.meta["diff"] = unified_diff(before, after, display_path(ctx.workspace, real))
        return result
    return Tool(tool.spec, execute)


def add_diffs(tools: list[Tool]) -> list[Tool]:
    """``tools`` with edit_file and write_file reporting their diff."""
    return [with_diff(t) if t.spec.name in DIFFED_TOOLS else t for t in tools]
