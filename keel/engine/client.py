"""The engine client: one streamed Chat Completions call in, one assembled ``AssistantTurn`` out.

Built on the official ``openai`` SDK with its own retries switched off, because keel must
decide per failure what is safe: a stream cut halfway through a tool call is thrown away and
asked for again (a half-received call must never run), a rejected key stops at once with a fix,
and a busy server is waited on as long as it asks.
"""

from __future__ import annotations

import http.client
import importlib
import json
import random
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from keel.engine import sse
from keel.engine.assemble import TransientFailure, assemble_completion, assemble_stream
from keel.engine.constrain import http_tool_choice, is_refusal, narrowed, refusal_notice
from keel.engine.reasoning import recover_turn
from keel.engine.recovery import first_free_text_call_id
from keel.engine.retry import backoff_delay, parse_retry_after
from keel.engine.types import AssistantTurn, DeltaCallback, EngineError, StreamDelta, Usage, variant_sampling
from keel.engine.wait import ReplyClock

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
_RAW_STREAM_BROKE = (OSError, http.client.HTTPException, json.JSONDecodeError, UnicodeDecodeError)


def _openai() -> Any:
    """The SDK, imported on first use: it takes over a second to import, and a streamed call
    (every call of a normal run) does not need it."""
    import openai

    return openai


def _sdk_stream_broke() -> tuple[type[BaseException], ...]:
    return (_openai().APIConnectionError, *_transport_error_types(), *_RAW_STREAM_BROKE)
RETRYABLE_STATUSES = frozenset({408, 409, 429})
CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context length", "too many tokens",
                   "exceeds the context window", "exceed_context_size_error",
                   "exceeds the available context size", "maximum model length", "context window")
KEY_FIX = "set KEEL_API_KEY, or name the variable that holds the key with --api-key-env"


def url_problem(base_url: str) -> str | None:
    """Why ``base_url`` is no engine URL ("'x' is not an http(s) URL …"), or None."""
    url = base_url.strip()
    parts = urlsplit(url)
    try:
        parts.port   # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return f"{url!r} has a port that is not a number"
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        return f"{url!r} is not an http(s) URL (for example http://127.0.0.1:8000/v1)"
    return None


class OpenAICompatEngine:
    """Engine for any OpenAI-compatible server (vLLM, SGLang, llama.cpp server, Ollama)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 temperature: float = 0.0, seed: int | None = 1234, tool_choice: str = "auto",
                 max_tokens: int | None = 4096, timeout_s: float = 300.0, idle_timeout_s: float = 120.0,
                 max_attempts: int = 4,
                 backoff_base_s: float = 0.5, backoff_cap_s: float = 30.0,
                 extra_body: dict[str, Any] | None = None, stream: bool = True,
                 headers: dict[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 constrain_tool_calls: str = "off", key_source: str | None = None) -> None:
        """``key_source``: where the key came from, or why none was sent (keel.config.key_source), for
        the message when the server refuses it."""
        if not base_url or not base_url.strip():
            raise EngineError("config", "no engine base URL: set KEEL_BASE_URL or --base-url "
                                        "(for example http://localhost:8000/v1)")
        if (problem := url_problem(base_url)) is not None:   # a usage error before anything runs (issue 32)
            raise EngineError("config", f"the engine base URL {problem}")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url.strip().rstrip("/")
        self.model = model
        self.temperature = temperature
        self.seed = seed
        self.tool_choice = tool_choice
        self.constrain_tool_calls = constrain_tool_calls  # "on": tool_choice "required" (keel.engine.constrain)
        self.required_refused: str | None = None  # the server's refusal of "required", once it said so
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s              # the wait for a reply's first byte (keel.engine.wait)
        self.idle_timeout_s = idle_timeout_s    # a stream silent this long after its first byte is cut
        self.max_attempts = max_attempts
        self.stream = stream
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._rng = random.Random()
        # Local servers ignore the key, but the SDK refuses to start without one.
        self._api_key = api_key or "EMPTY"
        self._key_source = key_source or ("an API key" if api_key else "no API key was sent")
        self._headers = dict(headers or {})
        self._raw_stream = sse.can_stream_raw(self.base_url)
        self._sdk: Any = None  # the openai client, made on first use (see _openai)
        # Until the server has answered once, a refused connection means a wrong URL, not a blip.
        self._server_seen = False
        self._next_text_call = 1
        # The usage object exactly as the server sent it, for diagnostics (keel doctor).
        self.last_usage_raw: dict[str, Any] | None = None

    # ---- the Engine protocol ----------------------------------------------------------------

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 on_delta: DeltaCallback | None = None, variant: int = 0,
                 avoid: tuple[str, ...] = (), max_tokens: int | None = None,
                 deadline: float | None = None) -> AssistantTurn:
        """One reply. ``deadline`` (time.monotonic): every attempt, wait and retry ends by then, with
        keel.engine.runaway.ReplyCut("deadline") (keel.engine.runaway.GuardedEngine passes the run's).
        ``max_tokens``: this request's own cap (change_file's editor, for a longer file)."""
        started = time.monotonic()
        params = self._request_params(messages, narrowed(tools, avoid) if avoid else tools, variant)
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        clock = ReplyClock(deadline, self.timeout_s, self.idle_timeout_s)
        retries = 0
        while True:
            try:
                turn = self._attempt(params, on_delta, clock)
                break
            except EngineError as exc:  # a server that refuses the "required" keel added: ask without it
                if not is_refusal(params.get("tool_choice"), self.tool_choice, exc.kind, exc.status):
                    raise
                self.required_refused = exc.message
                params = {**params, "tool_choice": self.tool_choice}
                if on_delta:
                    on_delta(StreamDelta("retry", refusal_notice(exc.message)))
                retries += 1
            except TransientFailure as failure:
                if retries + 1 >= self.max_attempts:
                    raise EngineError(
                        "retries", f"the engine at {self.base_url} failed {self.max_attempts} times in a row; "
                                   f"last error: {failure.reason}", status=failure.status) from None
                delay = backoff_delay(retries, self.backoff_base_s, self.backoff_cap_s,
                                      failure.retry_after, self._rng)
                clock.before_retry(delay, self._sleep)   # no time left for it: ReplyCut at the deadline
                if on_delta:  # front ends may have shown part of the dropped attempt
                    on_delta(StreamDelta("retry", f"{failure.reason}; retrying in {delay:.1f} s"))
                self._sleep(delay)
                retries += 1
        if self.max_tokens and not turn.usage.estimated and turn.usage.completion_tokens == self.max_tokens:
            # vLLM and Ollama report "tool_calls" for a reply cut at max_tokens that their parser read a
            # call from (the generation stops at exactly max_tokens); its arguments may be cut too, so it
            # counts as cut and the loop never runs it
            turn.finish_reason = "length"
        if turn.tool_calls:
            turn.tool_call_format = "structured"
        elif turn.content and turn.finish_reason != "length":
            # A reply cut by max_tokens may end inside a text call whose missing closing tags
            # recovery would forgive, running e.g. write_file with half its content. Leave it as
            # text; the caller treats "length" as recoverable and asks again.
            self._next_text_call = first_free_text_call_id(messages, self._next_text_call)
            self._recover_text_calls(turn, tools)
        if turn.usage.estimated:
            turn.usage = _estimate_usage(messages, tools, turn)
        turn.retries = retries
        turn.latency_s = time.monotonic() - started
        return turn

    # ---- one attempt ------------------------------------------------------------------------

    def _request_params(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                        variant: int = 0) -> dict[str, Any]:
        temperature, seed = variant_sampling(self.temperature, self.seed, variant)
        params: dict[str, Any] = {"model": self.model, "messages": messages, "stream": self.stream,
                                  "temperature": temperature}
        if self.stream:
            params["stream_options"] = {"include_usage": True}
        if seed is not None:
            params["seed"] = seed
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if tools:
            params["tools"] = tools
            params["tool_choice"] = http_tool_choice(self.constrain_tool_calls, self.tool_choice, tools,
                                                     refused=self.required_refused is not None)
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    def _attempt(self, params: dict[str, Any], on_delta: DeltaCallback | None, clock: ReplyClock) -> AssistantTurn:
        connect = clock.capped(min(LATER_CONNECT_TIMEOUT_S if self._server_seen else FIRST_CONNECT_TIMEOUT_S,
                                   self.timeout_s))
        if self.stream and self._raw_stream:
            return self._attempt_raw(params, on_delta, connect, clock)
        openai = _openai()
        timeout = openai.Timeout(clock.capped(self.timeout_s), connect=connect)   # the SDK's own timeouts
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
            events = sse.sse_events(response.iter_bytes())
            turn, self.last_usage_raw = assemble_stream(events, on_delta)
            return turn
        except _sdk_stream_broke() as exc:
            # Everything received in this attempt is dropped with the exception.
            raise TransientFailure(f"the response stream broke off ({_describe(exc)})") from None
        except (sse.StreamErrorEvent, openai.APIError) as exc:  # an error event inside the stream
            if _is_context_error(_server_text(exc), exc.code, exc.type):
                raise EngineError("context", f"the request does not fit the model's context window: "
                                             f"{_server_text(exc)}") from None
            raise TransientFailure(f"the server reported an error mid-stream: {_server_text(exc)}") from None
        finally:
            opened.__exit__(None, None, None)

    def _attempt_raw(self, params: dict[str, Any], on_delta: DeltaCallback | None,
                     connect_timeout: float, clock: ReplyClock) -> AssistantTurn:
        """One streamed call over http.client (see keel.engine.sse for why), its waits bounded by
        ``clock`` (keel.engine.wait)."""
        body = {k: v for k, v in params.items() if k != "extra_body"}
        body.update(params.get("extra_body") or {})
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "Authorization": f"Bearer {self._api_key}", **self._headers}
        try:
            response, conn = sse.open_stream(f"{self.base_url}/chat/completions", json.dumps(body).encode(),
                                             headers, connect_timeout, clock.capped(self.idle_timeout_s),
                                             wait=lambda sock: clock.wait_first_byte(sock, on_delta))
        except sse.ConnectFailed as exc:
            raise self._classify_connection(exc.__cause__ or exc) from None
        except TimeoutError:
            raise clock.silent() from None
        except (OSError, http.client.HTTPException) as exc:
            raise TransientFailure(f"{_describe(exc)} talking to {self.base_url}") from None
        self._server_seen = True
        try:
            if response.status >= 400:
                text, code, kind = sse.error_details(response.read(sse.ERROR_BODY_BYTES), response.reason)
                raise self._status_failure(response.status, text, code, kind, dict(response.getheaders()))
            blocks = sse.read_blocks(response, lambda: clock.before_read(conn.sock))
            turn, self.last_usage_raw = assemble_stream(sse.sse_events(blocks), on_delta)
            return turn
        except TimeoutError:
            raise clock.silent() from None
        except _RAW_STREAM_BROKE as exc:
            # Everything received in this attempt is dropped with the exception.
            raise TransientFailure(f"the response stream broke off ({_describe(exc)})") from None
        except sse.StreamErrorEvent as exc:  # an error event inside the stream
            if _is_context_error(_server_text(exc), exc.code, exc.type):
                raise EngineError("context", f"the request does not fit the model's context window: "
                                             f"{_server_text(exc)}") from None
            raise TransientFailure(f"the server reported an error mid-stream: {_server_text(exc)}") from None
        finally:
            conn.close()

    def _classify_connection(self, exc: BaseException) -> Exception:
        if not self._server_seen and _is_connect_failure(exc):
            return EngineError("config", f"cannot reach the engine at {self.base_url} ({_describe(exc)}): "
                                         "is the server running, and is --base-url / KEEL_BASE_URL right?")
        return TransientFailure(f"{_describe(exc)} talking to {self.base_url}")

    @property
    def _client(self) -> Any:
        if self._sdk is None:
            self._sdk = _openai().OpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0,
                                         default_headers=self._headers or None)
        return self._sdk

    def _classify_status(self, exc: Any) -> Exception:
        return self._status_failure(exc.status_code, _server_text(exc), exc.code, exc.type,
                                    dict(exc.response.headers))

    def _status_failure(self, status: int, text: str, code: str | None, err_type: str | None,
                        headers: dict[str, str]) -> Exception:
        if status in (401, 403):
            refused = (f"the server needs an API key and {self._key_source}" if self._key_source.startswith("no ")
                       else f"the server rejected {self._key_source}")
            return EngineError("config", f"{refused} — {KEY_FIX} (HTTP {status} from {self.base_url}: {text})",
                               status=status)
        if status == 404:
            return self._explain_not_found(text)
        if status in RETRYABLE_STATUSES or status >= 500:
            return TransientFailure(f"HTTP {status}: {text}", status=status,
                              retry_after=parse_retry_after(headers))
        if _is_context_error(text, code, err_type):
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
        if self._raw_stream:
            return sse.list_model_ids(self.base_url, {"Authorization": f"Bearer {self._api_key}", **self._headers},
                                      MODEL_LIST_TIMEOUT_S)
        openai = _openai()
        try:
            page = self._client.models.list(timeout=openai.Timeout(MODEL_LIST_TIMEOUT_S))
            return [m.id for m in page.data]
        except (openai.APIError, ValueError, TypeError):
            return None

    def first_contact(self, timeout: float = 2.0) -> str | None:
        """What keeps the engine from answering a task, said before the first one (the REPL's start):
        no answer at the URL, the key refused, the model not served. None: it answered, or it cannot
        tell (the first model call will)."""
        try:
            status, served = sse.get_models(self.base_url, {"Authorization": f"Bearer {self._api_key}",
                                                            **self._headers}, timeout)
        except (OSError, http.client.HTTPException) as exc:
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            return (f"the engine at {self.base_url} does not answer ({why}): start it, or fix --base-url / "
                    "KEEL_BASE_URL (`keel doctor` checks it)")
        if status in (401, 403):
            refused = self._status_failure(status, "", None, None, {})
            return str(getattr(refused, "message", refused))
        if served and self.model not in served:
            return f"model '{self.model}' is not served at {self.base_url} (available: {', '.join(served)}); set --model"
        return None

    def _recover_text_calls(self, turn: AssistantTurn, tools: list[dict[str, Any]]) -> None:
        self._next_text_call += recover_turn(turn, tools, id_start=self._next_text_call)


def _estimate_usage(messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: AssistantTurn) -> Usage:
    request_chars = len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools, ensure_ascii=False))
    response_chars = len(turn.content) + len(turn.reasoning) + sum(
        len(c.name) + len(c.arguments) for c in turn.tool_calls)
    return Usage(prompt_tokens=-(-request_chars // CHARS_PER_TOKEN),
                 completion_tokens=-(-response_chars // CHARS_PER_TOKEN), estimated=True)


# ---- error helpers -----------------------------------------------------------------------------


def _server_text(exc: Any) -> str:
    """The server's own words from an SDK APIError or a StreamErrorEvent."""
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
    if type(exc).__name__ == "APITimeoutError":
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
