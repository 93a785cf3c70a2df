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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec

if TYPE_CHECKING:
    from keel.agent import Agent

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


def make_delegate_tool(get_agent: Callable[[], Agent]) -> Tool:
    """The tool, bound to the agent whose engine, tools, context, limits and log it shares."""

    def run(args: DelegateArgs, _ctx: ToolContext) -> ToolResult:
        return run_subagent(get_agent(), args.task, args.profile)

    spec = ToolSpec("delegate",
                    "Start a sub-agent with a fresh context to investigate one question (profile explorer: "
                    "read-only tools, a few steps) and get back its summary. Use it for broad searches whose "
                    "details you do not need to keep.",
                    DelegateArgs, ToolAnnotations(read_only=True))
    return Tool(spec, run)


def run_subagent(agent: Agent, task: str, profile: str) -> ToolResult:
    from keel.engine.prompts import task_message
    from keel.ext.plan import read_only_tools
    from keel.loop.runner import Runner
    from keel.tools.registry import ToolRegistry
    from keel.trace.events import EventBus

    sub_id = f"{profile}-{next(_ids)}"
    parent = getattr(agent, "runner", None)
    tools = [t for name in agent.registry.names if (t := agent.registry.get(name)) is not None]
    registry = ToolRegistry(read_only_tools(tools))
    ctx = dataclasses.replace(agent.ctx, attended=False, ask_user=None)
    limits = _child_limits(agent.config.extensions.subagent_max_steps, parent)
    if limits is None:
        return ToolResult.error("The run's token or cost budget is spent; no sub-agent was started.")

    def forward(event: dict[str, Any]) -> None:
        if event["type"] == "assistant_delta":
            return  # the sub-agent's streamed text is not the answer the user watches
        kind = "subagent_stop" if event["type"] == "stop" else event["type"]
        for sink in list(agent.bus.sinks):
            sink({**event, "type": kind, "subagent": sub_id})

    bus = EventBus(agent.bus.session_id, [forward])
    bus.emit("subagent_start", profile=profile, task=task[:2000], tools=registry.names, max_steps=limits.max_steps)
    prices = parent.prices if parent is not None else None
    engine = parent.engine if parent is not None else agent.engine  # the parent's guards (runaway, deadline)
    runner = Runner(engine, registry, ctx, bus, limits=limits, prices=prices, attended=False, task=task)
    messages = [{"role": "system", "content": PROFILES[profile]},
                {"role": "user", "content": task_message(task, str(agent.workspace), agent.protection)}]
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


def _child_limits(max_steps: int, parent: Any) -> Limits | None:
    """The sub-agent's limits: its own steps; tokens, cost and time are what the parent has left."""
    from keel.loop.limits import Limits

    if parent is None:
        return Limits(max_steps=max_steps)
    plim, used = parent.limits, parent.usage
    tokens = cost = None
    if plim.max_tokens is not None:
        tokens = plim.max_tokens - used.total
        if tokens <= 0:
            return None
    if plim.max_cost_usd is not None:
        cost = plim.max_cost_usd - parent._cost()
        if cost <= 0:
            return None
    seconds = None
    if parent.ctx.deadline is not None:
        import time
        seconds = max(parent.ctx.deadline - time.monotonic(), 0.001)
    return Limits(max_steps=max_steps, max_tokens=tokens, max_cost_usd=cost, max_seconds=seconds)


if TYPE_CHECKING:
    from keel.loop.limits import Limits
