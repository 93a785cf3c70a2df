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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.tools.base import Tool, ToolContext, ToolResult

PLAN_FILE = "plan.md"
# Tools that change nothing outside the loop's own bookkeeping: allowed in plan mode although
# they are not annotated read-only (todo_write orders the work; finish presents the plan).
_PLAN_SAFE = frozenset({"todo_write", "finish"})

PLAN_MODE_NOTE = (
    "PLAN MODE: do not change anything yet. Explore with read-only tools (list_dir, read_file, find_files, "
    "grep, read-only shell commands), then reply with your plan — a numbered list of concrete steps naming "
    "the files to change and how you will verify — and no tool call. A person will read and approve it "
    "before anything is executed. File edits and commands that write are refused in plan mode.")


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


def _refusal(name: str) -> str:
    return (f"Refused: plan mode — {name} changes the workspace, so it is not run while planning. "
            "Read and explore only; when you are ready, reply with your plan (no tool call).")


def _refuse(tool: Tool) -> Tool:
    def refuse(_args: Any, _ctx: ToolContext) -> ToolResult:
        return ToolResult.error(_refusal(tool.spec.name), read_only_refusal=True)
    return dataclasses.replace(tool, execute=refuse)


def _read_only_shell(tool: Tool, who: str = "plan mode", advice: str = "Use read-only commands or the file "
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


def plan_mode_tools(tools: list[Tool]) -> list[Tool]:
    """The same tools, with everything that could change the workspace refused."""
    out = []
    for tool in tools:
        if tool.spec.name == "run_shell":
            out.append(_read_only_shell(tool))
        elif tool.spec.annotations.read_only or tool.spec.name in _PLAN_SAFE:
            out.append(tool)
        else:
            out.append(_refuse(tool))
    return out


def read_only_tools(tools: list[Tool]) -> list[Tool]:
    """The read-only subset for sub-agents: read-only tools plus run_shell limited to read-only
    commands; nothing that talks to the user."""
    keep = [t for t in tools if t.spec.annotations.read_only and t.spec.name not in ("ask_user", "delegate")]
    shell = [t for t in tools if t.spec.name == "run_shell"]
    return keep + [_read_only_shell(t, "read-only sub-agent", "Use read-only commands or the file tools; "
                                     "report what should be run in your summary.") for t in shell]


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


# -- the Agent's entry and exit in plan mode / with an approved plan ----------------------------

def start_run(agent: Agent, task: str, approved_plan: str | None) -> tuple[list[dict[str, Any]], TaskState | None,
                                                                            RunResult | None]:
    """The first messages and task state for ``agent.run``: SessionStart and UserPromptSubmit hooks
    (their context is added to the task; a refused prompt ends the run before any model call), the
    plan-mode note, or the approved plan with its steps as todos."""
    from keel.loop.result import RunResult
    from keel.loop.state import TaskState, Todo

    refusal, context = agent.ext.start_context(task)
    if refusal is not None:
        message = f"the prompt was refused by a UserPromptSubmit hook: {refusal}"
        agent.bus.emit("stop", step=0, status="error", reason="prompt_blocked", error=message, summary="",
                       usage={"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}, cost_usd=0.0)
        return [], None, RunResult(status="error", stop_reason="prompt_blocked", error=message,
                                   session_id=agent.session_id, log=str(agent.log_path) if agent.log_path else None)
    messages = agent.initial_messages(task)
    extra = "".join(f"\n\n<hook_context>\n{c}\n</hook_context>" for c in context)
    state = None
    if agent.plan_mode:
        extra += "\n\n" + PLAN_MODE_NOTE
    elif approved_plan is not None:
        extra += approved_plan_message(approved_plan)
        state = TaskState(task=task, todos=[Todo(t["content"], "pending") for t in plan_todos(approved_plan)])
        agent.bus.emit("plan_approved", plan=approved_plan[:4000], todos=len(state.todos))
    if extra:
        messages[-1]["content"] += extra
    return messages, state, None


def keep_plan(agent: Agent, result: RunResult) -> None:
    """Plan mode stopped with a plan: put it in the result and save it as plan.md in the session
    directory, where ``keel run --resume SESSION --approve-plan`` finds it."""
    result.plan = result.summary
    if agent.log_path is None:
        return
    path = save_plan(agent.log_path.with_suffix(""), result.summary)
    agent.bus.emit("plan_saved", path=str(path))


if TYPE_CHECKING:
    from keel.agent import Agent
    from keel.loop.result import RunResult
    from keel.loop.state import TaskState
