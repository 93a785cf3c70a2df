"""``keel doctor``: check an engine end to end and say, line by line, what to fix.

Each check answers one question a user setting up vLLM / llama.cpp / Ollama / SGLang gets
wrong in practice (wrong URL, key, model name, tool parser off, no usage or cache reporting).
Every network step has a short timeout: a doctor that hangs is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from keel.engine.client import OpenAICompatEngine, url_problem
from keel.engine.provenance import keel_version, probe_server, serving_line
from keel.engine.types import AssistantTurn, EngineError

CONNECT_TIMEOUT_S = 3.0
LIST_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 60.0
SMALL_CONTEXT_TOKENS = 16384
PROBE_TOOL = {"type": "function", "function": {
    "name": "get_time",
    "description": "Return the current time in the given IANA timezone.",
    "parameters": {"type": "object", "properties": {
        "timezone": {"type": "string", "description": "IANA timezone name, for example Europe/Paris"}},
        "required": []}}}
# Long enough to span several KV-cache blocks, so an identical second request can show cache hits.
PROBE_SYSTEM = ("You are a connectivity probe for the keel coding agent. Your only job is to show that "
                "tool calling works. When the user asks for the time you must call the get_time tool "
                "instead of answering in prose. Do not explain, do not apologise, do not guess the time. "
                "Call the tool exactly once with an IANA timezone name, then stop. " * 3).strip()
PROBE_MESSAGES = [{"role": "system", "content": PROBE_SYSTEM},
                  {"role": "user", "content": "What time is it in UTC? Call get_time."}]
TOOL_PARSER_FIX = {
    "vllm": "vLLM: add --enable-auto-tool-choice --tool-call-parser qwen3_coder",
    "sglang": "SGLang: add --tool-call-parser qwen3_coder",
    "llamacpp": "llama.cpp: start llama-server with --jinja",
    "ollama": "Ollama: use a model whose template supports tools (e.g. qwen3-coder)",
}
# Marks doctor's probe requests, so keel's scripted engine answers them without using up script
# lines (a doctor-then-run against one script would otherwise be shifted by two responses).
PROBE_HEADERS = {"X-Keel-Probe": "doctor"}
CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")
# With [engine] constrain_tool_calls = "on" keel sends tool_choice "required" when finish is offered
# (keel/engine/constrain.py); one more short probe shows whether this server takes it.
FINISH_PROBE_TOOL = {"type": "function", "function": {
    "name": "finish", "description": "Say that the task is done.",
    "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}}
CONSTRAIN_CHECK = "constrained calls"


@dataclass
class DoctorCheck:
    name: str
    ok: bool | None   # None: could not tell, or skipped because an earlier check failed
    detail: str
    fix: str | None = None


class _Skip(Exception):
    """A check failed so that the ones after it cannot run; carries why."""


def run_doctor(base_url: str | None, model: str | None, api_key: str | None,
               constrain_tool_calls: str = "off", key_source: str | None = None) -> list[DoctorCheck]:
    """``key_source``: where the key came from or why none was sent (keel.config.key_source)."""
    checks: list[DoctorCheck] = []
    names = ["reachable", "API key", "model", "context window", "serving", "tool calls", "usage", "cached tokens"]
    if constrain_tool_calls == "on":
        names.append(CONSTRAIN_CHECK)
    try:
        base_url = _base_url(base_url, checks)
        listed = _listed_models(base_url, api_key, checks, key_source)
        server_kind = _server_kind([_extra(m).get("owned_by") or getattr(m, "owned_by", None) for m in listed])
        entries = {m.id: m for m in listed}
        model = _chosen_model(model, entries, server_kind, checks)
        checks.append(_context_check(entries.get(model)))
        checks.append(_serving_check(base_url, model, api_key))
        engine = _probe(base_url, model, api_key, server_kind, checks)
    except _Skip as skip:
        done = {c.name for c in checks}
        checks.extend(DoctorCheck(n, None, f"skipped: {skip}") for n in names if n not in done)
        return checks
    if constrain_tool_calls == "on":
        checks.append(_constrain_check(base_url, model, api_key, engine.stream))
    return checks


def _serving_check(base_url: str, model: str, api_key: str | None) -> DoctorCheck:
    """What the server says it is (keel.engine.provenance): the record every run keeps."""
    facts = probe_server(base_url, model, api_key)
    named = bool(facts.get("server"))
    facts.setdefault("server", "openai-compatible")
    return DoctorCheck("serving", True if named else None,
                       serving_line({"model": model, **facts, "keel_version": keel_version()}),
                       None if named else "the server names neither itself nor its version (no /props, "
                                          "/version, /api/version or /openapi.json): runs record the model only")


def _base_url(base_url: str | None, checks: list[DoctorCheck]) -> str:
    if not base_url or not base_url.strip():
        checks.append(DoctorCheck("base URL", False, "no engine base URL is set",
                                  "set KEEL_BASE_URL or --base-url, e.g. http://localhost:8000/v1"))
        raise _Skip("no base URL")
    base_url = base_url.strip().rstrip("/")
    if (problem := url_problem(base_url)) is not None:
        checks.append(DoctorCheck("base URL", False, problem,
                                  "give the full URL with scheme and host, e.g. http://127.0.0.1:8000/v1"))
        raise _Skip("the base URL is not a URL")
    checks.append(DoctorCheck("base URL", True, base_url))
    return base_url


def _listed_models(base_url: str, api_key: str | None, checks: list[DoctorCheck],
                   key_source: str | None = None) -> list[Any]:
    """GET /models: whether the server answers and takes the key, and what it serves."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY", max_retries=0)
    try:
        listed = client.models.list(timeout=openai.Timeout(LIST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)).data
    except openai.APIConnectionError as exc:
        checks.append(DoctorCheck("reachable", False, f"no answer from {base_url}/models ({_cause(exc)})",
                                  "start the server, or fix --base-url / KEEL_BASE_URL (host, port, scheme)"))
        raise _Skip("server not reachable") from None
    except openai.APIStatusError as exc:
        checks.append(DoctorCheck("reachable", True, f"the server answered (HTTP {exc.status_code})"))
        if exc.status_code in (401, 403):
            source = key_source or ("a key was sent" if api_key else "no API key was sent")
            said = f"needed, and {source}" if source.startswith("no ") else f"rejected: {source}"
            checks.append(DoctorCheck("API key", False, f"{said} (HTTP {exc.status_code})",
                                      "set KEEL_API_KEY, or name the variable that holds the server's key with "
                                      "--api-key-env"))
            raise _Skip("API key rejected") from None
        if exc.status_code == 404:
            hint = "" if base_url.endswith("/v1") else " — does it need to end with /v1?"
            checks[-1] = DoctorCheck("reachable", False, f"the server answered, but {base_url}/models is 404",
                                     f"fix the base URL{hint}")
            raise _Skip("wrong base URL") from None
        checks.append(DoctorCheck("API key", None, f"could not tell: GET /models failed with HTTP {exc.status_code}"))
        return []
    checks.append(DoctorCheck("reachable", True, f"{base_url}/models answered"))
    checks.append(DoctorCheck("API key", True, "accepted" if api_key else "none sent, none required"))
    return list(listed)


def _chosen_model(model: str | None, entries: dict[str, Any], server_kind: str | None,
                  checks: list[DoctorCheck]) -> str:
    if model is None:
        if len(entries) != 1:
            shown = ", ".join(entries) or "none listed"
            checks.append(DoctorCheck("model", False, f"no model chosen and the server lists {shown}",
                                      "set --model to one of the listed models"))
            raise _Skip("no model chosen")
        model = next(iter(entries))
        checks.append(DoctorCheck("model", True, f"using the only served model, {model}"))
    elif model in entries:
        checks.append(DoctorCheck("model", True, f"{model} is served"))
    elif entries and server_kind == "llamacpp":
        checks.append(DoctorCheck("model", None, f"llama.cpp serves {', '.join(entries)} whatever name is asked"))
    elif entries:
        checks.append(DoctorCheck("model", False, f"{model} is not served; available: {', '.join(entries)}",
                                  "set --model to one of the available models"))
        raise _Skip(f"model {model} not served")
    else:
        checks.append(DoctorCheck("model", None, "the server lists no models; trying the name anyway"))
    return model


def _probe(base_url: str, model: str, api_key: str | None, server_kind: str | None,
           checks: list[DoctorCheck]) -> OpenAICompatEngine:
    """One tool-call request (tool calls, streaming, usage), then the same again (cached tokens)."""
    engine = OpenAICompatEngine(base_url, model, api_key, max_tokens=200, timeout_s=PROBE_TIMEOUT_S,
                                max_attempts=2, backoff_cap_s=2.0, headers=PROBE_HEADERS)
    try:
        first = engine.complete(PROBE_MESSAGES, [PROBE_TOOL])
    except EngineError as exc:
        # Some servers (llama-cpp-python's chatml-function-calling) cannot stream tool calls and
        # fail mid-stream; if the same request works without streaming, say exactly that.
        engine = OpenAICompatEngine(base_url, model, api_key, max_tokens=200, timeout_s=PROBE_TIMEOUT_S,
                                    max_attempts=1, stream=False, headers=PROBE_HEADERS)
        try:
            first = engine.complete(PROBE_MESSAGES, [PROBE_TOOL])
        except EngineError:
            checks.append(DoctorCheck("tool calls", False, f"the probe request failed ({exc.kind}): {exc.message}",
                                      _fix_for(exc)))
            raise _Skip("the probe request failed") from None
        checks.append(DoctorCheck("streaming", False, f"streamed requests fail ({exc.message[:120]}) but the same "
                                                      "request works without streaming",
                                  "set `stream = false` under [engine] in ~/.config/keel/config.toml"))
    checks.append(_tool_call_check(first, server_kind))
    if first.usage.estimated:
        checks.append(DoctorCheck("usage", False, "the server reports no token usage; keel estimates chars/4",
                                  "upgrade the server to one that honours stream_options.include_usage"))
    else:
        checks.append(DoctorCheck("usage", True, f"{first.usage.prompt_tokens} prompt + "
                                                 f"{first.usage.completion_tokens} completion tokens"))
    try:
        engine.complete(PROBE_MESSAGES, [PROBE_TOOL])
    except EngineError as exc:
        checks.append(DoctorCheck("cached tokens", None, f"the repeated probe failed: {exc.message}"))
    else:
        checks.append(_cache_check(engine.last_usage_raw, server_kind))
    return engine


def price_check(prices: dict[str, float], budget_usd: float | None) -> DoctorCheck:
    """Without a price table keel cannot measure cost, so a cost budget can never stop a run."""
    if any(v > 0 for v in prices.values()):
        return DoctorCheck("prices", True, ", ".join(f"{k} = {v:g}" for k, v in prices.items()))
    budget = f"; budget_usd = {budget_usd:g} cannot be enforced" if budget_usd is not None else ""
    return DoctorCheck("prices", None, f"no prices configured: cost is reported as unknown{budget}",
                       "set [prices] input_per_m, cached_input_per_m, output_per_m (USD per million tokens) "
                       "in ~/.config/keel/config.toml")


def format_doctor(checks: list[DoctorCheck]) -> str:
    marks = {True: "[ok]", False: "[!!]", None: "[--]"}
    lines = []
    for check in checks:
        line = f"{marks[check.ok]} {check.name}: {check.detail}"
        if check.fix:
            line += f" — fix: {check.fix}"
        lines.append(line)
    problems = sum(1 for c in checks if c.ok is False)
    lines.append("all checks passed" if problems == 0 else f"{problems} problem(s) found")
    return "\n".join(lines)


def _context_check(entry: Any) -> DoctorCheck:
    extra = _extra(entry) if entry is not None else {}
    for key in CONTEXT_KEYS:
        value = extra.get(key)
        if isinstance(value, int) and value > 0:
            if value < SMALL_CONTEXT_TOKENS:
                return DoctorCheck("context window", False, f"{value} tokens ({key}); keel needs more room",
                                   "serve a larger window: vLLM --max-model-len 32768, llama.cpp -c 32768, "
                                   "Ollama num_ctx 32768")
            return DoctorCheck("context window", True, f"{value} tokens ({key})")
    meta = extra.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
        return DoctorCheck("context window", None, f"trained for {meta['n_ctx_train']} tokens; "
                                                   "the served window (llama-server -c) may be smaller")
    return DoctorCheck("context window", None, "unknown: the server does not publish it")


def _tool_call_check(turn: AssistantTurn, server_kind: str | None) -> DoctorCheck:
    names = ", ".join(c.name for c in turn.tool_calls)
    if turn.tool_call_format == "structured":
        return DoctorCheck("tool calls", True, f"structured tool calls ({names})")
    parser_fix = TOOL_PARSER_FIX.get(server_kind or "") or "; ".join(TOOL_PARSER_FIX.values())
    if turn.tool_calls:
        return DoctorCheck("tool calls", False, f"the model wrote the call as text ({turn.tool_call_format}: "
                                                f"{names}); keel recovers it, but the server's tool parser is off",
                           parser_fix)
    said = " ".join(turn.content.split())[:80] or "nothing"
    return DoctorCheck("tool calls", False, f"no tool call; the model said: {said!r}",
                       f"use a tool-capable model (Qwen3-Coder) and template; {parser_fix}")


def _cache_check(raw: dict[str, Any] | None, server_kind: str | None) -> DoctorCheck:
    if raw is None:
        return DoctorCheck("cached tokens", None, "unknown: the server reports no usage")
    details = raw.get("prompt_tokens_details")
    if not isinstance(details, dict) or details.get("cached_tokens") is None:
        fix = "vLLM: --enable-prompt-tokens-details" if server_kind in (None, "vllm") else \
            "use a server version that reports prompt_tokens_details.cached_tokens"
        return DoctorCheck("cached tokens", False, "not reported, so keel cannot see prefix-cache hits", fix)
    cached = details["cached_tokens"]
    if cached > 0:
        return DoctorCheck("cached tokens", True, f"{cached} of {raw.get('prompt_tokens')} prompt tokens "
                                                  "came from the prefix cache on a repeated request")
    return DoctorCheck("cached tokens", False, "reported, but 0 on an identical repeated request",
                       "turn on prefix caching (vLLM: --enable-prefix-caching; llama.cpp: cache_prompt)")


def _constrain_check(base_url: str, model: str, api_key: str | None, stream: bool) -> DoctorCheck:
    engine = OpenAICompatEngine(base_url, model, api_key, max_tokens=200, timeout_s=PROBE_TIMEOUT_S,
                                max_attempts=1, stream=stream, headers=PROBE_HEADERS, constrain_tool_calls="on")
    try:
        turn = engine.complete(PROBE_MESSAGES, [PROBE_TOOL, FINISH_PROBE_TOOL])
    except EngineError as exc:
        return DoctorCheck(CONSTRAIN_CHECK, None, f"the probe failed: {exc.message}")
    fix = 'vLLM >= 0.8.3, or llama-server with --jinja; else set constrain_tool_calls = "off" under [engine]'
    if engine.required_refused is not None:
        return DoctorCheck(CONSTRAIN_CHECK, False, f'the server refuses tool_choice "required" '
                                                   f"({engine.required_refused}); runs go on unconstrained", fix)
    if turn.tool_call_format != "structured":
        return DoctorCheck(CONSTRAIN_CHECK, False, 'tool_choice "required" was accepted, but the reply holds no '
                                                   "structured tool call: the server does not apply it", fix)
    return DoctorCheck(CONSTRAIN_CHECK, True, 'tool_choice "required" accepted; the reply was a tool call')


def _fix_for(exc: EngineError) -> str | None:
    if exc.kind == "config":
        return None  # the message already says what to do
    if exc.kind == "protocol":
        return "the server refused a tool request: " + "; ".join(TOOL_PARSER_FIX.values())
    return "check the server's log"


def _server_kind(owners: list[Any]) -> str | None:
    text = " ".join(str(o).lower() for o in owners if o)
    for kind in ("vllm", "sglang", "llamacpp", "ollama"):
        if kind in text:
            return kind
    return "ollama" if "library" in text else None


def _extra(model: Any) -> dict[str, Any]:
    extra = getattr(model, "model_extra", None) or {}
    return dict(extra)


def _cause(exc: BaseException) -> str:
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return str(root) or type(root).__name__
