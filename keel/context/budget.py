"""The ``[context]`` settings and the budget: how much of the window each part of a request may use.

Five components share the window: the stable prefix (system prompt and tool schemas), project
memory files, file reads, command output and the rest of the history (the model's own messages,
the compaction record, other tools). The shares decide what folds first when keel compacts: a
component over its share gives way before one under it, and the oldest copy before a newer one.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

COMPONENTS = ("system_and_tools", "memory", "file_reads", "command_output", "history")
READ_TOOLS = frozenset({"read_file"})
COMMAND_TOOLS = frozenset({"run_shell"})


class BudgetShares(BaseModel):
    """Shares of the window per component; they may add up to less than 1 (the rest is slack)."""

    model_config = ConfigDict(extra="forbid")

    system_and_tools: float = Field(default=0.15, ge=0, le=1)
    memory: float = Field(default=0.05, ge=0, le=1)
    file_reads: float = Field(default=0.30, ge=0, le=1)
    command_output: float = Field(default=0.20, ge=0, le=1)
    history: float = Field(default=0.30, ge=0, le=1)

    @model_validator(mode="after")
    def _at_most_whole(self) -> BudgetShares:
        total = sum(getattr(self, c) for c in COMPONENTS)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the shares add up to {total:g}; they may add up to at most 1")
        return self


class ContextSettings(BaseModel):
    """``[context]``: when keel compacts the history and what it keeps."""

    model_config = ConfigDict(extra="forbid")

    compact_at: float = Field(default=0.8, gt=0.1, le=0.95)   # share of the window that triggers compaction
    compact_to: float = Field(default=0.5, gt=0.05, lt=0.9)   # share the history is brought under
    keep_last: int = Field(default=8, ge=2)                   # recent messages kept verbatim
    summarizer: Literal["model", "deterministic"] = "model"   # deterministic: no summarising model call
    max_failed_compactions: int = Field(default=3, ge=1)      # circuit breaker: then stop with limit:context
    budget: BudgetShares = Field(default_factory=BudgetShares)

    @model_validator(mode="after")
    def _target_below_trigger(self) -> ContextSettings:
        if self.compact_to >= self.compact_at:
            raise ValueError(f"compact_to ({self.compact_to:g}) must be below compact_at ({self.compact_at:g})")
        return self


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
