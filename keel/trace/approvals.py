"""The ``approval`` event: every request the policy did not simply allow (asked, auto-approved,
refused, denied), with what was asked for and how it was settled.

keel.policy.approval decides and knows nothing of events; this proxy sits in front of the session's
approver, forwards everything to it, and reports each non-trivial outcome on the event bus.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

CANCELLED = "cancelled: the run was interrupted while the person was asked"
_ACTIONS = {"authorize_shell": "shell", "authorize_edit": "edit", "authorize_read": "read"}


class RecordingApprover:
    def __init__(self, inner: Any, emit: Callable[..., Any], step: Callable[[], int]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_emit", emit)
        object.__setattr__(self, "_step", step)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in _ACTIONS or not callable(attr):
            return attr

        def authorize(target: str, **details: Any) -> Any:   # details: an edit's preview
            try:
                outcome = attr(target, **details)
            except KeyboardInterrupt:   # interrupted while asked: a cancel, neither granted nor refused
                self._emit("approval", step=self._step(), action=_ACTIONS[name], target=str(target)[:2000],
                           decision="ask", allowed=False, how=CANCELLED, cancelled=True)
                raise
            if getattr(outcome, "decision", "allow") != "allow" or not getattr(outcome, "allowed", True):
                self._emit("approval", step=self._step(), action=_ACTIONS[name], target=str(target)[:2000],
                           decision=getattr(outcome, "decision", None), allowed=bool(outcome.allowed),
                           how=str(getattr(outcome, "message", ""))[:500])
            return outcome
        return authorize

    def __setattr__(self, name: str, value: Any) -> None:  # settings (mode, prompt) belong to the approver
        setattr(self._inner, name, value)

    def __copy__(self) -> RecordingApprover:  # the gate copies the approver to run checks in its own mode
        return RecordingApprover(copy.copy(self._inner), self._emit, self._step)
