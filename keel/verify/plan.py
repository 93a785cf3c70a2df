"""The verification plan: which commands prove a task done, in which order, and why each was chosen.

A plan is data. Detection (keel.verify.detect) builds it from the project's own files, the task text
and the user's ``--accept`` commands; the gate (keel.verify.gate) runs it on every completion claim.
Categories run in a fixed order — cheap and broad first, the task's own acceptance last:
static → types → build → test → acceptance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Category = Literal["static", "types", "build", "test", "acceptance"]
CATEGORY_ORDER: tuple[Category, ...] = ("static", "types", "build", "test", "acceptance")

# Where a planned command came from. "task" and "accept" are acceptance checks; "config" is a
# pinned plan that replaces inference.
Source = Literal["inferred", "agents_md", "makefile", "task", "accept", "config"]


@dataclass(frozen=True)
class PlannedCheck:
    category: Category
    command: str
    reason: str                        # why it was chosen, shown by `keel checks` and in pushback
    source: Source = "inferred"
    # Files the command itself depends on (e.g. the acceptance script `test_app.py`): editing them
    # to make the check pass is tampering, not fixing.
    protects: tuple[str, ...] = ()
    timeout_s: float | None = None     # None: the gate's default per-check timeout
    # Text the output must contain for the check to pass, e.g. "OK" from "`python test_app.py`
    # prints OK": a script that exits 0 without printing it has not passed.
    expect_output: str | None = None
    # How the check is named to the model when the command is a generated script (keel.verify.probes)
    shown: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["protects"] = list(self.protects)
        return out


@dataclass(frozen=True)
class SkippedCheck:
    """A check the project asks for that cannot run here, e.g. its tool is not installed."""

    category: Category
    command: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckSet:
    checks: tuple[PlannedCheck, ...] = ()
    skipped: tuple[SkippedCheck, ...] = ()
    hints: tuple[str, ...] = field(default=())   # e.g. commands seen in CI workflow files, not run

    def ordered(self) -> tuple[PlannedCheck, ...]:
        """Checks in gate order (stable within a category)."""
        return tuple(sorted(self.checks, key=lambda c: CATEGORY_ORDER.index(c.category)))

    @property
    def empty(self) -> bool:
        return not self.checks

    def to_json(self) -> dict[str, Any]:
        return {"checks": [c.to_json() for c in self.ordered()],
                "skipped": [s.to_json() for s in self.skipped], "hints": list(self.hints)}
