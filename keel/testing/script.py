"""The scripted engine's script: one canned model answer per line, validated when loaded.

Both the HTTP server and the in-process model replay the same steps, so a test can move
between them without rewriting its script. Everything here is pure: no sockets, no threads
beyond a lock, so the two replayers share the exact same usage and prefix-cache arithmetic.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEXT_FORMATS = ("hermes", "qwen3_coder")
STEP_KEYS = frozenset({"content", "tool_calls", "text_tool_calls", "reasoning", "usage", "error",
                       "cut_after_chunks", "delay_s", "chunk_delay_s", "finish_reason", "refuse_tool_choice"})
CALL_KEYS = frozenset({"name", "arguments", "id"})
USAGE_KEYS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens",
                        "prompt_tokens_details"})
ERROR_KEYS = frozenset({"status", "retry_after", "message", "code", "type"})
# An error step answers instead of the model, so output fields next to it are a script mistake.
OUTPUT_KEYS = frozenset({"content", "tool_calls", "text_tool_calls", "reasoning", "cut_after_chunks"})
# Real prefix caches work in whole KV blocks; vLLM's default block is 16 tokens.
CACHE_BLOCK_TOKENS = 16
CHARS_PER_TOKEN = 4
CONTENT_PIECE = 12  # chars per streamed content/reasoning delta: several chunks even for short replies
ARGUMENT_PIECE = 8  # chars per tool-call argument delta: clients must reassemble many pieces

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error"}


class ScriptError(ValueError):
    """The script cannot be replayed; the message names the line and the problem."""


@dataclass(frozen=True)
class ScriptedCall:
    id: str
    name: str
    arguments: str  # exactly the text the engine sends, malformed or not


@dataclass(frozen=True)
class ScriptedFailure:
    status: int
    message: str
    type: str
    code: str | None
    retry_after: float | None

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}


@dataclass(frozen=True)
class ScriptStep:
    """One answer. ``content`` already holds any text-form tool calls; ``tool_calls`` are the
    structured ones only."""

    index: int
    content: str = ""
    tool_calls: tuple[ScriptedCall, ...] = ()
    text_format: str | None = None
    reasoning: str = ""
    report_usage: bool = True
    usage_overrides: Mapping[str, int] = field(default_factory=dict)
    error: ScriptedFailure | None = None
    cut_after_chunks: int | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0    # between streamed chunks: a model that writes as a person watches
    finish_reason: str = "stop"
    # A request whose tool_choice is this value gets HTTP 400 and the step stays next in line, as
    # from a server that does not support it (the in-process ScriptedModel has no tool_choice).
    refuse_tool_choice: str | None = None

    def refuses(self, request: Mapping[str, Any]) -> bool:
        return self.refuse_tool_choice is not None and request.get("tool_choice") == self.refuse_tool_choice


def load_script(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]]) -> list[ScriptStep]:
    """A path to a JSON Lines file, or a list of step dicts (already-parsed steps pass through)."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from exc
        return parse_script_text(text, origin=str(path))
    steps: list[ScriptStep] = []
    for number, entry in enumerate(source, start=1):
        if isinstance(entry, ScriptStep):
            steps.append(entry)
            continue
        steps.append(parse_step(entry, index=len(steps), where=f"script entry {number}"))
    return steps


def parse_script_text(text: str, origin: str = "<script>") -> list[ScriptStep]:
    steps: list[ScriptStep] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{origin} line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        steps.append(parse_step(raw, index=len(steps), where=where))
    return steps


def parse_step(raw: Any, index: int, where: str) -> ScriptStep:
    def fail(problem: str) -> ScriptError:
        return ScriptError(f"{where}: {problem}")

    if not isinstance(raw, Mapping):
        raise fail(f"each step must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - STEP_KEYS)
    if unknown:
        raise fail(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(STEP_KEYS))}")
    delay = raw.get("delay_s", 0)
    if not _is_number(delay) or delay < 0:
        raise fail("delay_s must be a number >= 0")
    refuse = raw.get("refuse_tool_choice")
    if refuse is not None and (not isinstance(refuse, str) or not refuse):
        raise fail('refuse_tool_choice must be a tool_choice value such as "required"')
    if "error" in raw:
        clash = sorted(OUTPUT_KEYS & set(raw))
        if clash:
            raise fail(f"an error step cannot also have {', '.join(clash)}")
        return ScriptStep(index=index, error=_parse_error(raw["error"], fail), delay_s=float(delay),
                          refuse_tool_choice=refuse)

    content = raw.get("content") or ""
    if not isinstance(content, str):
        raise fail("content must be a string or null")
    reasoning = raw.get("reasoning") or ""
    if not isinstance(reasoning, str):
        raise fail("reasoning must be a string")
    text_format = raw.get("text_tool_calls")
    if text_format is not None and text_format not in TEXT_FORMATS:
        raise fail(f"text_tool_calls must be one of {', '.join(TEXT_FORMATS)}, got {text_format!r}")
    calls_raw = raw.get("tool_calls") or []
    if not isinstance(calls_raw, list):
        raise fail("tool_calls must be a list")
    calls = [_parse_call(c, index, i, text_format, fail) for i, c in enumerate(calls_raw)]
    cut = raw.get("cut_after_chunks")
    if cut is not None and (not isinstance(cut, int) or isinstance(cut, bool) or cut < 0):
        raise fail("cut_after_chunks must be an integer >= 0")
    report_usage, overrides = _parse_usage(raw, fail)
    pace = raw.get("chunk_delay_s", 0)
    if not _is_number(pace) or pace < 0:
        raise fail("chunk_delay_s must be a number >= 0")

    structured: tuple[ScriptedCall, ...] = tuple(calls)
    if text_format is not None and calls:
        blocks = [_render_text_call(c, text_format) for c in calls]
        content = "\n".join(([content] if content else []) + blocks)
        structured = ()
    finish = raw.get("finish_reason") or ("tool_calls" if structured else "stop")
    if not isinstance(finish, str):
        raise fail("finish_reason must be a string")
    return ScriptStep(index=index, content=content, tool_calls=structured, text_format=text_format,
                      reasoning=reasoning, report_usage=report_usage, usage_overrides=overrides,
                      cut_after_chunks=cut, delay_s=float(delay), chunk_delay_s=float(pace), finish_reason=finish,
                      refuse_tool_choice=refuse)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parse_call(raw: Any, step: int, i: int, text_format: str | None, fail: Any) -> ScriptedCall:
    label = f"tool_calls[{i}]"
    if not isinstance(raw, Mapping):
        raise fail(f"{label} must be an object with name and arguments")
    unknown = sorted(set(raw) - CALL_KEYS)
    if unknown:
        raise fail(f"{label} has unknown key(s) {', '.join(unknown)}; allowed: name, arguments, id")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{label}.name must be a non-empty string")
    args = raw.get("arguments", {})
    if isinstance(args, Mapping):
        text = json.dumps(args)
    elif isinstance(args, str):
        text = args  # sent verbatim: malformed JSON is a legitimate thing to script
    else:
        raise fail(f"{label}.arguments must be an object or a string")
    if text_format == "qwen3_coder" and not isinstance(_json_object(text), dict):
        raise fail(f"{label}.arguments must be a JSON object to render as qwen3_coder parameters")
    call_id = raw.get("id", f"call_{step}_{i}")
    if not isinstance(call_id, str) or not call_id:
        raise fail(f"{label}.id must be a non-empty string")
    return ScriptedCall(id=call_id, name=name, arguments=text)


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _render_text_call(call: ScriptedCall, text_format: str) -> str:
    if text_format == "hermes":
        # Splice the argument text in raw so malformed arguments survive into the text form too.
        return f'<tool_call>\n{{"name": {json.dumps(call.name)}, "arguments": {call.arguments}}}\n</tool_call>'
    params = _json_object(call.arguments)
    lines = ["<tool_call>", f"<function={call.name}>"]
    for key, value in params.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        lines += [f"<parameter={key}>", shown, "</parameter>"]
    lines += ["</function>", "</tool_call>"]
    return "\n".join(lines)


def _parse_usage(raw: Mapping[str, Any], fail: Any) -> tuple[bool, dict[str, int]]:
    if "usage" not in raw:
        return True, {}
    usage = raw["usage"]
    if usage is None:
        return False, {}
    if not isinstance(usage, Mapping):
        raise fail("usage must be an object or null")
    unknown = sorted(set(usage) - USAGE_KEYS)
    if unknown:
        raise fail(f"usage has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(USAGE_KEYS))}")
    flat = {k: v for k, v in usage.items() if k != "prompt_tokens_details"}
    details = usage.get("prompt_tokens_details")
    if details is not None:
        if not isinstance(details, Mapping) or set(details) - {"cached_tokens"}:
            raise fail("usage.prompt_tokens_details may only hold cached_tokens")
        if "cached_tokens" in details:
            flat["cached_tokens"] = details["cached_tokens"]
    for key, value in flat.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise fail(f"usage.{key} must be an integer >= 0")
    return True, flat


def _parse_error(raw: Any, fail: Any) -> ScriptedFailure:
    if not isinstance(raw, Mapping):
        raise fail("error must be an object with at least a status")
    unknown = sorted(set(raw) - ERROR_KEYS)
    if unknown:
        raise fail(f"error has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(ERROR_KEYS))}")
    status = raw.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise fail("error.status must be an HTTP error status between 400 and 599")
    retry_after = raw.get("retry_after")
    if retry_after is not None and (not _is_number(retry_after) or retry_after < 0):
        raise fail("error.retry_after must be a number of seconds >= 0")
    message = raw.get("message", f"scripted error {status}")
    code = raw.get("code")
    err_type = raw.get("type", _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"))
    for key, value in (("message", message), ("type", err_type)):
        if not isinstance(value, str):
            raise fail(f"error.{key} must be a string")
    if code is not None and not isinstance(code, str):
        raise fail("error.code must be a string or null")
    return ScriptedFailure(status=status, message=message, type=err_type, code=code,
                           retry_after=None if retry_after is None else float(retry_after))


# ---- replay state shared by the server and the in-process model -------------------------------


class ScriptPlayer:
    """Hands out steps in order, once each, safely across request threads."""

    def __init__(self, steps: Sequence[ScriptStep]) -> None:
        self._steps = list(steps)
        self._next = 0
        self._lock = threading.Lock()

    def take(self, request: Mapping[str, Any] | None = None) -> ScriptStep | None:
        """The next step; one that refuses ``request`` (``ScriptStep.refuses``) is returned but
        stays next in line, so the request asked again without what was refused gets it."""
        with self._lock:
            if self._next >= len(self._steps):
                return None
            step = self._steps[self._next]
            if request is None or not step.refuses(request):
                self._next += 1
            return step

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps) - self._next

    @property
    def total(self) -> int:
        return len(self._steps)

    def exhausted_message(self) -> str:
        return (f"scripted engine: script exhausted after {self.total} responses; "
                "no scripted response is left for this request")


def serialize(value: Any) -> str:
    """The text whose size stands in for tokens; compact so estimates track content, not padding."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def common_prefix_len(a: str, b: str) -> int:
    if b.startswith(a):
        return len(a)
    if a.startswith(b):
        return len(b)
    # Compare in large slices so the scan runs at memcmp speed; only the last slice goes char by char.
    step, i, n = 4096, 0, min(len(a), len(b))
    while i < n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptMeter:
    """Sizes each prompt and the prefix it shares with the previous one, like a server prefix cache.

    Sizes are characters of ``serialize(messages)``, computed per message so that only messages
    that changed since the previous call are serialised again: a long append-only history then
    costs little per call. Keys keep references to each message and its content, so a message
    edited in place (new content) is noticed; edits deep inside nested lists are not.
    """

    def __init__(self) -> None:
        self._keys: list[tuple[Any, ...]] = []
        self._parts: list[str] = []
        self._primed = False
        self._lock = threading.Lock()

    def measure(self, messages: Sequence[Any]) -> tuple[int, int]:
        """(characters of this prompt, characters at its start shared with the previous prompt)."""
        with self._lock:
            old_keys, old_parts = self._keys, self._parts
            keys = [_message_key(m) for m in messages]
            parts: list[str] = []
            same = 0  # leading messages that serialise exactly as last time
            for i, key in enumerate(keys):
                reuse = i < len(old_keys) and key == old_keys[i]
                part = old_parts[i] if reuse else serialize(messages[i])
                if same == i and i < len(old_parts) and part == old_parts[i]:
                    same += 1
                parts.append(part)
            total = 2 + sum(map(len, parts)) + max(0, len(parts) - 1)
            lead = 1 + sum(map(len, parts[:same]))  # "[" and the identical messages
            if not self._primed:
                shared = 0
            elif same < len(parts) and same < len(old_parts):
                shared = lead + same + common_prefix_len(old_parts[same], parts[same])
            elif len(parts) == len(old_parts):
                shared = total
            else:  # one prompt ends where the other goes on with another message
                shared = lead + max(0, same - 1)
            self._keys, self._parts, self._primed = keys, parts, True
        return total, shared


def _message_key(message: Any) -> tuple[Any, ...]:
    # Identity first: equal dicts with another key order serialise differently, so only the very
    # same object may reuse its text. Holding the object keeps its id from being recycled.
    if isinstance(message, dict):
        return id(message), message.get("content"), message.get("tool_calls"), message
    return id(message), message


def cached_tokens_for(shared_chars: int) -> int:
    """Shared prefix in whole cache blocks: real prefix caches only reuse complete KV blocks."""
    tokens = shared_chars // CHARS_PER_TOKEN
    return tokens - tokens % CACHE_BLOCK_TOKENS


def step_output_chars(step: ScriptStep) -> int:
    return (len(step.reasoning) + len(step.content)
            + sum(len(c.name) + len(c.arguments) for c in step.tool_calls))


def step_usage(step: ScriptStep, prompt_chars: int, cached_tokens: int) -> dict[str, int]:
    """prompt/completion/cached/total tokens: estimates, with the script's overrides on top."""
    usage = {"prompt_tokens": max(1, estimate_tokens(prompt_chars)),
             "completion_tokens": estimate_tokens(step_output_chars(step)),
             "cached_tokens": cached_tokens}
    usage.update({k: v for k, v in step.usage_overrides.items() if k != "total_tokens"})
    usage["total_tokens"] = step.usage_overrides.get(
        "total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return usage


def stream_deltas(step: ScriptStep) -> Iterator[dict[str, Any]]:
    """The choice deltas a vLLM-like server streams for this step, before the finish chunk."""
    yield {"role": "assistant", "content": ""}
    for piece in _pieces(step.reasoning, CONTENT_PIECE):
        yield {"reasoning_content": piece}
    for piece in _pieces(step.content, CONTENT_PIECE):
        yield {"content": piece}
    for index, call in enumerate(step.tool_calls):
        yield {"tool_calls": [{"index": index, "id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": ""}}]}
        for piece in _pieces(call.arguments, ARGUMENT_PIECE):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start:start + size]
