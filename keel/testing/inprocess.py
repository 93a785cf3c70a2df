"""The scripted engine without HTTP: the same script replayed straight into the loop.

For tests and benchmarks that exercise the loop rather than the wire; per-step cost is a few
JSON serialisations, so a 500-step run measures keel, not the stand-in model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, Literal

from keel.engine.types import AssistantTurn, DeltaCallback, EngineError, StreamDelta, ToolCall, Usage
from keel.testing.script import (
    PromptMeter,
    ScriptedFailure,
    ScriptPlayer,
    ScriptStep,
    cached_tokens_for,
    load_script,
    serialize,
    step_usage,
    stream_deltas,
)


class ScriptedModel:
    """An ``Engine`` that answers each ``complete`` call with the next scripted step.

    With ``record=True`` every call is kept in ``requests`` as ``{"messages", "tools"}`` copies
    (made by a JSON round trip, so later edits to the caller's history do not leak in), plus
    ``"variant"`` (and ``"avoid"``) when the loop asked for a variant request (a script's replies
    are fixed: it changes nothing else here).
    """

    def __init__(self, script: str | os.PathLike[str] | Sequence[Any], model: str = "scripted",
                 record: bool = False) -> None:
        self.model = model
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self._player = ScriptPlayer(load_script(script))
        self._meter = PromptMeter()
        self._text_calls = 0  # recovered calls so far: their ids must stay unique across turns

    @property
    def remaining(self) -> int:
        return self._player.remaining

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None, variant: int = 0,
                 avoid: tuple[str, ...] = (), max_tokens: int | None = None) -> AssistantTurn:
        started = time.monotonic()
        tools_text = serialize(tools)
        if self.record:
            self.requests.append({"messages": json.loads(serialize(messages)), "tools": json.loads(tools_text),
                                  **({"variant": variant} if variant else {}),
                                  **({"avoid": list(avoid)} if avoid else {}),
                                  **({"max_tokens": max_tokens} if max_tokens else {})})
        step = self._player.take()
        if step is None:
            raise EngineError("retries", f"scripted model exhausted: all {self._player.total} scripted "
                                         "responses were used and another call was made")
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.error is not None:
            raise _engine_error(step.error)
        # Measured before a cut, as on the server: the prompt reached the engine's cache.
        prompt_chars, shared_chars = self._meter.measure(messages)
        if step.cut_after_chunks is not None and step.cut_after_chunks < _chunk_count(step):
            raise EngineError("retries", f"scripted stream cut after {step.cut_after_chunks} chunks "
                                         f"(script step {step.index + 1})")
        if on_delta is not None:
            _replay_deltas(step, on_delta)

        usage = step_usage(step, prompt_chars + len(tools_text), cached_tokens_for(shared_chars))
        turn = AssistantTurn(
            content=step.content,
            tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in step.tool_calls],
            reasoning=step.reasoning,
            finish_reason=step.finish_reason,
            usage=Usage(prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"],
                        cached_tokens=usage["cached_tokens"],
                        estimated=not (step.report_usage and step.usage_overrides)),
            tool_call_format="structured" if step.tool_calls else "",
        )
        if not turn.tool_calls and turn.content and turn.finish_reason != "length":
            # as the real client does: any reply without structured calls may carry text-form ones
            self._text_calls += _recover_calls(turn, tools, self._text_calls + 1)
        turn.latency_s = time.monotonic() - started
        return turn


def _engine_error(failure: ScriptedFailure) -> EngineError:
    kind: Literal["config", "context", "retries"]
    if failure.status in (401, 403, 404):
        kind = "config"
    elif failure.status == 400 and failure.code == "context_length_exceeded":
        kind = "context"
    else:
        kind = "retries"
    return EngineError(kind, f"HTTP {failure.status}: {failure.message}", status=failure.status)


def _chunk_count(step: ScriptStep) -> int:
    # Deltas, the finish chunk, and the usage chunk a real client always asks for.
    return sum(1 for _ in stream_deltas(step)) + 1 + (1 if step.report_usage else 0)


def _replay_deltas(step: ScriptStep, on_delta: DeltaCallback) -> None:
    for delta in stream_deltas(step):
        if delta.get("reasoning_content"):
            on_delta(StreamDelta("reasoning", delta["reasoning_content"]))
        elif delta.get("content"):
            on_delta(StreamDelta("content", delta["content"]))
        elif "tool_calls" in delta and "name" in delta["tool_calls"][0]["function"]:
            on_delta(StreamDelta("tool_call", delta["tool_calls"][0]["function"]["name"]))


def _recover_calls(turn: AssistantTurn, tools: list[dict[str, Any]], id_start: int) -> int:
    # Imported here: recovery belongs to the engine client and is only needed for text-form steps.
    from keel.engine.reasoning import recover_turn

    return recover_turn(turn, tools, id_start=id_start)
