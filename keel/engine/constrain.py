"""Constrained tool calls on an HTTP server: when keel asks for ``tool_choice: "required"``.

The in-process engine constrains a reply with its own grammar (keel/engine/grammar.py). A server
is asked through the standard ``tool_choice`` field instead, because that is the one way the
servers keel targets constrain a reply to calls of the offered tools:

- vLLM (>= 0.8.3): "When tool_choice='required' is set, the model is guaranteed to generate one
  or more tool calls based on the specified tool list … The output format strictly follows the
  schema defined in the tools parameter" — decoded under structured outputs (docs.vllm.ai,
  features/tool_calling, "Required Function Calling" and "Constrained Decoding Behavior").
- llama.cpp's server (``--jinja``): its tool-call grammar is lazy (armed only once a call starts)
  unless the tool choice is required (common/chat.cpp: ``grammar_lazy = tool_choice !=
  COMMON_CHAT_TOOL_CHOICE_REQUIRED``), so "required" grammar-constrains the reply from its first
  token. A custom ``grammar`` next to ``tools`` is refused with HTTP 400 ("Cannot use custom
  grammar constraints with tools.", tools/server/utils.hpp), so keel never sends one.

The rule is the local grammar's: a call is required only when a ``finish`` tool is offered, so
the model always has a call that ends the task. ``auto`` stays off for servers (nothing measured
there yet); an explicit ``[engine] tool_choice`` other than "auto" is the user's and wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FINISH_TOOL = "finish"
REQUIRED = "required"
# What a server that does not know "required" answers (vLLM before 0.8.3 validated the field).
REFUSAL_STATUSES = frozenset({400, 422})


def offers_finish(tools: list[dict[str, Any]]) -> bool:
    """The rule both engines share: with a finish tool offered, every reply may be a required call."""
    return any((t.get("function") or {}).get("name") == FINISH_TOOL for t in tools)


def http_tool_choice(mode: str, configured: str, tools: list[dict[str, Any]], refused: bool = False) -> str:
    """The ``tool_choice`` to send. ``mode`` is ``[engine] constrain_tool_calls``, ``configured``
    is ``[engine] tool_choice``, ``refused``: this server already answered 400 to "required"."""
    if configured != "auto":
        return configured
    if mode == "on" and not refused and offers_finish(tools):
        return REQUIRED
    return configured


def is_refusal(sent: Any, configured: str, kind: str, status: int | None) -> bool:
    """A server's refusal of a "required" keel added itself (one the user configured is the
    user's to fix, so its error stands; a context overflow is a 400 too, but another kind)."""
    return sent == REQUIRED and configured == "auto" and kind == "protocol" and status in REFUSAL_STATUSES


def refusal_notice(error: str) -> str:
    """What the person watching is told when a server refuses "required" (the run goes on)."""
    return (f'{error} — tool_choice "required" is not supported by this server; retrying without it, and '
            "constrained tool calls stay off for the rest of this session (they need vLLM >= 0.8.3 or "
            "llama.cpp's server with --jinja)")


def narrowed(tools: list[dict[str, Any]], avoid: Iterable[str]) -> list[dict[str, Any]]:
    """The tools a variant request's reply may call: ``tools`` without those named in ``avoid``
    (all of them when that would leave none; keel.loop.variety)."""
    names = set(avoid)
    kept = [t for t in tools if t.get("function", {}).get("name") not in names]
    return kept or tools
