"""The budget: how much of the window each part of a request may use (settings: keel.config).

Five components share the window: the stable prefix (system prompt and tool schemas), project
memory files, file reads, command output and the rest of the history (the model's own messages,
the compaction record, other tools). The shares decide what folds first when keel compacts: a
component over its share gives way before one under it, and the oldest copy before a newer one.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from keel.config import BUDGET_COMPONENTS, BudgetShares

COMPONENTS = BUDGET_COMPONENTS
READ_TOOLS = frozenset({"read_file"})
COMMAND_TOOLS = frozenset({"run_shell"})


def tool_names_by_call(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """call id → tool name, from the assistant messages' tool_calls."""
    names: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            if isinstance(c.get("id"), str):
                names[c["id"]] = str(fn.get("name") or "")
    return names


def component_of(message: dict[str, Any], index: int, prefix_len: int, names: dict[str, str]) -> str:
    if index < prefix_len:
        return "system_and_tools"
    if message.get("role") == "tool":
        name = names.get(str(message.get("tool_call_id")), "")
        if name in READ_TOOLS:
            return "file_reads"
        if name in COMMAND_TOOLS:
            return "command_output"
    return "history"


def account(messages: Sequence[dict[str, Any]], sizes: Sequence[int], prefix_len: int,
            tools_tokens: int) -> dict[str, int]:
    """Tokens per component for one request (``sizes``: tokens per message)."""
    names = tool_names_by_call(messages)
    usage = dict.fromkeys(COMPONENTS, 0)
    usage["system_and_tools"] = tools_tokens
    for i, (m, size) in enumerate(zip(messages, sizes, strict=True)):
        usage[component_of(m, i, prefix_len, names)] += size
    return usage


def limits(shares: BudgetShares, window: int) -> dict[str, int]:
    return {c: int(getattr(shares, c) * window) for c in COMPONENTS}


def over_share(usage: dict[str, int], shares: BudgetShares, window: int) -> list[str]:
    """Components using more than their share, the most over first."""
    caps = limits(shares, window)
    over = [(usage[c] - caps[c], c) for c in COMPONENTS if usage[c] > caps[c]]
    return [c for _, c in sorted(over, reverse=True)]
