"""The fields of every event kind, as TypedDicts: the schema docs/events.md describes, in code.

``EVENT_TYPES`` maps each ``type`` to its TypedDict; ``problems(event)`` says how an event departs from
it (an unknown kind, a missing or unknown field, a value of the wrong type). tests/test_event_types.py
keeps this module, docs/events.md and the events a real run emits in step. Every event also carries
the fields of ``EventBase`` (keel.core.events.EventBus.emit adds them).
"""

# No `from __future__ import annotations`: TypedDict reads NotRequired from evaluated annotations.
import types
import typing
from typing import Any, NotRequired, TypedDict, Union


class EventBase(TypedDict):
    type: str
    schema: int
    ts: float
    session_id: str
    step: NotRequired[int]


class UsageJson(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    estimated: NotRequired[bool]


class VariantJson(TypedDict):
    """A model call sampled differently because the model repeated a reply keel turned down
    (keel.loop.variety); temperature and seed are None for an engine without sampling settings."""
    n: int
    why: str
    temperature: float | None
    seed: int | None
    avoid: NotRequired[list[str]]   # tools the reply could not call (absent: none)


class SessionStart(EventBase):
    workspace: str
    task: str
    model: str
    attended: bool
    sandbox: str
    confining: bool
    protection: str
    tools: list[str]
    config: dict[str, Any]
    engine_setup: NotRequired[dict[str, Any]]
    serving: NotRequired[dict[str, Any]]
    assists: NotRequired[list[str]]   # the assists on for the run (keel.core.assists)


class AssistEvent(EventBase):
    """An assist acted (keel.core.assists): its name and, in a few words, on what."""
    name: str
    detail: str


class Resume(EventBase):
    from_step: int
    interrupted_calls: list[str]
    previous_status: str | None


class ModelCall(EventBase):
    model: str
    usage: UsageJson
    latency_s: float
    retries: int
    finish_reason: str | None
    cut_reason: str | None
    tool_calls: int
    tool_call_format: str
    prefix_reuse: float | None
    content: str
    reasoning: str
    replay: dict[str, Any]
    variant: NotRequired[VariantJson]


class AssistantDelta(EventBase):
    kind: str
    text: str


class ToolCallEvent(EventBase):
    call_id: str
    name: str
    arguments: str
    ok: bool
    repeat: int
    not_run: bool
    invalid: bool
    result_preview: str
    output_lines: NotRequired[int]
    output_bytes: int
    files_changed: list[str]
    elapsed_ms: float
    diff: NotRequired[str]


class WorkspaceChange(EventBase):
    tool: str
    changes: list[dict[str, Any]]
    not_undoable: list[str]


class WorkspaceWatch(EventBase):
    enabled: bool
    files: int
    scan_s: float
    note: str


class WorkspaceSnapshot(EventBase):
    enabled: bool
    reason: NotRequired[str]
    files: NotRequired[int]
    too_large: NotRequired[list[str]]
    note: str


class Approval(EventBase):
    action: str
    target: str
    decision: str
    allowed: bool
    how: str
    cancelled: NotRequired[bool]   # the run was interrupted while the person was asked


class DecisionEvent(EventBase):
    verdict: str
    reason: str
    pushback_kind: str | None
    pushback: str | None


class VerificationPlan(EventBase):
    checks: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    hints: list[str]


class Verification(EventBase):
    status: str
    problem: str | None
    checks: list[dict[str, Any]]
    preexisting_failures: list[str]
    tampered: list[str]
    unchanged: bool
    digest: str
    elapsed_s: NotRequired[float]   # the gate run's wall time, apart from any tool's
    request: NotRequired[str]       # the kind of request judged: change, answer or verify (keel.core.request)


class ChecksStart(EventBase):
    phase: str                      # "baseline" (before the first change) or "verify" (a completion claim)
    commands: list[str]


class ChecksBefore(EventBase):
    results: list[dict[str, Any]]
    elapsed_s: NotRequired[float]


class Compaction(EventBase):
    trigger: str
    ok: bool
    tokens_before: int
    tokens_after: int
    folded: NotRequired[dict[str, Any]]
    components: NotRequired[dict[str, Any]]
    summarizer: NotRequired[str | None]
    summary_error: NotRequired[str | None]
    summary_tokens: NotRequired[int | None]
    error: str | None
    record: NotRequired[str | None]


class CacheBreak(EventBase):
    index: int
    cause: str
    prefix_reuse: float | None
    shared_chars: int
    previous_chars: int


class ContextWindow(EventBase):
    tokens: int
    source: str
    reply_cap: int | None
    trigger: int
    prompt_limit: int


class ChangeRequest(EventBase):
    path: str
    with_note: bool
    usage: UsageJson
    latency_s: float
    finish_reason: str | None
    reply: str


class CandidateEvent(EventBase):
    """One more rewrite change_file asked for and tried on a copy (keel.drive.candidates)."""
    path: str
    n: int                       # 1-based: the variant it was sampled with
    temperature: float | None    # as sampled (None: the engine does not say)
    seed: int | None
    failing_before: int          # the failure score to beat (keel.drive.check_text.failure_score): the best rewrite before
    failing: int | None          # its own on the copy; None: not tried (no rewrite, or a protected test)
    diff_lines: int | None
    kept: bool
    why: str
    tokens: int
    seconds: float


class Hook(EventBase):
    event: str
    command: str
    source: str
    tool: str | None
    outcome: str
    exit_code: int | None
    elapsed_ms: float
    reason: str | None
    stderr: str
    sandboxed: NotRequired[bool]          # False: it ran outside the OS sandbox (the user's sandbox = false)
    note: NotRequired[str | None]         # why it ran otherwise than configured (keel.ext.hooks)
    undone: NotRequired[list[str] | None]  # what keel put back or stripped after it


class SubagentStart(EventBase):
    profile: str
    task: str
    tools: list[str]
    max_steps: int


class PlanSaved(EventBase):
    path: str


class PlanApproved(EventBase):
    plan: str
    todos: list[Any]
    resumed: NotRequired[bool]


class SessionSaveFailed(EventBase):
    error: str
    path: str


class Changes(EventBase):
    diffstat: str
    files: list[dict[str, Any]]
    summary: str
    debug_leftovers: list[Any]
    stray_files: list[Any]
    unrelated: list[Any]
    runs_later: NotRequired[list[Any]]     # other programs' run-later config written: {"path", "kept"}


class Stop(EventBase):
    status: str
    reason: str
    error: NotRequired[str | None]
    summary: str
    usage: UsageJson
    cost_usd: float | None


EVENT_TYPES: dict[str, type] = {
    "session_start": SessionStart, "resume": Resume, "model_call": ModelCall, "assistant_delta": AssistantDelta,
    "tool_call": ToolCallEvent, "workspace_change": WorkspaceChange, "workspace_watch": WorkspaceWatch,
    "workspace_snapshot": WorkspaceSnapshot, "approval": Approval, "decision": DecisionEvent,
    "verification_plan": VerificationPlan, "verification": Verification, "checks_start": ChecksStart,
    "checks_before": ChecksBefore,
    "compaction": Compaction, "cache_break": CacheBreak, "context_window": ContextWindow,
    "change_request": ChangeRequest, "candidate": CandidateEvent, "assist": AssistEvent, "hook": Hook, "subagent_start": SubagentStart, "plan_saved": PlanSaved,
    "plan_approved": PlanApproved, "session_save_failed": SessionSaveFailed, "changes": Changes, "stop": Stop,
}
COMMON_FIELDS = frozenset(EventBase.__annotations__)


def fields_of(kind: str) -> set[str]:
    """The fields particular to ``kind`` (those every event carries left out)."""
    td: Any = EVENT_TYPES[kind]
    return set(td.__required_keys__ | td.__optional_keys__) - COMMON_FIELDS


def _type_ok(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if typing.is_typeddict(hint):
        return isinstance(value, dict) and not _typed_dict_problems(value, hint, "")
    if origin is not None:
        return isinstance(value, origin)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _typed_dict_problems(value: dict[str, Any], td: Any, where: str) -> list[str]:
    hints = typing.get_type_hints(td)
    out = [f"{where}missing field {k!r}" for k in sorted(td.__required_keys__ - value.keys())]
    out += [f"{where}unknown field {k!r}" for k in sorted(value.keys() - hints.keys())]
    out += [f"{where}{k!r} is {type(v).__name__}, not {hints[k]}" for k, v in value.items()
            if k in hints and not _type_ok(v, hints[k])]
    return out


def problems(event: dict[str, Any]) -> list[str]:
    """How ``event`` departs from its kind's TypedDict; [] when it fits."""
    td = EVENT_TYPES.get(event.get("type", ""))
    if td is None:
        return [f"unknown event type {event.get('type')!r}"]
    return _typed_dict_problems(event, td, f"{event['type']}: ")
