"""Read-only tool sets: the shell limited to commands that only read, for plan mode (keel.ext.plan)
and read-only sub-agents (keel.drive.delegate).

``run_shell`` runs only commands the shell policy judges read-only without any sandbox's help
(``ls``, ``git log``, ``grep``); anything that writes, runs project code or reaches the network is
refused, with a reason that names who refused it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from keel.tools.base import Tool, ToolContext, ToolResult

# Programs that only read. The shell policy also *allows* running the project's tests and builds,
# but those write caches and build output into the workspace, so plan mode wants both: a reader
# by name, and the policy's unasked allow for these exact arguments (sed -i, find -delete, git
# commit and sort -o are not allowed unasked, so they are refused).
_READERS = frozenset({"ls", "cat", "head", "tail", "wc", "pwd", "echo", "true", "false", "which", "type", "stat",
                      "du", "df", "diff", "cmp", "cut", "tr", "nl", "basename", "dirname", "realpath", "readlink",
                      "whoami", "uname", "grep", "egrep", "fgrep", "rg", "jq", "test", "[", "[[", "seq", "id",
                      "md5sum", "sha1sum", "sha256sum", "column", "paste", "comm", "join", "fold", "rev", "od",
                      "hexdump", "strings", "tac", "cd", "sort", "tree", "uniq", "xxd", "file", "date", "find",
                      "fd", "git", "sed", "awk", "less", "more"})


def is_read_only_command(command: str, workspace: Path) -> bool:
    """True when every program ``command`` runs is a reader and the shell policy allows it unasked
    without a confining sandbox, with no network: listing, reading, searching, git history."""
    import os

    from keel.policy.shell.decision import worst_decision
    from keel.policy.shell.risk import analyze_command

    try:
        parts = analyze_command(command, workspace, confined=False)
    except Exception:  # a command the policy cannot judge is not read-only
        return False
    if not parts or worst_decision(parts) != "allow" or any(p.network for p in parts):
        return False
    return all(p.words and os.path.basename(p.words[0]) in _READERS for p in parts)


def read_only_shell(tool: Tool, who: str = "plan mode", advice: str = "Use read-only commands or the file "
                     "tools while planning; put running it in your plan.") -> Tool:
    inner = tool.execute

    def run(args: Any, ctx: ToolContext) -> ToolResult:
        command = str(getattr(args, "command", ""))
        if not is_read_only_command(command, ctx.workspace):
            return ToolResult.error(
                f"Refused: {who} — `{command.strip()[:200]}` is not a read-only command (it may write, run "
                f"project code or use the network). {advice}", read_only_refusal=True)
        return inner(args, ctx)
    return dataclasses.replace(tool, execute=run)


def read_only_tools(tools: list[Tool]) -> list[Tool]:
    """The read-only subset for sub-agents: read-only tools plus run_shell limited to read-only
    commands; nothing that talks to the user."""
    keep = [t for t in tools if t.spec.annotations.read_only and t.spec.name not in ("ask_user", "delegate")]
    shell = [t for t in tools if t.spec.name == "run_shell"]
    return keep + [read_only_shell(t, "read-only sub-agent", "Use read-only commands or the file tools; "
                                     "report what should be run in your summary.") for t in shell]
