"""The scripted engine, driven by the real openai SDK and raw http.client over loopback."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keel.engine.types import EngineError
from keel.testing import ScriptedEngineServer, ScriptedModel, ScriptError, load_script
from keel.testing.script import PromptMeter, common_prefix_len, serialize

REPO = Path(__file__).resolve().parents[1]
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]
TWO_CALLS = {"content": "Let me look at both files first.",
             "tool_calls": [{"id": "call_custom", "name": "read_file",
                             "arguments": {"path": "src/some/deeply/nested/module.py", "limit": 200}},
                            {"name": "write_file", "arguments": {"path": "b.txt", "content": "hello\nworld"}}]}


def client(server: ScriptedEngineServer, key: str = "x") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)


def chat(c: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("model", "scripted")
    kw.setdefault("messages", [{"role": "user", "content": "go"}])
    return c.chat.completions.create(**kw)


def raw_post(server: ScriptedEngineServer, body: dict[str, Any],
             headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    url = urlparse(server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json", **(headers or {})})
    return conn.getresponse()


def collect_stream(stream: Any) -> dict[str, Any]:
    """Reassemble a streamed answer the way a client must: by tool-call index."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": {}, "arg_chunks": 0,
                           "roles": [], "finish": None, "usage": None, "chunks": 0}
    for chunk in stream:
        out["chunks"] += 1
        if chunk.usage is not None:
            assert chunk.choices == []
            out["usage"] = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            out["roles"].append(delta.role)
            out["content"] += delta.content or ""
            out["reasoning"] += getattr(delta, "reasoning_content", None) or ""
            for tc in delta.tool_calls or []:
                call = out["calls"].setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    call["id"] = tc.id
                if tc.function and tc.function.name:
                    call["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
                    out["arg_chunks"] += 1
            if choice.finish_reason:
                out["finish"] = choice.finish_reason
    return out


def test_streamed_tool_calls_reassemble_with_ids_and_usage_chunk() -> None:
    with ScriptedEngineServer([TWO_CALLS]) as server:
        got = collect_stream(chat(client(server), stream=True, tools=TOOLS,
                                  stream_options={"include_usage": True}))
    assert got["roles"][0] == "assistant"
    assert got["content"] == TWO_CALLS["content"]
    calls = [got["calls"][i] for i in sorted(got["calls"])]
    assert [(c["id"], c["name"]) for c in calls] == [("call_custom", "read_file"), ("call_0_1", "write_file")]
    assert [json.loads(c["arguments"]) for c in calls] == [t["arguments"] for t in TWO_CALLS["tool_calls"]]
    assert got["arg_chunks"] >= 8  # arguments arrive in many small pieces, like vLLM
    assert got["finish"] == "tool_calls"
    assert got["usage"].prompt_tokens > 0 and got["usage"].completion_tokens > 0


def test_reasoning_streams_as_reasoning_content_and_content_spans_chunks() -> None:
    step = {"reasoning": "The user wants a greeting, so I will greet them.", "content": "Hello there, how are you?"}
    with ScriptedEngineServer([step]) as server:
        got = collect_stream(chat(client(server), stream=True))
    assert got["reasoning"] == step["reasoning"]
    assert got["content"] == step["content"]
    assert got["chunks"] > 4 and got["finish"] == "stop"
    assert got["usage"] is None  # not asked for with include_usage


def test_non_streaming_sends_malformed_arguments_verbatim() -> None:
    step = {"tool_calls": [{"name": "read_file", "arguments": '{"path": "a.py"'}], "finish_reason": "length"}
    with ScriptedEngineServer([step]) as server:
        resp = chat(client(server), tools=TOOLS)
    msg = resp.choices[0].message
    assert msg.tool_calls[0].function.arguments == '{"path": "a.py"'
    assert msg.tool_calls[0].id == "call_0_0"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None and resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


def test_cached_tokens_grow_when_requests_share_a_prefix() -> None:
    history = [{"role": "system", "content": "You are keel. " * 200}, {"role": "user", "content": "fix it"}]
    with ScriptedEngineServer([{"content": "a"}, {"content": "b"}]) as server:
        c = client(server)
        first = chat(c, messages=history).usage
        second = chat(c, messages=[*history, {"role": "assistant", "content": "a"},
                                   {"role": "user", "content": "more"}]).usage
    assert first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens
    assert cached > 600 and cached % 16 == 0 and cached < second.prompt_tokens


def test_usage_override_and_no_usage() -> None:
    script = [{"content": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 7, "cached_tokens": 512}},
              {"content": "y", "usage": None}]
    with ScriptedEngineServer(script) as server:
        c = client(server)
        first = collect_stream(chat(c, stream=True, stream_options={"include_usage": True}))["usage"]
        second = collect_stream(chat(c, stream=True, stream_options={"include_usage": True}))
    assert (first.prompt_tokens, first.completion_tokens, first.total_tokens) == (1000, 7, 1007)
    assert first.prompt_tokens_details.cached_tokens == 512
    assert second["usage"] is None and second["content"] == "y"


def test_scripted_429_has_retry_after_and_the_next_request_gets_the_next_step() -> None:
    script = [{"error": {"status": 429, "retry_after": 1, "message": "slow down", "code": "rate_limited"}},
              {"content": "after the storm"}]
    with ScriptedEngineServer(script) as server:
        resp = raw_post(server, {"model": "scripted", "messages": []})
        assert resp.status == 429 and resp.getheader("Retry-After") == "1"
        assert json.loads(resp.read())["error"] == {"message": "slow down", "type": "rate_limit_error",
                                                    "code": "rate_limited"}
        assert chat(client(server)).choices[0].message.content == "after the storm"


def test_api_key_is_required_when_configured() -> None:
    with ScriptedEngineServer([{"content": "ok"}], api_key="sekrit") as server:
        with pytest.raises(openai.AuthenticationError):
            chat(client(server, key="wrong"))
        assert chat(client(server, key="sekrit")).choices[0].message.content == "ok"


def test_wrong_model_is_404_without_consuming_the_script() -> None:
    with ScriptedEngineServer([{"content": "ok"}], model="qwen3-coder") as server:
        c = client(server)
        with pytest.raises(openai.NotFoundError) as err:
            chat(c, model="gpt-4")
        assert "The model 'gpt-4' does not exist" in str(err.value)
        assert [m.id for m in c.models.list()] == ["qwen3-coder"]
        assert server.remaining == 1
        assert chat(c, model="qwen3-coder").choices[0].message.content == "ok"


def test_exhausted_script_answers_500_naming_the_count() -> None:
    with ScriptedEngineServer([{"content": "only"}]) as server:
        chat(client(server))
        resp = raw_post(server, {"model": "scripted", "messages": []})
        assert resp.status == 500
        assert "exhausted after 1 responses" in json.loads(resp.read())["error"]["message"]


def test_cut_after_chunks_drops_the_stream_without_done() -> None:
    script = [{"content": "this answer is long enough to need many chunks", "cut_after_chunks": 2}]
    with ScriptedEngineServer(script) as server:
        resp = raw_post(server, {"model": "scripted", "messages": [], "stream": True})
        assert resp.status == 200
        with pytest.raises(http.client.IncompleteRead) as err:
            resp.read()
    partial = err.value.partial.decode()
    assert partial.count("data: ") == 2 and "[DONE]" not in partial


def test_record_writes_one_line_per_request(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    with ScriptedEngineServer([{"content": "a"}, {"content": "b"}], record=record) as server:
        c = client(server)
        chat(c, messages=[{"role": "user", "content": "one"}])
        chat(c, messages=[{"role": "user", "content": "two"}], tools=TOOLS)
        assert [r["messages"][0]["content"] for r in server.requests] == ["one", "two"]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [r["messages"][0]["content"] for r in lines] == ["one", "two"]
    assert lines[1]["tools"] == TOOLS


def test_text_tool_call_forms_in_content() -> None:
    call = {"name": "read_file", "arguments": {"path": "a.py", "limit": 5}}
    script = [{"content": "Reading.", "tool_calls": [call], "text_tool_calls": "hermes"},
              {"tool_calls": [call], "text_tool_calls": "qwen3_coder"}]
    with ScriptedEngineServer(script) as server:
        c = client(server)
        hermes = chat(c).choices[0]
        qwen = chat(c).choices[0]
    assert hermes.message.content == ('Reading.\n<tool_call>\n{"name": "read_file", "arguments": '
                                      '{"path": "a.py", "limit": 5}}\n</tool_call>')
    assert hermes.message.tool_calls is None and hermes.finish_reason == "stop"
    assert qwen.message.content == ("<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"
                                    "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>")


def test_malformed_script_line_is_named(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "fine"}\n\n{"tool_calls": [{"arguments": {}}]}\n')
    with pytest.raises(ScriptError, match=r"s\.jsonl line 3: tool_calls\[0\]\.name must be a non-empty string"):
        load_script(script)
    script.write_text('{"content": "fine"}\n{"content": "oops",}\n')
    with pytest.raises(ScriptError, match=r"line 2: not valid JSON"):
        load_script(script)
    with pytest.raises(ScriptError, match=r"entry 1: unknown key\(s\) contnet"):
        load_script([{"contnet": "typo"}])


def test_cli_prints_url_first_and_serves_until_terminated(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"content": "from the cli"}) + "\n")
    record = tmp_path / "rec.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "keel.testing.server", str(script), "--model", "m",
                             "--record", str(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        c = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        assert c.chat.completions.create(model="m", messages=[]).choices[0].message.content == "from the cli"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert len(record.read_text().splitlines()) == 1

    script.write_text('{"content": 3}\n')
    bad = subprocess.run([sys.executable, "-m", "keel.testing.server", str(script)], capture_output=True,
                         text=True, env=env, timeout=30)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "line 1: content must be a string" in bad.stderr


# ---- in-process model ---------------------------------------------------------------------------

SAME_SCRIPT = [TWO_CALLS, {"reasoning": "done thinking", "content": "All done."}]


def test_in_process_model_returns_the_same_turns_as_the_server() -> None:
    messages = [{"role": "user", "content": "go"}]
    with ScriptedEngineServer(SAME_SCRIPT) as server:
        c = client(server)
        wire = [collect_stream(chat(c, messages=messages, tools=TOOLS, stream=True,
                                    stream_options={"include_usage": True})) for _ in SAME_SCRIPT]
    model = ScriptedModel(SAME_SCRIPT, record=True)
    deltas: list[tuple[str, str]] = []
    turns = [model.complete(messages, TOOLS, on_delta=lambda d: deltas.append((d.kind, d.text)))
             for _ in SAME_SCRIPT]
    for got, turn in zip(wire, turns, strict=True):
        assert turn.content == got["content"] and turn.reasoning == got["reasoning"]
        assert [(t.id, t.name, t.arguments) for t in turn.tool_calls] == \
            [(c["id"], c["name"], c["arguments"]) for c in got["calls"].values()]
        assert turn.finish_reason == got["finish"]
        assert (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.cached_tokens) == \
            (got["usage"].prompt_tokens, got["usage"].completion_tokens,
             got["usage"].prompt_tokens_details.cached_tokens)
    assert turns[0].tool_call_format == "structured" and turns[0].usage.estimated
    assert ("tool_call", "write_file") in deltas
    assert "".join(t for k, t in deltas if k == "reasoning") == "done thinking"
    assert "".join(t for k, t in deltas if k == "content") == TWO_CALLS["content"] + "All done."
    assert model.requests[0] == {"messages": messages, "tools": TOOLS} and model.remaining == 0
    with pytest.raises(EngineError, match="scripted model exhausted") as err:
        model.complete(messages, TOOLS)
    assert err.value.kind == "retries"


@pytest.mark.parametrize(("error", "kind"), [
    ({"status": 401}, "config"), ({"status": 404}, "config"),
    ({"status": 400, "code": "context_length_exceeded", "message": "too long"}, "context"),
    ({"status": 429, "retry_after": 2}, "retries"), ({"status": 503}, "retries")])
def test_in_process_errors_map_to_engine_error_kinds(error: dict[str, Any], kind: str) -> None:
    with pytest.raises(EngineError) as err:
        ScriptedModel([{"error": error}]).complete([], [])
    assert err.value.kind == kind and err.value.status == error["status"]


def test_in_process_cut_stream_and_usage_override() -> None:
    model = ScriptedModel([{"content": "cut me off please", "cut_after_chunks": 1},
                           {"content": "ok", "usage": {"prompt_tokens_details": {"cached_tokens": 32}}}])
    with pytest.raises(EngineError, match="cut after 1 chunks"):
        model.complete([], [])
    usage = model.complete([], []).usage
    assert usage.cached_tokens == 32 and not usage.estimated


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_in_process_recovers_text_tool_calls(fmt: str) -> None:
    step = {"content": "Reading.", "text_tool_calls": fmt,
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py", "limit": 5}}]}
    turn = ScriptedModel([step]).complete([{"role": "user", "content": "go"}], TOOLS)
    assert turn.tool_call_format == fmt
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("read_file", {"path": "a.py", "limit": 5})]
    assert turn.content == "Reading."


MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "tool"]),
                                           "content": st.text("ab\u00e9\"", max_size=6)}), max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(MESSAGES, min_size=1, max_size=4), st.data())
def test_prompt_meter_matches_whole_prompt_comparison(prompts: list[list[dict[str, str]]], data: Any) -> None:
    """Reusing earlier messages (same objects, some edited in place) must not change the numbers."""
    meter, previous = PromptMeter(), None
    history: list[dict[str, str]] = []
    for fresh in prompts:
        keep = data.draw(st.integers(0, len(history)))
        history = history[:keep] + fresh
        if history and data.draw(st.booleans()):
            history[0]["content"] = history[0]["content"] + "x"  # edited in place, as a compactor might
        text = serialize(history)
        expected_shared = 0 if previous is None else common_prefix_len(previous, text)
        assert meter.measure(history) == (len(text), expected_shared)
        previous = text
