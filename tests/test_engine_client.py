"""The engine client and doctor against the scripted OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import json
import socket
import time

import pytest
from openai.types.chat import ChatCompletionChunk

from keel.engine.client import OpenAICompatEngine, TransientFailure, assemble_stream
from keel.engine.doctor import format_doctor, run_doctor
from keel.engine.types import EngineError, StreamDelta
from keel.testing.server import ScriptedEngineServer

TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "pattern": {"type": "string"},
                                         "content": {"type": "string"}}}}}
    for name in ("read_file", "grep", "write_file")
]
MESSAGES = [{"role": "system", "content": "You are keel. " * 40},
            {"role": "user", "content": "Fix the failing test in tests/test_app.py."}]
LONG_CONTENT = "def handler(event):\n    return {'status': 200, 'body': \"}{ braces\"}\n" * 6


class Sleeps(list):
    """Records the waits the engine asks for instead of sleeping them."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def engine_for(server: ScriptedEngineServer, sleeps: Sleeps | None = None, **kw) -> OpenAICompatEngine:
    return OpenAICompatEngine(server.base_url, "scripted", sleep=sleeps if sleeps is not None else Sleeps(), **kw)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_split_tool_call_arguments_are_reassembled_with_ids_kept():
    script = [{"content": "Reading both files.", "tool_calls": [
        {"name": "read_file", "arguments": {"path": "src/app.py"}, "id": "call_A"},
        {"name": "write_file", "arguments": {"path": "out.py", "content": LONG_CONTENT}, "id": "call_B"}]}]
    deltas: list[StreamDelta] = []
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server).complete(MESSAGES, TOOLS, on_delta=deltas.append)
        request = server.requests[0]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_A", "read_file", {"path": "src/app.py"}),
        ("call_B", "write_file", {"path": "out.py", "content": LONG_CONTENT})]
    assert turn.content == "Reading both files."
    assert turn.tool_call_format == "structured"
    assert turn.finish_reason == "tool_calls"
    assert turn.retries == 0 and turn.latency_s > 0
    assert "".join(d.text for d in deltas if d.kind == "content") == "Reading both files."
    assert sum(1 for d in deltas if d.kind == "tool_call") > 10  # arguments really arrived in pieces
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["tools"] == TOOLS and request["tool_choice"] == "auto"
    assert (request["temperature"], request["seed"], request["max_tokens"]) == (0.0, 1234, 4096)


def test_extra_body_reaches_the_server():
    with ScriptedEngineServer([{"content": "ok"}]) as server:
        engine_for(server, extra_body={"top_k": 20, "repetition_penalty": 1.05}).complete(MESSAGES, TOOLS)
        request = server.requests[0]
    assert (request["top_k"], request["repetition_penalty"]) == (20, 1.05)


def test_reasoning_is_kept_apart_and_never_resent():
    script = [{"reasoning": "The test imports a missing helper; read it first.", "content": "Let me look.",
               "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]},
              {"content": "Done."}]
    deltas: list[StreamDelta] = []
    with ScriptedEngineServer(script) as server:
        engine = engine_for(server)
        turn = engine.complete(MESSAGES, TOOLS, on_delta=deltas.append)
        history = [*MESSAGES, turn.to_message(),
                   {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": "x = 1"}]
        engine.complete(history, TOOLS)
        resent = server.requests[1]["messages"][2]
    assert turn.reasoning == "The test imports a missing helper; read it first."
    assert turn.content == "Let me look."
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == turn.reasoning
    assert "".join(d.text for d in deltas if d.kind == "content") == "Let me look."
    assert "missing helper" not in json.dumps(resent)
    assert resent["tool_calls"][0]["function"]["name"] == "read_file"


def test_usage_with_cached_tokens_is_read_from_the_final_chunk():
    script = [{"content": "ok", "usage": {"prompt_tokens": 1200, "completion_tokens": 7,
                                          "prompt_tokens_details": {"cached_tokens": 1024}}}]
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server).complete(MESSAGES, TOOLS)
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.cached_tokens) == (1200, 7, 1024)
    assert turn.usage.estimated is False


def test_repeated_prefix_shows_cache_hits():
    with ScriptedEngineServer([{"content": "a"}, {"content": "b"}]) as server:
        engine = engine_for(server)
        first = engine.complete(MESSAGES, TOOLS)
        second = engine.complete(MESSAGES, TOOLS)
    assert first.usage.cached_tokens == 0
    assert 0 < second.usage.cached_tokens <= second.usage.prompt_tokens


def test_missing_usage_is_estimated_from_characters():
    with ScriptedEngineServer([{"content": "x" * 400, "usage": None}]) as server:
        turn = engine_for(server).complete(MESSAGES, TOOLS)
    request_chars = len(json.dumps(MESSAGES)) + len(json.dumps(TOOLS))
    assert turn.usage.estimated is True
    assert abs(turn.usage.prompt_tokens - request_chars / 4) <= 1
    assert turn.usage.completion_tokens == 100


def test_429_is_retried_after_the_wait_the_server_asked_for():
    script = [{"error": {"status": 429, "retry_after": 7}}, {"content": "ok"}]
    sleeps = Sleeps()
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server, sleeps).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 2
    assert turn.content == "ok" and turn.retries == 1
    assert sleeps == [7.0]


def test_500_twice_then_success_backs_off_with_jitter():
    script = [{"error": {"status": 500}}, {"error": {"status": 503}}, {"content": "ok"}]
    sleeps = Sleeps()
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server, sleeps, backoff_base_s=0.5).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 3
    assert turn.content == "ok" and turn.retries == 2
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0


def test_persistent_failure_stops_at_the_attempt_cap():
    sleeps = Sleeps()
    with ScriptedEngineServer([{"error": {"status": 502, "message": "upstream gone"}}] * 3) as server:
        with pytest.raises(EngineError) as err:
            engine_for(server, sleeps, max_attempts=3).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 3
    assert err.value.kind == "retries" and err.value.status == 502
    assert "upstream gone" in err.value.message and len(sleeps) == 2


def test_stream_cut_inside_a_tool_call_is_retried_and_yields_the_calls_once():
    call = {"name": "write_file", "arguments": {"path": "big.py", "content": LONG_CONTENT}, "id": "call_W"}
    # role chunk, call header, then 4 argument pieces: the connection drops mid-arguments.
    script = [{"tool_calls": [call], "cut_after_chunks": 6}, {"tool_calls": [call]}]
    sleeps = Sleeps()
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server, sleeps).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 2
    assert turn.retries == 1 and len(sleeps) == 1
    assert len(turn.tool_calls) == 1
    assert turn.tool_calls[0].id == "call_W"
    assert json.loads(turn.tool_calls[0].arguments) == call["arguments"]


def test_front_ends_are_told_when_streamed_text_belongs_to_a_dropped_attempt():
    script = [{"content": "I will now explain at some length", "cut_after_chunks": 3},
              {"content": "Short answer."}]
    deltas = []
    with ScriptedEngineServer(script) as server:
        turn = engine_for(server, Sleeps()).complete(MESSAGES, TOOLS, deltas.append)
    kinds = [d.kind for d in deltas]
    retry_at = kinds.index("retry")
    assert "content" in kinds[:retry_at]  # something was shown before the cut...
    assert "".join(d.text for d in deltas[retry_at + 1:] if d.kind == "content") == "Short answer."
    assert turn.content == "Short answer."


def test_rejected_key_is_a_config_error_within_two_seconds():
    with ScriptedEngineServer([{"content": "never"}], api_key="right-key") as server:
        engine = OpenAICompatEngine(server.base_url, "scripted", "wrong-key", sleep=Sleeps())
        started = time.monotonic()
        with pytest.raises(EngineError) as err:
            engine.complete(MESSAGES, TOOLS)
        elapsed = time.monotonic() - started
        assert server.remaining == 1
    assert err.value.kind == "config" and err.value.status == 401
    assert "KEEL_API_KEY" in err.value.message
    assert elapsed < 2.0


def test_right_key_is_sent():
    with ScriptedEngineServer([{"content": "hi"}], api_key="right-key") as server:
        assert OpenAICompatEngine(server.base_url, "scripted", "right-key").complete(MESSAGES, TOOLS).content == "hi"


def test_wrong_model_is_a_config_error_naming_it_and_the_served_ones():
    with ScriptedEngineServer([{"content": "never"}], model="qwen3-coder-30b") as server:
        started = time.monotonic()
        with pytest.raises(EngineError) as err:
            OpenAICompatEngine(server.base_url, "qwen3-coder", sleep=Sleeps()).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 1
    assert err.value.kind == "config"
    assert "'qwen3-coder'" in err.value.message and "qwen3-coder-30b" in err.value.message
    assert time.monotonic() - started < 2.0


def test_wrong_path_is_a_config_error_hinting_at_v1():
    with ScriptedEngineServer([{"content": "never"}]) as server:
        base = server.base_url.removesuffix("/v1") + "/api"
        with pytest.raises(EngineError) as err:
            OpenAICompatEngine(base, "scripted", sleep=Sleeps()).complete(MESSAGES, TOOLS)
    assert err.value.kind == "config" and "/v1" in err.value.message


def test_refused_connection_on_first_call_is_a_config_error_within_two_seconds():
    sleeps = Sleeps()
    engine = OpenAICompatEngine(f"http://127.0.0.1:{closed_port()}/v1", "scripted", sleep=sleeps)
    started = time.monotonic()
    with pytest.raises(EngineError) as err:
        engine.complete(MESSAGES, TOOLS)
    assert time.monotonic() - started < 2.0
    assert err.value.kind == "config" and "connection refused" in err.value.message
    assert sleeps == []


def test_server_gone_after_first_success_is_retried_not_config():
    sleeps = Sleeps()
    server = ScriptedEngineServer([{"content": "first"}])
    engine = engine_for(server, sleeps, max_attempts=3)
    assert engine.complete(MESSAGES, TOOLS).content == "first"
    server.close()
    with pytest.raises(EngineError) as err:
        engine.complete(MESSAGES, TOOLS)
    assert err.value.kind == "retries" and len(sleeps) == 2


def test_missing_base_url_is_a_config_error():
    with pytest.raises(EngineError) as err:
        OpenAICompatEngine("", "scripted")
    assert err.value.kind == "config" and "--base-url" in err.value.message


@pytest.mark.parametrize("error", [
    {"status": 400, "code": "context_length_exceeded",
     "message": "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."},
    {"status": 400, "type": "exceed_context_size_error",
     "message": "the request exceeds the available context size, try increasing it"},
    {"status": 400, "message": "The input (40123 tokens) is longer than the model's context length (32768 tokens)."},
], ids=["vllm_openai", "llama_cpp", "sglang"])
def test_context_overflow_is_reported_as_context(error):
    with ScriptedEngineServer([{"error": error}, {"content": "never"}]) as server:
        with pytest.raises(EngineError) as err:
            engine_for(server).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 1
    assert err.value.kind == "context"


@pytest.mark.parametrize("status", [400, 422])
def test_other_client_errors_are_protocol_errors_and_not_retried(status):
    error = {"status": status, "message": "tools[0].function.parameters: not a valid JSON schema"}
    sleeps = Sleeps()
    with ScriptedEngineServer([{"error": error}, {"content": "never"}]) as server:
        with pytest.raises(EngineError) as err:
            engine_for(server, sleeps).complete(MESSAGES, TOOLS)
        assert len(server.requests) == 1
    assert err.value.kind == "protocol" and err.value.status == status
    assert "not a valid JSON schema" in err.value.message
    assert sleeps == []


@pytest.mark.parametrize("text_format", ["hermes", "qwen3_coder"])
def test_text_form_calls_are_recovered_into_structured_calls(text_format):
    calls = [{"name": "read_file", "arguments": {"path": "src/app.py"}},
             {"name": "write_file", "arguments": {"path": "n.txt", "content": "42"}}]
    script = [{"content": "I'll inspect the file.", "tool_calls": calls, "text_tool_calls": text_format},
              {"content": "Next.", "tool_calls": calls[:1], "text_tool_calls": text_format}]
    with ScriptedEngineServer(script) as server:
        engine = engine_for(server)
        turn = engine.complete(MESSAGES, TOOLS)
        later = engine.complete(MESSAGES, TOOLS)
    assert turn.tool_call_format == text_format
    assert turn.content == "I'll inspect the file."
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("read_file", {"path": "src/app.py"}), ("write_file", {"path": "n.txt", "content": "42"})]
    message = turn.to_message()
    assert "<tool_call>" not in message["content"]
    assert [c["id"] for c in message["tool_calls"]] == ["call_txt_1", "call_txt_2"]
    assert [c.id for c in later.tool_calls] == ["call_txt_3"]  # ids stay unique across turns
    # A resumed session is a new process with a new engine: the ids in the history are taken.
    resumed = MESSAGES + [message, {"role": "tool", "tool_call_id": "call_txt_1", "content": "x"},
                          {"role": "tool", "tool_call_id": "call_txt_2", "content": "ok"}]
    with ScriptedEngineServer(script[1:]) as server:
        after_resume = engine_for(server).complete(resumed, TOOLS)
    assert [c.id for c in after_resume.tool_calls] == ["call_txt_3"]


# ---- stream assembly for server quirks the scripted server does not produce -------------------------


def _chunks(*deltas: dict, finish: str | None = "stop") -> list[ChatCompletionChunk]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    out = [ChatCompletionChunk.model_validate({**base, "choices": [{"index": 0, "delta": d}]}) for d in deltas]
    if finish:
        out.append(ChatCompletionChunk.model_validate(
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    return out


def test_ollama_style_reasoning_field_and_missing_call_ids():
    turn, usage = assemble_stream(_chunks(
        {"reasoning": "thinking"},
        {"tool_calls": [{"index": 0, "function": {"name": "grep", "arguments": '{"pattern":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]},
        {"tool_calls": [{"index": 1, "function": {"name": "read_file", "arguments": ""}}]},
        finish="tool_calls"))
    assert turn.reasoning == "thinking" and turn.content == ""
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("grep", '{"pattern": "x"}'), ("read_file", "{}")]
    ids = [c.id for c in turn.tool_calls]
    assert all(ids) and len(set(ids)) == 2
    assert usage is None


def test_stream_without_finish_reason_is_treated_as_cut():
    with pytest.raises(TransientFailure):
        assemble_stream(_chunks({"content": "partial"},
                                {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "grep"}}]},
                                finish=None))


# ---- doctor -------------------------------------------------------------------------------------------


def _by_name(checks):
    return {c.name: c for c in checks}


def test_doctor_reports_structured_tool_calls_usage_and_cache():
    probe = {"tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}]}
    with ScriptedEngineServer([probe, probe]) as server:
        checks = _by_name(run_doctor(server.base_url, None, None))
    assert checks["model"].ok is True and "scripted" in checks["model"].detail
    assert checks["tool calls"].ok is True and "structured" in checks["tool calls"].detail
    assert checks["usage"].ok is True and checks["cached tokens"].ok is True
    assert all(c.ok is not False for c in checks.values())


@pytest.mark.parametrize("text_format", ["hermes", "qwen3_coder"])
def test_doctor_flags_text_form_tool_calls_with_the_parser_fix(text_format):
    probe = {"tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}], "text_tool_calls": text_format}
    with ScriptedEngineServer([probe, probe]) as server:
        checks = run_doctor(server.base_url, "scripted", None)
    tool = _by_name(checks)["tool calls"]
    assert tool.ok is False and text_format in tool.detail
    assert "--tool-call-parser qwen3_coder" in (tool.fix or "") and "--jinja" in (tool.fix or "")
    assert "[!!] tool calls" in format_doctor(checks)


def test_doctor_flags_a_model_that_never_calls_tools():
    probe = {"content": "It is probably around noon."}
    with ScriptedEngineServer([probe, probe]) as server:
        tool = _by_name(run_doctor(server.base_url, "scripted", None))["tool calls"]
    assert tool.ok is False and "around noon" in tool.detail


def test_doctor_names_missing_model_and_rejected_key():
    with ScriptedEngineServer([]) as server:
        model = _by_name(run_doctor(server.base_url, "qwen3-coder", None))["model"]
    assert model.ok is False and "scripted" in model.detail
    with ScriptedEngineServer([], api_key="k") as server:
        key = _by_name(run_doctor(server.base_url, None, "nope"))["API key"]
    assert key.ok is False and "KEEL_API_KEY" in (key.fix or "")


def test_doctor_fails_fast_on_a_closed_port_and_without_url():
    started = time.monotonic()
    checks = _by_name(run_doctor(f"http://127.0.0.1:{closed_port()}/v1", "m", None))
    assert time.monotonic() - started < 2.0
    assert checks["reachable"].ok is False and checks["tool calls"].ok is None
    assert _by_name(run_doctor(None, None, None))["base URL"].ok is False


def test_text_call_cut_by_max_tokens_is_not_recovered():
    cut_call = "<tool_call>\n<function=write_file>\n<parameter=path>\nmain.py\n</parameter>\n<parameter=content>\ndef ma"
    with ScriptedEngineServer([{"content": cut_call, "finish_reason": "length"}]) as server:
        turn = engine_for(server).complete(MESSAGES, TOOLS)
    assert turn.finish_reason == "length"
    assert turn.tool_calls == [] and turn.content == cut_call


def test_non_streaming_mode_for_servers_that_cannot_stream_tool_calls():
    script = [{"content": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}, "id": "c1"},
                                                     {"name": "grep", "arguments": {"pattern": "x"}}],
               "usage": {"prompt_tokens": 50, "completion_tokens": 7, "cached_tokens": 32}}]
    deltas = []
    with ScriptedEngineServer(script) as server:
        engine = OpenAICompatEngine(server.base_url, "scripted", "k", stream=False, sleep=Sleeps())
        turn = engine.complete(MESSAGES, TOOLS, deltas.append)
        body = server.requests[0]
    assert body["stream"] is False and "stream_options" not in body
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls][0] == ("c1", "read_file", {"path": "a.py"})
    assert [c.name for c in turn.tool_calls] == ["read_file", "grep"]
    assert (turn.usage.prompt_tokens, turn.usage.cached_tokens, turn.usage.estimated) == (50, 32, False)
    assert turn.content == "Reading." and [d.text for d in deltas if d.kind == "content"] == ["Reading."]


def test_doctor_finds_a_server_that_cannot_stream_tool_calls():
    probe = {"tool_calls": [{"name": "get_time", "arguments": {}}]}
    script = [dict(probe, cut_after_chunks=1), dict(probe, cut_after_chunks=1), probe, probe]
    with ScriptedEngineServer(script) as server:
        checks = _by_name(run_doctor(server.base_url, "scripted", None))
        streamed = [r["stream"] for r in server.requests if "messages" in r]
    assert streamed == [True, True, False, False]
    assert checks["streaming"].ok is False and "stream = false" in checks["streaming"].fix
    assert checks["tool calls"].ok is True
