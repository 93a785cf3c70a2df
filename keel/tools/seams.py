"""What a tool may use of the session's file facts and of the approval gate (``ToolContext.session``
and ``ToolContext.approval``), declared as Protocols so the tools depend on a shape, not on the
classes that fill it (keel.tools.session.FileSession, keel.policy.approval.Approver and the proxies
in front of it: keel.trace.approvals, the verify gate's checks). The sandbox needs no seam: it is
keel.policy.sandbox.SandboxPolicy, a plain value from a lower layer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from keel.policy.approval import ApprovalOutcome


class FileFacts(Protocol):
    """The session's per-file facts (``ctx.session``): what the model has seen, for stale-write
    checks, and the bytes before keel's first change, for undo."""

    def record_read(self, path: Path, data: bytes) -> None: ...
    def record_write(self, path: Path, data: bytes) -> None: ...
    def was_read(self, path: Path) -> bool: ...
    def changed_since_seen(self, path: Path) -> bool: ...
    def snapshot(self, path: Path) -> None: ...


class ShellGate(Protocol):
    """What every approval gate (``ctx.approval``) answers: may this command run. The gate the
    verifier runs its checks under is no more than this."""

    def authorize_shell(self, command: str) -> ApprovalOutcome: ...


class Gate(ShellGate, Protocol):
    """The session's full approval gate (keel.policy.approval.Approver). Tools probe these members
    with ``getattr`` because a narrower gate (a ShellGate) may stand in its place: without
    ``authorize_edit``/``authorize_read`` paths are not asked about, without ``mode`` it counts as
    unattended, without ``prompt`` nobody can be asked."""

    mode: str
    prompt: Callable[[str], str] | None
    snapshot: bool      # a workspace snapshot holds deletions, so some may run without asking

    def authorize_edit(self, path: str, preview: Callable[[], str] | None = None) -> ApprovalOutcome: ...
    def authorize_read(self, path: str) -> ApprovalOutcome: ...
    def reads_without_asking(self, real: Path) -> bool: ...

