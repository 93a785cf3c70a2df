"""Cutting a reply short: one that keeps repeating itself, or one that would eat the run's budget.

A 1.5B model once spent 406 s restating its plan in a loop up to the 4,096-token cap while the
whole task had 600 s. ``ReplyWatch`` reads the stream as it arrives (pure: text and clock in,
verdict out); ``GuardedEngine`` wraps any engine, stops reading when the watch says so (the HTTP
client closes the connection, the in-process engine stops sampling) and hands the loop the reply
so far with ``finish_reason == "length"``, the case the loop already treats as "too long, ask
again". Text tool calls in a cut reply are never recovered (see OpenAICompatEngine.complete).
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from keel.engine.types import AssistantTurn, DeltaCallback, StreamDelta, Usage

# A loop is a block of at least MIN_PERIOD characters repeated back to back MIN_COPIES times,
# spanning MIN_SPAN characters: long enough that code or a table with repeated lines (a
# test file of similar asserts) does not trip it, short enough to stop within a few hundred tokens.
MIN_PERIOD = 16
MAX_PERIOD = 600
MIN_COPIES = 4
MIN_SPAN = 320
CHECK_EVERY_CHARS = 64
# No single model call may take more than this share of what is left of the run's wall clock
# (with a floor), so the loop always keeps time to act on the answer.
CALL_SHARE_OF_REMAINING = 0.5
CALL_FLOOR_S = 60.0


def repeating_tail(text: str) -> int:
    """The period of a block that ends ``text`` repeated at least MIN_COPIES times, or 0."""
    n = len(text)
    for period in range(MIN_PERIOD, min(MAX_PERIOD, n // MIN_COPIES) + 1):
        copies = max(MIN_COPIES, -(-MIN_SPAN // period))
        if copies * period > n:
            continue
        unit = text[n - period:]
        if all(text[n - (k + 1) * period:n - k * period] == unit for k in range(1, copies)):
            return period
    return 0


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def repeated_lines(text: str, min_len: int = 24, min_count: int = 5) -> str | None:
    """A non-trivial line or sentence said ``min_count`` times with other text between (a plan
    restated in a loop rarely repeats byte for byte as a block, but its sentences do; a 1.5B model
    restated a five-sentence prompt on one line, with "Now," and "Then," between the copies)."""
    counts: dict[str, int] = {}
    for line in _SENTENCE_END.split(text):
        key = line.strip()
        if len(key) >= min_len:
            counts[key] = counts.get(key, 0) + 1
            if counts[key] >= min_count:
                return key
    return None


# A call written as the bare object (the form the 1.5B model prefers, and the grammar admits) starts a
# call as <tool_call> does. Measured (py-rename-constant): a change note that repeated two assignments
# was cut as prose after 128 tokens, four replies in a row, and the run ended on no progress; let run,
# the grammar ends the note at its maxLength and the call goes through.
_BARE_CALL = re.compile(r'\{\s*"name"\s*:')


@dataclass
class ReplyWatch:
    """Watches one reply. ``cut_reason`` is "repeating" or "deadline" once it should stop.

    Repetition is judged on prose only: once a tool call starts (a structured call, or the text
    form ``<tool_call>`` or ``{"name": …``) its arguments may legitimately repeat (a file of similar
    lines), and the per-reply token cap bounds them. Inside a fenced code block only a block repeated
    back to back counts, not a line said five times: code repeats its lines (measured: change_file's
    rewrites of a ledger were cut at its fifth ``if name not in self.accounts:``). The deadline
    applies to everything."""

    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic
    repeats: bool = True     # cut a reply that repeats itself (the reply_watch assist); False: the deadline only
    text: list[str] = field(default_factory=list)
    in_call: bool = False
    in_code: bool = False    # a fenced code block has opened
    _chars: int = 0
    _checked_at: int = 0
    cut_reason: str | None = None
    # Incremental state, so a long reply costs linear time (re-reading the whole reply every
    # CHECK_EVERY_CHARS was quadratic): the tail repeating_tail reads, the sentence not yet ended,
    # and how often each ended sentence was said.
    _tail: str = ""
    _open: list[str] = field(default_factory=list)
    _unsplit: int = 0
    _said: dict[str, int] = field(default_factory=dict)
    _repeated: str | None = None

    def reset(self) -> None:
        self.text.clear()
        self.in_call, self.in_code, self._chars, self._checked_at = False, False, 0, 0
        self._tail, self._unsplit, self._repeated = "", 0, None
        self._open.clear()
        self._said.clear()

    def feed(self, piece: str, kind: str = "content") -> str | None:
        if self.deadline is not None and self.clock() >= self.deadline:
            self.cut_reason = "deadline"
            return self.cut_reason
        if kind == "tool_call":
            self.in_call = True
        if self.in_call or kind not in ("content", "reasoning") or not self.repeats:
            return None
        self.text.append(piece)
        self._chars += len(piece)
        self._tail = (self._tail + piece)[-MAX_PERIOD * MIN_COPIES:]
        self._open.append(piece)
        recent = "".join(self.text[-12:])
        if "<tool_call>" in recent or _BARE_CALL.search(recent):
            self.in_call = True
            return None
        self.in_code = self.in_code or "```" in recent
        if self._chars - self._checked_at >= CHECK_EVERY_CHARS:
            self._checked_at = self._chars
            if not self.in_code:
                self._count_sentences()
            if repeating_tail(self._tail) or self._repeated:
                self.cut_reason = "repeating"
        return self.cut_reason

    def _count_sentences(self) -> None:
        """Count the sentences that ended since the last call (what repeated_lines counts)."""
        start = self._unsplit
        before = self._open[start - 1][-1:] if start > 0 else ""
        fresh = before + "".join(self._open[start:])
        self._unsplit = len(self._open)
        if "\n" not in fresh and not _SENTENCE_GAP.search(fresh):
            return                              # no sentence ended: leave the open one unread
        *ended, still_open = _SENTENCE_END.split("".join(self._open))
        self._open[:] = [still_open] if still_open else []
        self._unsplit = len(self._open)
        for line in ended:
            key = line.strip()
            if len(key) >= 24:
                self._said[key] = self._said.get(key, 0) + 1
                if self._said[key] >= 5 and self._repeated is None:
                    self._repeated = key


_SENTENCE_GAP = re.compile(r"[.!?]\s")


def call_deadline(run_deadline: float | None, now: float) -> float | None:
    """When one model call starting at ``now`` must end, given the run's own deadline."""
    if run_deadline is None:
        return None
    remaining = max(run_deadline - now, 0.0)
    return now + min(remaining, max(CALL_FLOOR_S, CALL_SHARE_OF_REMAINING * remaining))


class ReplyCut(Exception):
    """Raised from a delta callback to stop reading a reply; carries why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GuardedEngine:
    """Any engine, with every streamed reply watched by a ``ReplyWatch``.

    ``run_deadline`` returns the run's absolute deadline (time.monotonic) or None; it is read at
    each call because the runner sets it when the run starts."""

    def __init__(self, inner: Any, run_deadline: Callable[[], float | None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic, *, watch_repeats: bool = True) -> None:
        self.inner = inner
        self.watch_repeats = watch_repeats
        self.model: str = str(inner.model)
        self._run_deadline = run_deadline
        self._clock = clock
        # an engine that bounds its own waits by the deadline (the HTTP client: keel.engine.wait) is given
        # it; the in-process one is cut through its prompt deltas, which come while it reads the prompt
        self._takes_deadline = "deadline" in inspect.signature(inner.complete).parameters

    def __getattr__(self, name: str) -> Any:  # last_usage_raw, list_models, … of the inner engine
        return getattr(self.inner, name)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None, variant: int = 0,
                 avoid: tuple[str, ...] = (), max_tokens: int | None = None) -> AssistantTurn:
        started = self._clock()
        deadline = call_deadline(self._run_deadline(), started)
        watch = ReplyWatch(deadline=deadline, clock=self._clock, repeats=self.watch_repeats)
        content: list[str] = []

        def watched(delta: StreamDelta) -> None:
            if delta.kind == "retry":
                content.clear()
                watch.reset()
            elif delta.kind == "content":
                content.append(delta.text)
            if on_delta:
                on_delta(delta)
            if delta.kind != "retry" and watch.feed(delta.text, delta.kind):
                raise ReplyCut(watch.cut_reason or "cut")

        try:
            # An engine that stops reading on a ReplyCut itself (the in-process one) sets the turn's
            # cut_reason; for one that lets it propagate (HTTP: the connection closes), it is set here.
            extra: dict[str, Any] = {"deadline": deadline} if self._takes_deadline and deadline is not None else {}
            if max_tokens is not None:   # change_file's editor, with a cap of its own (a candidate: a variant)
                sampled = {"variant": variant} if variant > 0 else {}
                return self.inner.complete(messages, tools, watched, max_tokens=max_tokens, **sampled, **extra)
            if avoid:  # only then: an inner engine without the keywords still serves normal runs
                return self.inner.complete(messages, tools, watched, variant=variant, avoid=avoid, **extra)
            if variant > 0:
                return self.inner.complete(messages, tools, watched, variant=variant, **extra)
            return self.inner.complete(messages, tools, watched, **extra)
        except ReplyCut as cut:  # the inner engine stopped reading; the reply so far is all there is
            text = "".join(content)
            request_chars = len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools, ensure_ascii=False))
            return AssistantTurn(content=text, finish_reason="length", latency_s=self._clock() - started,
                                 usage=Usage(prompt_tokens=request_chars // 4, completion_tokens=len(text) // 4,
                                             estimated=True), cut_reason=cut.reason)
