"""Folding a Chat Completions response (streamed chunks or one body) into an ``AssistantTurn``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from keel.engine.types import AssistantTurn, DeltaCallback, StreamDelta, ToolCall, Usage


class TransientFailure(Exception):
    """A failure worth retrying (busy server, cut stream); carries what the next wait should honour.
    ``complete`` never lets it escape: after the last attempt it becomes ``EngineError("retries")``."""

    def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def assemble_stream(stream: Iterable[Any], on_delta: DeltaCallback | None = None,
                    ) -> tuple[AssistantTurn, dict[str, Any] | None]:
    """Fold Chat Completions chunks (JSON dicts, or the SDK's chunk objects) into one turn plus
    the raw usage dict (None if not sent).

    Raises ``TransientFailure`` when the stream ends without a finish_reason: whatever arrived
    may be a cut-off tool call and must not be acted on."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, _PartialCall] = {}
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    for chunk in stream:
        if not isinstance(chunk, dict):
            chunk = chunk.model_dump()
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if delta:
                _take_delta(delta, content, reasoning, calls, on_delta)
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    if finish_reason is None:
        raise TransientFailure("the response stream ended before the server said it was finished")
    turn = AssistantTurn(content="".join(content), reasoning="".join(reasoning), finish_reason=finish_reason)
    for _index, partial in sorted(calls.items()):
        if not partial.name and not partial.arguments:
            continue
        arguments = "".join(partial.arguments)
        turn.tool_calls.append(ToolCall(id=partial.id or f"call_{uuid.uuid4().hex[:16]}", name=partial.name,
                                        arguments=arguments if arguments.strip() else "{}"))
    turn.usage = _usage_from_dict(usage)
    return turn, (_drop_none(usage) if usage is not None else None)


def assemble_completion(response: Any, on_delta: DeltaCallback | None = None,
                        ) -> tuple[AssistantTurn, dict[str, Any] | None]:
    """The same turn from a non-streaming response (for servers that cannot stream tool calls,
    such as llama-cpp-python's chatml-function-calling format)."""
    choice = response.choices[0] if response.choices else None
    if choice is None or choice.message is None:
        raise TransientFailure("the server answered without a message")
    message = choice.message
    extra = getattr(message, "model_extra", None) or {}
    thought = extra.get("reasoning_content") or extra.get("reasoning")
    turn = AssistantTurn(content=message.content or "", reasoning=thought if isinstance(thought, str) else "",
                         finish_reason=choice.finish_reason or "stop")
    if on_delta and turn.reasoning:
        on_delta(StreamDelta("reasoning", turn.reasoning))
    if on_delta and turn.content:
        on_delta(StreamDelta("content", turn.content))
    for tc in message.tool_calls or ():
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        turn.tool_calls.append(ToolCall(id=tc.id or f"call_{uuid.uuid4().hex[:16]}", name=fn.name or "",
                                        arguments=fn.arguments if (fn.arguments or "").strip() else "{}"))
    usage = response.usage
    turn.usage = _read_usage(usage)
    return turn, (usage.model_dump(exclude_none=True) if usage is not None else None)


def _take_delta(delta: dict[str, Any], content: list[str], reasoning: list[str],
                calls: dict[int, _PartialCall], on_delta: DeltaCallback | None) -> None:
    # vLLM/SGLang/llama.cpp say reasoning_content, newer vLLM and Ollama say reasoning.
    thought = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(thought, str) and thought:
        reasoning.append(thought)
        if on_delta:
            on_delta(StreamDelta("reasoning", thought))
    text = delta.get("content")
    if text:
        content.append(text)
        if on_delta:
            on_delta(StreamDelta("content", text))
    for tc in delta.get("tool_calls") or ():
        index = tc.get("index")
        call_id = tc.get("id")
        if index is None:  # some servers omit it: a new id starts a new call, otherwise continue
            last = max(calls) if calls else -1
            index = last + 1 if last < 0 or (call_id and calls[last].id and call_id != calls[last].id) else last
        partial = calls.get(index)
        if partial is None:
            partial = calls[index] = _PartialCall()
        if call_id and not partial.id:
            partial.id = call_id
        fn = tc.get("function")
        if not fn:
            continue
        name, arguments = fn.get("name"), fn.get("arguments")
        if name and name != partial.name:
            # Whole name once (OpenAI, vLLM) or, rarely, in pieces.
            partial.name = name if not partial.name else partial.name + name
            if on_delta:
                on_delta(StreamDelta("tool_call", name))
        if arguments:
            partial.arguments.append(arguments)
            if on_delta:
                on_delta(StreamDelta("tool_call", arguments))


def _usage_from_dict(usage: dict[str, Any] | None) -> Usage:
    if usage is None:
        return Usage(estimated=True)
    details = usage.get("prompt_tokens_details") or {}
    return Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                 completion_tokens=int(usage.get("completion_tokens") or 0),
                 cached_tokens=int(details.get("cached_tokens") or 0))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def _read_usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(estimated=True)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(prompt_tokens=int(usage.prompt_tokens or 0), completion_tokens=int(usage.completion_tokens or 0),
                 cached_tokens=int(cached or 0))


