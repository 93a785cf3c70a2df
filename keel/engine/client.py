"""The engine client: one streamed Chat Completions call in, one assembled ``AssistantTurn`` out.

Built on the official ``openai`` SDK with its own retries switched off, because keel must
decide per failure what is safe: a stream cut halfway through a tool call is thrown away and
asked for again (a half-received call must never run), a rejected key stops at once with a fix,
and a busy server is waited on as long as it asks.
"""

from __future__ import annotations

import importlib
import json
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import openai

from keel.engine.recovery import recover_text_tool_calls
from keel.engine.retry import backoff_delay, parse_retry_after
from keel.engine.types import AssistantTurn, DeltaCallback, EngineError, StreamDelta, ToolCall, Usage

# The first call learns whether anything listens at all; a refused or silent port should say
# so within seconds, not after the 300 s read timeout meant for long generations.
FIRST_CONNECT_TIMEOUT_S = 5.0
LATER_CONNECT_TIMEOUT_S = 30.0
MODEL_LIST_TIMEOUT_S = 2.0
CHARS_PER_TOKEN = 4


def _transport_error_types() -> tuple[type[BaseException], ...]:
    """What the SDK's HTTP library raises while a raw body is read (a cut connection, a read
    timeout); which library that is depends on the openai release, so look both up."""
    found: list[type[BaseException]] = [OSError]
    for name in ("httpx", "httpx2"):
        try:
            found.append(importlib.import_module(name).HTTPError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


# A body that stopped arriving, or arrived garbled: the attempt is dropped and retried.
_STREAM_BROKE: tuple[type[BaseException], ...] = (openai.APIConnectionError, *_transport_error_types(),
                                                  json.JSONDecodeError, UnicodeDecodeError)
RETRYABLE_STATUSES = frozenset({408, 409, 429})
CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context length", "too many tokens",
                   "exceeds the context window", "exceed_context_size_error",
                   "exceeds the available context size", "maximum model length", "context window")
KEY_FIX = "the server rejected the API key — set KEEL_API_KEY or --api-key-env"


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


class OpenAICompatEngine:
    """Engine for any OpenAI-compatible server (vLLM, SGLang, llama.cpp server, Ollama)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 temperature: float = 0.0, seed: int | None = 1234, tool_choice: str = "auto",
                 max_tokens: int | None = 4096, timeout_s: float = 300.0, max_attempts: int = 4,
                 backoff_base_s: float = 0.5, backoff_cap_s: float = 30.0,
                 extra_body: dict[str, Any] | None = None, stream: bool = True,
                 headers: dict[str, str] | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        if not base_url or not base_url.strip():
            raise EngineError("config", "no engine base URL: set KEEL_BASE_URL or --base-url "
                                        "(for example http://localhost:8000/v1)")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url.strip().rstrip("/")
        self.model = model
        self.temperature = temperature
        self.seed = seed
        self.tool_choice = tool_choice
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.stream = stream
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._rng = random.Random()
        # Local servers ignore the key, but the SDK refuses to start without one.
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "EMPTY", max_retries=0,
                                     default_headers=headers)
        # Until the server has answered once, a refused connection means a wrong URL, not a blip.
        self._server_seen = False
        self._next_text_call = 1
        # The usage object exactly as the server sent it, for diagnostics (keel doctor).
        self.last_usage_raw: dict[str, Any] | None = None

    # ---- the Engine protocol ----------------------------------------------------------------

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None) -> AssistantTurn:
        started = time.monotonic()
        params = self._request_params(messages, tools)
        retries = 0
        while True:
            try:
                turn = self._attempt(params, on_delta)
                break
            except TransientFailure as failure:
                if retries + 1 >= self.max_attempts:
                    raise EngineError(
                        "retries", f"the engine at {self.base_url} failed {self.max_attempts} times in a row; "
                                   f"last error: {failure.reason}", status=failure.status) from None
                delay = backoff_delay(retries, self.backoff_base_s, self.backoff_cap_s,
                                      failure.retry_after, self._rng)
                if on_delta:  # front ends may have shown part of the dropped attempt
                    on_delta(StreamDelta("retry", f"{failure.reason}; retrying in {delay:.1f} s"))
                self._sleep(delay)
                retries += 1
        if turn.tool_calls:
            turn.tool_call_format = "structured"
        elif turn.content and turn.finish_reason != "length":
            # A reply cut by max_tokens may end inside a text call whose missing closing tags
            # recovery would forgive, running e.g. write_file with half its content. Leave it as
            # text; the caller treats "length" as recoverable and asks again.
            self._recover_text_calls(turn, tools)
        if turn.usage.estimated:
            turn.usage = _estimate_usage(messages, tools, turn)
        turn.retries = retries
        turn.latency_s = time.monotonic() - started
        return turn

    # ---- one attempt ------------------------------------------------------------------------

    def _request_params(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages, "stream": self.stream,
                                  "temperature": self.temperature}
        if self.stream:
            params["stream_options"] = {"include_usage": True}
        if self.seed is not None:
            params["seed"] = self.seed
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if tools:
            params["tools"] = tools
            params["tool_choice"] = self.tool_choice
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    def _attempt(self, params: dict[str, Any], on_delta: DeltaCallback | None) -> AssistantTurn:
        connect = LATER_CONNECT_TIMEOUT_S if self._server_seen else FIRST_CONNECT_TIMEOUT_S
        timeout = openai.Timeout(self.timeout_s, connect=min(connect, self.timeout_s))
        completions = self._client.chat.completions
        try:
            if self.stream:
                # The raw body, not the SDK's Stream: it builds a pydantic object per SSE event,
                # which made a 5 MB tool call (~650 000 events) take over a minute of CPU.
                opened = completions.with_streaming_response.create(**params, timeout=timeout)
                response = opened.__enter__()
            else:
                completion = completions.create(**params, timeout=timeout)
        except openai.APIStatusError as exc:
            self._server_seen = True
            raise self._classify_status(exc) from None
        except openai.APIConnectionError as exc:
            raise self._classify_connection(exc) from None
        self._server_seen = True
        if not self.stream:  # one JSON body: nothing can be cut half-way
            turn, self.last_usage_raw = assemble_completion(completion, on_delta)
            return turn
        try:
            # No chunk size: each block as it arrives (a size makes the reader wait to fill it).
            events = sse_events(response.iter_bytes(), response.http_request)
            turn, self.last_usage_raw = assemble_stream(events, on_delta)
            return turn
        except _STREAM_BROKE as exc:
            # Everything received in this attempt is dropped with the exception.
            raise TransientFailure(f"the response stream broke off ({_describe(exc)})") from None
        except openai.APIError as exc:  # an error event inside the stream
            if _is_context_error(_server_text(exc), exc.code, exc.type):
                raise EngineError("context", f"the request does not fit the model's context window: "
                                             f"{_server_text(exc)}") from None
            raise TransientFailure(f"the server reported an error mid-stream: {_server_text(exc)}") from None
        finally:
            opened.__exit__(None, None, None)

    def _classify_connection(self, exc: openai.APIConnectionError) -> Exception:
        if not self._server_seen and _is_connect_failure(exc):
            return EngineError("config", f"cannot reach the engine at {self.base_url} ({_describe(exc)}): "
                                         "is the server running, and is --base-url / KEEL_BASE_URL right?")
        return TransientFailure(f"{_describe(exc)} talking to {self.base_url}")

    def _classify_status(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        text = _server_text(exc)
        if status in (401, 403):
            return EngineError("config", f"{KEY_FIX} (HTTP {status} from {self.base_url}: {text})", status=status)
        if status == 404:
            return self._explain_not_found(text)
        if status in RETRYABLE_STATUSES or status >= 500:
            return TransientFailure(f"HTTP {status}: {text}", status=status,
                              retry_after=parse_retry_after(dict(exc.response.headers)))
        if _is_context_error(text, exc.code, exc.type):
            return EngineError("context", f"the request does not fit the model's context window "
                                          f"(HTTP {status}: {text})", status=status)
        return EngineError("protocol", f"the engine refused the request (HTTP {status}): {text}", status=status)

    def _explain_not_found(self, text: str) -> EngineError:
        served = self.list_models()
        if served is not None and self.model not in served:
            listing = ", ".join(served) if served else "none"
            return EngineError("config", f"model '{self.model}' is not served at {self.base_url} "
                                         f"(available: {listing}); set --model to one of them", status=404)
        if served is None and "model" in text.lower():
            return EngineError("config", f"model '{self.model}' was not found at {self.base_url}: {text}",
                               status=404)
        hint = "" if self.base_url.endswith("/v1") else " — does the base URL need to end with /v1?"
        return EngineError("config", f"{self.base_url}/chat/completions does not exist (HTTP 404: {text}); "
                                     f"the base URL looks wrong{hint}", status=404)

    def list_models(self) -> list[str] | None:
        """Model ids the server lists, or None when it cannot say (quickly)."""
        try:
            page = self._client.models.list(timeout=openai.Timeout(MODEL_LIST_TIMEOUT_S))
            return [m.id for m in page.data]
        except (openai.APIError, ValueError, TypeError):
            return None

    def _recover_text_calls(self, turn: AssistantTurn, tools: list[dict[str, Any]]) -> None:
        names, schemas = set(), {}
        for tool in tools:
            fn = tool.get("function") or {}
            if isinstance(fn.get("name"), str):
                names.add(fn["name"])
                schemas[fn["name"]] = fn.get("parameters") or {}
        content, calls, fmt = recover_text_tool_calls(turn.content, names, schemas=schemas,
                                                      id_start=self._next_text_call)
        if calls:
            self._next_text_call += len(calls)
            turn.content, turn.tool_calls, turn.tool_call_format = content, calls, fmt


# ---- stream assembly ----------------------------------------------------------------------------


def sse_events(blocks: Iterable[bytes], request: Any) -> Iterator[dict[str, Any]]:
    """The JSON payloads of a ``text/event-stream`` body, up to ``data: [DONE]``.

    Splits whole read blocks at blank lines instead of walking the body line by line; an error
    event (``{"error": {...}}``) is raised as ``openai.APIError``, as the SDK's own stream does."""
    pending = b""
    for block in blocks:
        pending += block
        if b"\r" in pending[:-1]:  # CRLF framing; a trailing CR may pair with the next block's LF
            pending = pending[:-1].replace(b"\r\n", b"\n") + pending[-1:]
        if b"\n\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n\n")
        for event in complete:
            data = _event_data(event)
            if data is None:
                continue
            if data == b"[DONE]":
                return
            yield _payload(data, request)
    data = _event_data(pending.replace(b"\r\n", b"\n").strip(b"\n"))
    if data is not None and data != b"[DONE]":
        yield _payload(data, request)


def _event_data(event: bytes) -> bytes | None:
    if event.startswith(b"data: ") and b"\n" not in event:  # the usual one-line event
        return event[6:]
    lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None  # comments, event:/id:/retry: lines carry no data


def _payload(data: bytes, request: Any) -> dict[str, Any]:
    payload = json.loads(data)
    if isinstance(payload, dict) and payload.get("error"):
        error = payload["error"]
        message = error.get("message") if isinstance(error, dict) else None
        raise openai.APIError(message if isinstance(message, str) and message else "an error event in the stream",
                              request=request, body=error)
    return payload if isinstance(payload, dict) else {}


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


def _estimate_usage(messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: AssistantTurn) -> Usage:
    request_chars = len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools, ensure_ascii=False))
    response_chars = len(turn.content) + len(turn.reasoning) + sum(
        len(c.name) + len(c.arguments) for c in turn.tool_calls)
    return Usage(prompt_tokens=-(-request_chars // CHARS_PER_TOKEN),
                 completion_tokens=-(-response_chars // CHARS_PER_TOKEN), estimated=True)


# ---- error helpers -----------------------------------------------------------------------------


def _server_text(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or body.get("error")
        if isinstance(message, str) and message:
            return message
        return json.dumps(body)[:500]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _is_context_error(text: str, code: str | None, err_type: str | None) -> bool:
    haystack = " ".join(s for s in (text, code or "", err_type or "") if s).lower()
    return any(marker in haystack for marker in CONTEXT_MARKERS)


def _connect_timed_out(exc: BaseException) -> bool:
    return any(type(e).__name__ == "ConnectTimeout" for e in _chain(exc))


def _is_connect_failure(exc: BaseException) -> bool:
    """Nobody answered at all: refused, unresolvable host, or no TCP handshake in time."""
    return any(isinstance(e, ConnectionRefusedError | socket.gaierror)
               or type(e).__name__ in ("ConnectError", "ConnectTimeout") for e in _chain(exc))


def _describe(exc: BaseException) -> str:
    for cause in _chain(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
    if _connect_timed_out(exc):
        return "connection timed out"
    if isinstance(exc, openai.APITimeoutError):
        return "no data before the read timeout"
    root = list(_chain(exc))[-1]
    return str(root) or type(root).__name__


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
