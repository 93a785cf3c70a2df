"""Value types shared by the engine client, the scripted engines and the loop.

Kept free of I/O so that every layer can import them without side effects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass
class ToolCall:
    """One tool call as the engine produced it. ``arguments`` stays the raw JSON text:
    malformed text must reach the validator so the model can be told exactly what was wrong."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.estimated = self.estimated or other.estimated

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        """The form every event and result carries (docs/events.md: ``usage``)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens, "estimated": self.estimated}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        """The inverse of ``to_json``; missing fields are 0 (a session saved by an older keel)."""
        return cls(int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)),
                   int(data.get("cached_tokens", 0)), bool(data.get("estimated", False)))


@dataclass
class AssistantTurn:
    """What one model call returned, assembled from the stream."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    retries: int = 0
    # How the calls arrived: "structured", "hermes", "qwen3_coder", "json" (recovered from text) or "".
    tool_call_format: str = ""
    # Why keel cut the reply short ("repeating", "deadline"; keel.engine.runaway), None if it was not.
    cut_reason: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message written back into history. Reasoning is never resent."""
        # Always a string: some servers (llama-cpp-python) reject a null content with an HTTP 500.
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


@dataclass
class StreamDelta:
    """A piece of a streamed response, for front ends that show text as it arrives."""

    # retry: discard what the attempt showed; prompt: the engine is still reading the prompt ("read/total"
    # tokens); waiting: no byte of the reply yet, ``text`` the whole seconds waited (keel.engine.client)
    kind: Literal["content", "reasoning", "tool_call", "retry", "prompt", "waiting"]
    text: str


DeltaCallback = Callable[[StreamDelta], None]


class EngineError(Exception):
    """A failure the loop must act on.

    kind:
      - "config": wrong URL, key, model… — stop at once, exit code 2.
      - "context": the request did not fit the model's window — stop with limit:context.
      - "retries": recoverable failures persisted past the retry cap — stop with limit:retries.
      - "protocol": the server answered something unusable (e.g. a 400 for a malformed request).
    """

    def __init__(self, kind: Literal["config", "context", "retries", "protocol"], message: str,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


# A variant request (``variant`` > 0: the loop saw the model send a refused reply again) is
# sampled at least this hot. At temperature 0 decoding is greedy and a new seed changes nothing,
# so the same prompt gives the same refused reply again. 0.5 is hot enough to leave that reply and
# cool enough to keep the sample near the model's best guess, so its tool calls stay well-formed
# (a middle value, not yet tuned on a model).
VARIANT_TEMPERATURE = 0.5


def variant_sampling(temperature: float, seed: int | None, variant: int) -> tuple[float, int | None]:
    """The (temperature, seed) one request is sampled with: the configured pair for variant 0; for
    variant n > 0 at least VARIANT_TEMPERATURE and a seed of its own (configured seed + n, or n
    without one), so each further retry draws a different sample."""
    if variant <= 0:
        return temperature, seed
    return max(temperature, VARIANT_TEMPERATURE), (seed + variant if seed is not None else variant)


class Engine(Protocol):
    """The narrow seam between the loop and any model: one call, one assembled turn.

    ``variant`` > 0 asks for this one request to be sampled differently (``variant_sampling``), and
    ``avoid`` names tools its reply may not call (``keel.engine.constrain.narrowed``). In process the
    prompt still shows every tool and only the grammar narrows (the cached prefix stays); over HTTP
    the narrowed list is sent, as the API has no "any tool but these". ``max_tokens`` is this request's
    own reply cap (change_file's editor asks for a file longer than one reply of the usual cap). Callers
    pass them only when set, so an engine without them still serves normal runs."""

    model: str

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None, variant: int = 0,
                 avoid: tuple[str, ...] = (), max_tokens: int | None = None) -> AssistantTurn: ...
