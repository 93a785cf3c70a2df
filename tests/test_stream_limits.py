"""Large tool calls: the client's own SSE reading (framing variants, error events) and the cap on
one call's arguments, end to end through the real CLI and the scripted engine."""

from __future__ import annotations

import json

import pytest
from conftest import call

from keel.engine.sse import StreamErrorEvent, sse_events
from keel.testing.server import ScriptedEngineServer
from keel.tools.registry import ARGUMENTS_CAP_CHARS


def _chunk(text: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def test_sse_framing_variants_split_across_reads():
    body = (b": keep-alive comment\n\n"
            b"data: " + json.dumps(_chunk("a")).encode() + b"\r\n\r\n"
            b"event: message\ndata: " + json.dumps(_chunk("b")).encode() + b"\n\n"
            b"data: {\"choices\": [{\"index\": 0,\ndata: \"delta\": {\"content\": \"c\"}}]}\n\n"
            b"data: [DONE]\n\ndata: " + json.dumps(_chunk("never")).encode() + b"\n\n")
    for size in (1, 3, 7, len(body)):
        blocks = [body[i:i + size] for i in range(0, len(body), size)]
        texts = [e["choices"][0]["delta"]["content"] for e in sse_events(blocks)]
        assert texts == ["a", "b", "c"], size


def test_an_error_event_in_the_stream_is_raised():
    body = b'data: {"error": {"message": "maximum context length exceeded", "code": 400}}\n\n'
    with pytest.raises(StreamErrorEvent, match="maximum context length"):
        list(sse_events([body]))


def test_oversized_tool_arguments_get_a_clear_message_and_nothing_is_written(calc_repo, run_keel):
    content = "x = 1\n" * (ARGUMENTS_CAP_CHARS // 6 + 100)
    script = [{"tool_calls": [call("write_file", path="big.py", content=content)]}, {"content": "Gave up."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "write it", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model",
                     "scripted", "--output-format", "json", timeout=180)
        requests = server.requests
    tool_message = requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "-character limit for one call; nothing was run" in tool_message["content"]
    assert "write a large file in parts" in tool_message["content"]
    assert not (calc_repo / "big.py").exists()
    assert r.code in (0, 1), r.stderr
