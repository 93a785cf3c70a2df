"""Tools that talk to the loop rather than the workspace: todo_write, finish, ask_user.

They only report; the stop decider judges. ``finish`` is a claim, not a stop: the decider
checks the evidence (todos, fresh passing checks) before it accepts it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec


class TodoItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, description="What to do, one short sentence.")
    status: Literal["pending", "in_progress", "done"] = Field(description="pending, in_progress or done.")


class TodoWriteArgs(ToolArgs):
    todos: list[TodoItem] = Field(
        description="The whole todo list (it replaces the previous one). Keep one item in_progress.")


class FinishArgs(ToolArgs):
    summary: str = Field(min_length=1, description="What you changed and how you verified it.")


class AskUserArgs(ToolArgs):
    question: str = Field(min_length=1, description="One specific question for the user.")


def run_todo_write(args: TodoWriteArgs, _ctx: ToolContext) -> ToolResult:
    todos = [{"content": t.content, "status": t.status} for t in args.todos]
    marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
    lines = [f"{marks[t['status']]} {t['content']}" for t in todos]
    open_count = sum(t["status"] != "done" for t in todos)
    text = f"Todo list updated ({open_count} open of {len(todos)}):\n" + "\n".join(lines)
    return ToolResult(ok=True, output=text, todos=todos)


def run_finish(args: FinishArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(ok=True, output="Finish requested; checking completion criteria.", finished=args.summary)


NOBODY_HERE = "No one is here to answer. Decide yourself, state your assumption in one sentence, and continue."


def run_ask_user(args: AskUserArgs, ctx: ToolContext) -> ToolResult:
    """Three cases: a person can answer inline (their answer is the result); a person is present
    but answers between turns (the run stops with needs_user); nobody is there (decide yourself)."""
    if ctx.ask_user is not None:
        try:
            answer = ctx.ask_user(args.question).strip()
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer:
            return ToolResult(ok=True, output=f"The user answered: {answer}")
        return ToolResult(ok=True, output="The user gave no answer. " + NOBODY_HERE)
    if ctx.attended:
        return ToolResult(ok=True, output="Question passed to the user.", question=args.question)
    return ToolResult(ok=True, output=NOBODY_HERE)


TODO_WRITE = Tool(ToolSpec(
    "todo_write",
    "Write the task's todo list (replaces the whole list). Use it for tasks with several steps; mark items "
    "done as you finish them. You cannot finish while items are pending or in_progress.",
    TodoWriteArgs, ToolAnnotations(read_only=False, idempotent=True)), run_todo_write)

FINISH = Tool(ToolSpec(
    "finish",
    "Call when the task is complete and verified (tests or the changed code ran successfully after your "
    "last edit). Give a short summary.",
    FinishArgs, ToolAnnotations(read_only=False)), run_finish)

ASK_USER = Tool(ToolSpec(
    "ask_user",
    "Ask the user one question, only when you cannot proceed without their answer. If no one is present "
    "you will be told to decide yourself.",
    AskUserArgs, ToolAnnotations(read_only=True)), run_ask_user)
