"""The outcome of a run, in the shape the CLI's json output and the library return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from keel.engine.types import Usage

EXIT_COMPLETE, EXIT_INCOMPLETE, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_PLAN = 3  # plan mode stopped with a plan for a person to approve: not done, not a failure


@dataclass
class RunResult:
    status: Literal["complete", "incomplete", "error"]
    stop_reason: str
    summary: str = ""
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    duration_s: float = 0.0
    files_changed: list[str] = field(default_factory=list)
    session_id: str = ""
    log: str | None = None
    error: str | None = None
    # whether prices are configured (the runner sets it): without them cost_usd is not a measurement and
    # the result says null, never $0; a result made outside a run (a usage error) has no prices either
    cost_known: bool = False
    # the verification gate's last verdict, and what the run changed (diffstat, self-check flags)
    verification: dict[str, Any] | None = None
    changes: dict[str, Any] | None = None
    handoff: str | None = None  # on a limit stop: the note for whoever carries on (keel.context.handoff)
    plan: str | None = None  # plan mode: the plan awaiting approval
    serving: dict[str, Any] | None = None  # what served the run (keel.engine.provenance)
    question: str | None = None  # needs_user: the question to relay (`keel run --resume ID --answer TEXT`)
    request: dict[str, Any] | None = None  # how keel read the task: change, answer or verify, and why
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def exit_code(self) -> int:
        if self.stop_reason == "interrupted":
            return EXIT_INTERRUPTED
        if self.stop_reason == "awaiting_plan_approval":
            return EXIT_PLAN
        if self.status == "complete":
            return EXIT_COMPLETE
        if self.status == "error":
            return EXIT_CONFIG
        return EXIT_INCOMPLETE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "stop_reason": self.stop_reason,
            "summary": self.summary,
            "steps": self.steps,
            "usage": self.usage.to_json(),
            "cost_usd": round(self.cost_usd, 6) if self.cost_known else None,
            "duration_s": round(self.duration_s, 3),
            "files_changed": self.files_changed,
            "session_id": self.session_id,
            "log": self.log,
        }
        if self.verification is not None:
            out["verification"] = self.verification
        if self.changes is not None:
            out["changes"] = self.changes
        if self.handoff is not None:
            out["handoff"] = self.handoff
        if self.plan is not None:
            out["plan"] = self.plan
        if self.serving is not None:
            out["serving"] = self.serving
        if self.question is not None:
            out["question"] = self.question
        if self.request is not None:
            out["request"] = self.request
        if self.error:
            out["error"] = self.error
        return out
