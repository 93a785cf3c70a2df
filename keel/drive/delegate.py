"""The ``delegate`` tool: a sub-agent with a profile, a fresh context and its own step limit.

Profiles: ``explorer`` — read-only tools (list_dir, read_file, find_files, grep, and run_shell limited
to read-only commands), default 6 steps. It answers a question about the workspace and returns a
summary, so the parent's context holds the answer, not the exploration.

What a sub-agent can never do is more than its parent: it gets the parent's own tools (already
behind the parent's approval gate, sandbox, hooks and plan mode), filtered to the read-only subset,
the same ToolContext (approver, sandbox, deadline) and never a person to ask. Its tokens and cost
are the parent's: they are returned in the result's ``meta["usage"]`` and the runner adds them to
the run's usage, and its token/cost/time limits are what the parent has left. Its events go to
the parent's log tagged ``"subagent": "<id>"`` (its stop event as ``subagent_stop``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from keel.core.events import EventBus
from keel.core.state import TaskState
from keel.engine.prompts import task_message
from keel.loop.limits import Limits
from keel.loop.runner import Runner
from keel.tools.base import (
    BudgetLeft,
    RunHandle,
    Tool,
    ToolAnnotations,
    ToolArgs,
    ToolContext,
    ToolResult,
    ToolSpec,
)
from keel.tools.readonly import read_only_tools
from keel.tools.registry import ToolRegistry

EXPLORER_PROMPT = """You are an explorer sub-agent of keel, a coding agent. Another agent gave you one question \
about the project in the current directory (the workspace). Find the answer with read-only tools: list_dir, \
find_files, grep, read_file, and read-only shell commands. You cannot change anything and no one can answer \
questions. Be quick: you have a few steps only. When you know the answer, reply with no tool call: a short, \
specific summary (file paths, line numbers, names) that answers the question. If you could not find it, say \
what you checked."""

PROFILES = {"explorer": EXPLORER_PROMPT}


class DelegateArgs(ToolArgs):
    task: str = Field(min_length=1, description="The question for the sub-agent, self-contained: it sees none of "
                                                "your conversation. E.g. 'Where is the retry delay computed, and "
                                                "which tests cover it?'")
    profile: Literal["explorer"] = Field(default="explorer", description="explorer: read-only investigation.")


_ids = itertools.count(1)


def make_delegate_tool(max_steps: int, protection: Callable[[], str]) -> Tool:
    """The tool; a call shares the engine, tools, limits and log of the run it is called from
    (``ctx.run``). ``max_steps``: the sub-agent's own step limit; ``protection``: what confines
    commands, told to the sub-agent as to its parent."""

    def run(args: DelegateArgs, ctx: ToolContext) -> ToolResult:
        if ctx.run is None:
            return ToolResult.error("delegate runs inside a run only (the sub-agent shares its budget).")
        return run_subagent(ctx.run, ctx, args.task, args.profile, max_steps, protection())

    spec = ToolSpec("delegate",
                    "Start a sub-agent with a fresh context to investigate one question (profile explorer: "
                    "read-only tools, a few steps) and get back its summary. Use it for broad searches whose "
                    "details you do not need to keep.",
                    DelegateArgs, ToolAnnotations(read_only=True))
    return Tool(spec, run)


def run_subagent(parent: RunHandle, parent_ctx: ToolContext, task: str, profile: str, max_steps: int,
                 protection: str) -> ToolResult:
    sub_id = f"{profile}-{next(_ids)}"
    registry = ToolRegistry(read_only_tools(parent.tools()))
    ctx = dataclasses.replace(parent_ctx, attended=False, ask_user=None, run=None)
    limits = _child_limits(max_steps, parent.budget_left())
    if limits is None:
        return ToolResult.error("The run's token or cost budget is spent; no sub-agent was started.")

    def forward(event: dict[str, Any]) -> None:
        if event["type"] == "assistant_delta":
            return  # the sub-agent's streamed text is not the answer the user watches
        kind = "subagent_stop" if event["type"] == "stop" else event["type"]
        for sink in list(parent.bus.sinks):
            sink({**event, "type": kind, "subagent": sub_id})

    bus = EventBus(parent.bus.session_id, [forward])
    bus.emit("subagent_start", profile=profile, task=task[:2000], tools=registry.names, max_steps=limits.max_steps)
    # the parent's engine, with its guards (runaway, deadline)
    # read-only tools: whatever its task says, the sub-agent can only answer it, and is judged on the answer
    state = TaskState(task=task, read_only=True)
    runner = Runner(parent.engine, registry, ctx, bus, limits=limits, prices=parent.prices, attended=False,
                    task=task, state=state)
    messages = [{"role": "system", "content": PROFILES[profile]},
                {"role": "user", "content": task_message(task, str(ctx.workspace), protection)}]
    result = runner.run(messages)
    summary = result.summary.strip() or "(the sub-agent gave no summary)"
    head = f"Sub-agent {sub_id} ({profile}) stopped after {result.steps} step(s): {result.stop_reason}."
    if result.stop_reason == "limit:steps":
        head += (f" It reached its own step limit ({limits.max_steps}) before it answered; its last notes are "
                 "below and may be incomplete. Ask a narrower question or look yourself.")
    elif result.status != "complete":
        head += " It did not finish; its last notes may be incomplete."
    return ToolResult(ok=result.status == "complete", output=f"{head}\n\n{summary}",
                      meta={"usage": result.usage, "subagent": sub_id})


def _child_limits(max_steps: int, left: BudgetLeft) -> Limits | None:
    """The sub-agent's limits: its own steps; tokens, cost and time are what the parent has left
    (None when the parent's token or cost budget is already spent)."""
    if (left.tokens is not None and left.tokens <= 0) or (left.cost_usd is not None and left.cost_usd <= 0):
        return None
    return Limits(max_steps=max_steps, max_tokens=left.tokens, max_cost_usd=left.cost_usd, max_seconds=left.seconds)
