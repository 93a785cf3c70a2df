"""Claim repair (the ``claim_repair`` assist, off by default until measured): when a claim is refused
with the checks failing and nothing has changed since the last refused claim, keel asks for the change
itself, through the model's own change_file (the run's policy, sandbox and undo hold for it), and the
result goes into the pushback, instead of the same refusal sent again.

Why: on the 1.5B, three runs of one batch (be12010: js-off-by-one at 140 s, js-emitter-once at 221 s,
py-cli-json-output at 179 s) ended on the verification limit with most of their time left: after one
change that left 1–2 tests failing, the model read a file and claimed done again, three times (once
with the task's own text as its summary). The refusal's words did not move it; change_file's requests
without the model's note, and its candidates judged by the checks, are what found the passing rewrites
elsewhere in the suite.

``repair_target`` is pure; ``repair`` is the shell the runner calls with its registry and context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from keel.engine.types import ToolCall
from keel.tools.base import ToolContext, ToolResult, assist_acted
from keel.tools.registry import ToolRegistry
from keel.verify.selfcheck import is_code_file

MAX_NOTE_CHARS = 500   # the task as change_file's note (its own limit is higher)


def repair_target(changed: Sequence[str]) -> str | None:
    """The file to ask the change in: the last code file the run changed that is not a test; None when
    the run changed none (keel does not guess where a change that was never started belongs)."""
    return next((p for p in reversed(changed) if is_code_file(p)), None)


def repair(registry: ToolRegistry, ctx: ToolContext, changed: Sequence[str], task: str,
           n: int) -> tuple[ToolResult, str] | None:
    """change_file on ``repair_target`` with the task as its note; (its result, the pushback's words), or
    None when there is no file to aim at or no change_file to call."""
    target = repair_target(changed)
    if target is None or "change_file" not in registry.names:
        return None
    note = "Make the failing checks pass, as the task asks: " + " ".join(task.split())
    call = ToolCall(f"keel-repair-{n}", "change_file",
                    json.dumps({"path": target, "change": note[:MAX_NOTE_CHARS]}))
    assist_acted(ctx, "claim_repair", f"{target}: the claim came again with nothing changed")
    result = next(iter(registry.run_calls([call], ctx)))
    words = (f"Your claim came again with nothing changed since the last one, so keel asked for the change "
             f"itself (change_file on {target}, from the task and the failing checks):\n{result.output}")
    return result, words
