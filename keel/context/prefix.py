"""Prefix reuse: how much of the previous request a request repeats, byte for byte, from its start.

An engine's prefix cache (vLLM, SGLang, llama.cpp, hosted APIs) reuses the work of the longest
prefix a new prompt shares with one it has seen; everything after the first changed byte is
computed again. keel keeps that prefix stable (system prompt, tools, project overview, then an
append-only history), and this module measures it per request and names the cause when it breaks.

Reuse is the share of the previous request's characters that the new request starts with: what
a prefix cache can serve instead of computing again. 1.0 means nothing was recomputed (the history
only grew); an append-only session scores 1.0 on every step but its first. A request is measured as
its tool list followed by its messages, each in keel's compact JSON form
(keel.context.tokens.serialize). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TOOLS_INDEX = -1  # ``diverged_at`` when the tool list itself changed
# Causes that cost the cache something keel could have kept; "ephemeral" (last request's pushback,
# attached to that request only, replaced by the model's reply) is by design and not reported.
BREAK_CAUSES = ("compaction", "tool_list_change", "edited_history")


@dataclass(frozen=True)
class RequestShape:
    tools_text: str
    texts: tuple[str, ...]      # one serialised message each, in order
    ephemeral: int = 0          # trailing messages attached to this request only (pushback)

    @property
    def total_chars(self) -> int:
        return len(self.tools_text) + sum(map(len, self.texts))


@dataclass(frozen=True)
class PrefixReport:
    reuse: float | None          # shared characters / the previous request's characters; None: no previous
    shared_chars: int
    base_chars: int              # the previous request's characters (0: none)
    total_chars: int             # this request's characters
    diverged_at: int | None      # first message that differs from the previous request; None: pure extension
    cause: str | None            # compaction | tool_list_change | edited_history | ephemeral | None

    @property
    def cache_break(self) -> bool:
        return self.cause in BREAK_CAUSES


def common_prefix_len(a: str, b: str) -> int:
    n, step, i = min(len(a), len(b)), 4096, 0
    while i + step <= n and a[i:i + step] == b[i:i + step]:  # whole slices at memcmp speed first
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def compare(prev: RequestShape | None, cur: RequestShape, *, compacted: bool = False) -> PrefixReport:
    """Measure ``cur`` against ``prev``. ``compacted``: keel rewrote the history in between."""
    total = cur.total_chars
    if prev is None:
        return PrefixReport(None, 0, 0, total, None, None)
    base = prev.total_chars
    if prev.tools_text != cur.tools_text:
        shared = common_prefix_len(prev.tools_text, cur.tools_text)
        return PrefixReport(_ratio(shared, base), shared, base, total, TOOLS_INDEX, "tool_list_change")
    shared = len(cur.tools_text)
    i, common = 0, min(len(prev.texts), len(cur.texts))
    while i < common and prev.texts[i] == cur.texts[i]:
        shared += len(cur.texts[i])
        i += 1
    if i == len(prev.texts):
        return PrefixReport(_ratio(shared, base), shared, base, total, None, None)
    if i < len(cur.texts):
        shared += common_prefix_len(prev.texts[i], cur.texts[i])
    if i >= len(prev.texts) - prev.ephemeral:
        cause = "ephemeral"
    else:
        cause = "compaction" if compacted else "edited_history"
    return PrefixReport(_ratio(shared, base), shared, base, total, i, cause)


def overall_reuse(reports: Sequence[PrefixReport]) -> float:
    """Over a session: characters repeated from the previous request / the previous requests' characters."""
    return _ratio(sum(r.shared_chars for r in reports), sum(r.base_chars for r in reports))


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0
