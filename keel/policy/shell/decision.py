"""The verdict: findings per part, the OS tier applied, the most severe part decides.

``apply_tier`` is where the tier model lives (docs/policy.md, "Tiers"): a confining tier
(bubblewrap, Landlock) turns workspace-write asks into allows; without one, running arbitrary
code asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from keel.policy.shell.commands import Finding, ask

Decision = Literal["allow", "ask", "deny"]
SEVERITY = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str
    part: str                      # the sub-command that decided


@dataclass
class PartReport:
    """One command that would run, and what the policy found about it."""

    source: str                    # as written, for messages
    words: list[str]               # the command after unwrapping wrappers (what user rules match)
    outer: list[str]               # the command with its wrappers
    findings: list[Finding] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)   # workspace files named in its arguments

    @property
    def worst(self) -> Finding:
        if not self.findings:
            return ask("nothing to judge", lift=None)
        return max(self.findings, key=lambda f: SEVERITY[f.decision])

    @property
    def network(self) -> bool:
        return any(f.network for f in self.findings)


def worst_decision(parts: list[PartReport]) -> str:
    return max((p.worst.decision for p in parts), key=lambda d: SEVERITY[d], default="allow")


def apply_tier(finding: Finding, confined: bool) -> Finding:
    """What the OS tier changes. Confining (bubblewrap, Landlock): workspace writes run unasked.
    Not confining: code that could do anything the user can (``python -c``) asks."""
    if finding.tier == "write" and finding.decision == "ask" and confined:
        return replace(finding, decision="allow", reason=f"{finding.reason} (inside the workspace, which the "
                                                                 "OS sandbox confines writes to)")
    if finding.tier == "code" and finding.decision == "allow" and not confined:
        return replace(finding, decision="ask", reason=f"{finding.reason}; no OS sandbox confines it here")
    return finding


def verdict_of(parts: list[PartReport]) -> Verdict:
    worst_part = max(parts, key=lambda p: SEVERITY[p.worst.decision])
    finding = worst_part.worst
    decision: Decision = finding.decision  # type: ignore[assignment]
    if decision == "allow":
        reasons = "; ".join(dict.fromkeys(p.worst.reason for p in parts))
        return Verdict("allow", reasons, parts[0].source if len(parts) == 1 else " ; ".join(p.source for p in parts))
    return Verdict(decision, finding.reason, worst_part.source)
