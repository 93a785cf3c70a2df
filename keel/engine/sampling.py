"""The temperature of the next reply: the configured one, raised once the model repeats itself.

Why: at temperature 0 a small model that made a call keel refused (an edit whose old_text equals
its new_text, a call it already made) is likely to make the very same call again, because
greedy decoding of a nearly identical prompt gives a nearly identical reply. Measured on the 1.5B
model: the same refused edit_file two and three times in a row, until the repetition limit
stopped the run. Sampling the reply after a repeat at a higher temperature gives it a chance to
say something else; every other reply keeps the configured temperature (and its determinism).

Pure: the decision reads the conversation only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def _canonical(arguments: Any) -> str:
    """Arguments as sorted JSON, so key order and spacing do not hide a repeat."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        return json.dumps(value, sort_keys=True)
    except (ValueError, TypeError):
        return str(arguments)


def _turn_key(message: dict[str, Any]) -> tuple[str, ...]:
    calls = message.get("tool_calls") or []
    if not calls:
        return ("text", " ".join(str(message.get("content") or "").split()))
    key = []
    for call in calls:
        fn = call.get("function") or {}
        key.append(f"{fn.get('name', '')}:{_canonical(fn.get('arguments') or '')}")
    return tuple(key)


def repeats_itself(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the last assistant turn is the same as an earlier one (same calls, or same text)."""
    turns = [_turn_key(m) for m in messages if m.get("role") == "assistant"]
    return len(turns) >= 2 and turns[-1] in turns[:-1] and turns[-1] != ("text", "")


def temperature_for(messages: Sequence[dict[str, Any]], base: float, unstick: float) -> float:
    """``base``, or ``unstick`` (if higher) right after the model repeated a turn; unstick 0 = never."""
    if unstick > base and repeats_itself(messages):
        return unstick
    return base
