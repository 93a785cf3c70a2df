"""The tool framework: a typed schema kept apart from the code that executes it.

A ``ToolSpec`` is what the model sees (name, description, argument model, annotations).
An executor is a plain function ``(args, ctx) -> ToolResult``. The registry pairs them,
validates raw JSON arguments and turns every failure into text the model can act on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from keel.core.assists import Assists

if TYPE_CHECKING:
    from keel.core.events import EventBus
    from keel.core.request import Request
    from keel.engine.types import Engine
    from keel.policy.sandbox import SandboxPolicy
    from keel.tools.seams import FileFacts, ShellGate

A = TypeVar("A", bound=BaseModel)


class ToolArgs(BaseModel):
    """Base for argument models: unknown fields are an error the model is told about, except the
    schema's own keywords echoed back. Measured on a 1.5B model without a grammar: a right edit_file
    call carrying ``"required": ["path", "old_text", "new_text"]`` (copied from the tool schema),
    refused twice as "not an argument". A keyword whose value only repeats the schema is dropped."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_schema_echo(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = set(cls.model_fields)
        echoed = {k for k, v in data.items() if k not in fields and schema_echo(k, v, fields)}
        return {k: v for k, v in data.items() if k not in echoed} if echoed else data


def schema_echo(key: str, value: Any, fields: set[str]) -> bool:
    """Whether ``key: value`` only repeats JSON-schema wording: ``required`` listing argument names,
    or ``type: "object"``. (A ``properties`` object may hold the real arguments: never dropped.)"""
    if key == "required":
        return isinstance(value, list) and all(isinstance(v, str) and v in fields for v in value)
    return key == "type" and value == "object"


@dataclass(frozen=True)
class ToolAnnotations:
    read_only: bool = False      # safe to run in parallel with other read-only calls, never asks
    destructive: bool = False    # may lose data: approval applies
    needs_network: bool = False
    idempotent: bool = False


@dataclass
class CheckRun:
    """A shell command that ran, as verification evidence."""

    command: str
    exit_code: int | None
    kind: str | None          # "test" | "lint" | "type" | "build" | "run" | None (not a check)
    timed_out: bool = False
    tests_ran: int | None = None   # tests the runner's output says ran (keel.outputs.counts); None: unknown
    deselected: int = 0            # tests a selection left out (-k, -m)
    whole_suite: bool = False      # a test runner run with no selection (keel.outputs.checks.whole_test_run)


@dataclass
class ToolResult:
    ok: bool
    output: str
    files_changed: list[str] = field(default_factory=list)
    check: CheckRun | None = None
    finished: str | None = None                 # finish(summary)
    question: str | None = None                 # ask_user(question) when a person is present
    todos: list[dict[str, str]] | None = None   # todo_write
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, message: str, **meta: Any) -> ToolResult:
        return cls(ok=False, output=message, meta=dict(meta))


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    name: str
    description: str
    args: type[A]
    annotations: ToolAnnotations = ToolAnnotations()


Executor = Callable[[Any, "ToolContext"], ToolResult]


@dataclass
class Tool:
    spec: ToolSpec[Any]
    execute: Executor


@dataclass(frozen=True)
class BudgetLeft:
    """What the run has left of its limits; None: that limit is not set."""

    tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None


class RunHandle(Protocol):
    """The run a tool is called from, built by the runner (keel.loop.handle.RunView) and passed at
    call time in ``ToolContext.run``: what tools that drive a model or the gate (keel.drive) may use
    of it, so they never reach into the Agent or the runner."""

    @property
    def engine(self) -> Engine: ...            # the run's engine, with its guards (runaway, deadline)
    @property
    def bus(self) -> EventBus: ...             # the run's events
    @property
    def task(self) -> str: ...
    @property
    def request(self) -> Request: ...          # the task as keel reads it (keel.core.request)
    @property
    def step(self) -> int: ...
    @property
    def verifier(self) -> Any: ...             # keel.verify.verifier.Verifier or None (verify sits above tools)
    @property
    def prices(self) -> Any: ...               # keel.loop.limits.Prices
    @property
    def window_tokens(self) -> int: ...        # the model's context window
    def tools(self) -> list[Tool]: ...         # the run's tools, as the model may call them
    def budget_left(self) -> BudgetLeft: ...


@dataclass
class ToolContext:
    """Everything an executor may touch. Built by the loop; tools never reach for globals."""

    workspace: Path
    attended: bool = False
    # Per-session facts shared by file tools (read snapshots for stale-write checks, backups).
    session: FileFacts | None = None
    # The shell policy / approval gate (keel.tools.seams: a ShellGate, usually a full Gate) and the
    # sandbox (keel.policy); None means defaults.
    approval: ShellGate | None = None
    sandbox: SandboxPolicy | None = None
    shell_timeout_s: float = 120.0
    # When the run must end (time.monotonic() seconds), set by the runner from its wall-clock limit;
    # a command's timeout never reaches past it. None: no limit.
    deadline: float | None = None
    output_cap_bytes: int = 30_000
    ask_user: Callable[[str], str] | None = None
    # The run's session directory (set by keel.agent): run_shell saves long output under it, and
    # read_file may read those saved outputs. None: nothing is saved, long output is only capped.
    session_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Other programs' run-later config the run's commands wrote: {"path", "kept"} (keel.policy.leftovers),
    # named in the run's change report. Shared by the copies of this context the gate makes.
    left_behind: list[dict[str, Any]] = field(default_factory=list)
    # The run this call belongs to, set by the runner when it starts; None outside a run.
    run: RunHandle | None = None
    # Replaces known secret values (the engine's key ...) in every tool's output before the model or
    # the event log sees it (keel.policy.cmdenv.Redactor); None: nothing to replace.
    redact: Callable[[str], str] | None = None
    # Called by a tool just before it first changes the workspace, once approved (approval_refusal,
    # run_shell): the runner's gate baseline, so a person is asked before the checks, not after them.
    # Returns True when it ran something (checks may write caches or reports in the workspace).
    before_change: Callable[[], bool] | None = None
    # Seconds spent inside tool calls on what is not the tool's own work — a person's answer to an
    # approval, the gate's baseline checks — kept apart so a tool's time is its own (registry.execute).
    waited_s: float = 0.0
    # Set when the run must stop now, from another thread (keel mcp-serve: the client went away or the
    # server got SIGTERM): a running command is killed, no further call starts, the run ends interrupted.
    cancel: threading.Event | None = None
    # The assists on for this run (keel.core.assists); outside an agent, all of them.
    assists: Assists = field(default_factory=Assists.every)


def assist_acted(ctx: ToolContext, name: str, detail: str = "") -> None:
    """Record that the assist ``name`` (keel.core.assists) acted in this call: the ``assist`` event that
    ``keel eval`` counts per assist. Outside a run there is no one to tell."""
    if ctx.run is not None:
        ctx.run.bus.emit("assist", step=ctx.run.step, name=name, detail=detail[:300])


def approval_refusal(ctx: ToolContext, action: str, path: str,
                     preview: Callable[[], str] | None = None) -> str | None:
    """Ask the approval gate (if any) whether ``action`` ("edit" or "read") on ``path`` may go ahead.

    Returns None when allowed, else the refusal text for the model. File tools call this after
    the path jail and before touching anything, so rules like ``edit(src/**)`` or ``read(.env)``
    apply to every tool the same way. ``preview``: makes the change an edit would make (a unified
    diff), shown to the person before the question (called only when someone is asked). An allowed edit is about to happen, so the run's
    ``before_change`` (the gate's baseline checks) runs here: after the person answered, not before.
    """
    authorize = getattr(ctx.approval, f"authorize_{action}", None)
    if authorize is not None:
        outcome = authorize(path, preview=preview) if preview is not None else authorize(path)
        if not outcome.allowed:
            return str(outcome.message)
    if action == "edit":
        before_change(ctx)
    return None


def before_change(ctx: ToolContext) -> None:
    """Call the run's hook for the moment before a tool first changes the workspace (the runner's:
    the verification gate's baseline checks, run once)."""
    if ctx.before_change is not None:
        ctx.before_change()
