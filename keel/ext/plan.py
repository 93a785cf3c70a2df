"""Plan mode: explore with read-only tools, present a plan, stop for a person to approve it.

In plan mode every tool keeps its schema (the model sees the same tool list), but executors of
tools that change anything are replaced by a refusal that says "plan mode". ``run_shell`` runs
only commands the shell policy judges read-only without any sandbox's help (``ls``, ``git log``,
``grep``); anything that writes, runs project code or reaches the network is refused.

The run ends when the model replies with its plan (no tool call) or calls ``finish`` with it: the
decider stops with ``awaiting_plan_approval``. The plan is saved as ``plan.md`` in the session
directory; approving it starts execution with its steps as todos (``plan_todos``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.tools.base import Tool, ToolContext, ToolResult
from keel.tools.readonly import read_only_shell

PLAN_FILE = "plan.md"
# Tools that change nothing outside the loop's own bookkeeping: allowed in plan mode although
# they are not annotated read-only (todo_write orders the work; finish presents the plan).
_PLAN_SAFE = frozenset({"todo_write", "finish"})

PLAN_MODE_NOTE = (
    "PLAN MODE: do not change anything yet. Explore with read-only tools (list_dir, read_file, find_files, "
    "grep, read-only shell commands), then reply with your plan — a numbered list of concrete steps naming "
    "the files to change and how you will verify — and no tool call. A person will read and approve it "
    "before anything is executed. File edits and commands that write are refused in plan mode.")


def _refusal(name: str) -> str:
    return (f"Refused: plan mode — {name} changes the workspace, so it is not run while planning. "
            "Read and explore only; when you are ready, reply with your plan (no tool call).")


def _refuse(tool: Tool) -> Tool:
    def refuse(_args: Any, _ctx: ToolContext) -> ToolResult:
        return ToolResult.error(_refusal(tool.spec.name), read_only_refusal=True)
    return dataclasses.replace(tool, execute=refuse)


def plan_mode_tools(tools: list[Tool]) -> list[Tool]:
    """The same tools, with everything that could change the workspace refused."""
    out = []
    for tool in tools:
        if tool.spec.name == "run_shell":
            out.append(read_only_shell(tool))
        elif tool.spec.annotations.read_only or tool.spec.name in _PLAN_SAFE:
            out.append(tool)
        else:
            out.append(_refuse(tool))
    return out


# -- the plan as a file and as todos --------------------------------------------------------------

_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+(?:\[[ xX~]\]\s*)?(.+?)\s*$")


def plan_todos(plan: str, cap: int = 30) -> list[dict[str, str]]:
    """The plan's top-level steps (numbered or bulleted lines) as pending todos; a plan without a
    list becomes one todo. Nested items stay inside their step's text, not separate todos."""
    steps: list[str] = []
    indent: int | None = None
    for line in plan.splitlines():
        m = _STEP.match(line)
        if not m:
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth <= indent:
            steps.append(re.sub(r"\*\*|__|`", "", m.group(1)).strip()[:300])
    steps = [s for s in steps if s][:cap]
    if not steps:
        steps = ["Carry out the approved plan"]
    return [{"content": s, "status": "pending"} for s in steps]


def save_plan(session_dir: Path, plan: str) -> Path:
    session_dir.mkdir(parents=True, exist_ok=True)
    path = session_dir / PLAN_FILE
    path.write_text(plan.strip() + "\n", encoding="utf-8")
    return path


def approved_plan_message(plan: str) -> str:
    """Appended to the task when a plan was approved: execute it, todos already set."""
    return ("\n\nA person reviewed and approved this plan; carry it out now. Its steps are your todo list "
            "(already set): mark each done with todo_write as you complete it, then verify and finish.\n"
            "<approved_plan>\n" + plan.strip() + "\n</approved_plan>")


def keep_plan(result: RunResult, session_dir: Path | None, emit: Callable[..., Any]) -> None:
    """Plan mode stopped with a plan: put it in the result and save it as plan.md in the session
    directory, where ``keel run --resume SESSION --approve-plan`` finds it."""
    result.plan = result.summary
    if session_dir is None:
        return
    path = save_plan(session_dir, result.summary)
    emit("plan_saved", path=str(path))


if TYPE_CHECKING:
    from keel.loop.result import RunResult
