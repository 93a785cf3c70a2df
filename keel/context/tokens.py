"""Token accounting: count a request locally, correct the count with what the engine reports.

keel cannot load every model's tokenizer, so a request is counted as characters of its compact
JSON form divided by four, then multiplied by the ratio the engine's own ``prompt_tokens`` showed
on the last request it reported (chat templates, tokenizers and languages all move that ratio).
The same serialisation feeds the prefix-reuse measure (keel.context.prefix), so each message is
serialised once per change, not once per request: a long append-only history stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
# A ratio outside this range means the report is not about this request (a proxy, a bug).
MIN_RATIO, MAX_RATIO = 0.25, 4.0


def serialize(value: Any) -> str:
    """The text whose size stands for tokens (and whose bytes stand for the prompt's prefix)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def chars_to_tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class MessageTexts:
    """Serialises messages, remembering each one's text while it stays the same object with the
    same content (compaction and pushback build new objects, so they are serialised afresh)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, Any, Any, str]] = {}

    def texts(self, messages: Sequence[dict[str, Any]]) -> list[str]:
        memo: dict[int, tuple[Any, Any, Any, str]] = {}
        out: list[str] = []
        for m in messages:
            hit = self._memo.get(id(m))
            if hit is not None and hit[0] is m and hit[1] is m.get("content") and hit[2] is m.get("tool_calls"):
                text = hit[3]
            else:
                text = serialize(m)
            memo[id(m)] = (m, m.get("content"), m.get("tool_calls"), text)  # holding m keeps its id unique
            out.append(text)
        self._memo = memo
        return out


@dataclass
class TokenCounter:
    """Local estimate × the engine's last reported ratio (1.0 until the engine reports usage)."""

    ratio: float = 1.0
    calibrated: bool = False

    def count_chars(self, chars: int) -> int:
        return int(chars_to_tokens(chars) * self.ratio) + 1

    def count(self, texts: Sequence[str], tools_text: str = "") -> int:
        # + a separator per message and the brackets: the messages as one JSON list
        return self.count_chars(sum(map(len, texts)) + len(texts) + 1 + len(tools_text))

    def calibrate(self, local_chars: int, reported_prompt_tokens: int) -> None:
        """Learn from the engine's ``prompt_tokens`` for a request of ``local_chars`` characters."""
        local = chars_to_tokens(local_chars)
        if local <= 0 or reported_prompt_tokens <= 0:
            return
        ratio = reported_prompt_tokens / local
        if MIN_RATIO <= ratio <= MAX_RATIO:
            self.ratio, self.calibrated = ratio, True
