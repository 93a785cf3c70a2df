"""The text renderer's lines: cut errors say they were cut, a huge write_file keeps its path, the
retry note appears only when answer text was shown, and cost is never invented."""

from __future__ import annotations

import io
import json

from keel.cli.render import TextRenderer, shorten
from keel.loop.result import RunResult


def _render(*events: dict, prices_known: bool = True) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    r = TextRenderer(out=out, err=err, prices_known=prices_known)
    for e in events:
        r(e)
    return out.getvalue(), err.getvalue()


def _tool(name: str, arguments: str, ok: bool, preview: str = "") -> dict:
    return {"type": "tool_call", "step": 1, "name": name, "arguments": arguments, "ok": ok, "repeat": 0,
            "result_preview": preview, "elapsed_ms": 0.0}


def _stop(cost: float = 0.0) -> dict:
    return {"type": "stop", "step": 1, "status": "complete", "reason": "complete", "cost_usd": cost,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0, "estimated": False}}


def test_a_cut_error_ends_with_an_ellipsis_at_a_word_boundary():
    tools = ", ".join(f"tool_number_{i}" for i in range(20))
    out, _ = _render(_tool("nope", "{}", False, f"Unknown tool 'nope'. Available tools: {tools}."))
    line = out.strip()
    assert "…" in line and line.endswith("(0 ms)")
    assert ", (0 ms)" not in line and "tool_number_1…" not in line.replace("tool_number_1,", "")
    assert shorten("short", 10) == "short"


def test_a_long_write_file_line_keeps_its_path():
    huge = json.dumps({"path": "src/pkg/module.py", "content": "x = 1\n" * 200_000})
    out, _ = _render(_tool("write_file", huge, True))
    assert "write_file src/pkg/module.py → ok" in out
    clipped = huge[:4000]  # the runner clips arguments in the event: no longer valid JSON
    out, _ = _render(_tool("write_file", clipped, True))
    assert "write_file src/pkg/module.py → ok" in out


def test_retry_note_only_when_text_was_shown():
    retry = {"type": "assistant_delta", "kind": "retry", "text": "the stream broke off; retrying in 0.5 s"}
    shown = {"type": "assistant_delta", "kind": "content", "text": "Let me"}
    _, err = _render(retry)
    assert "[retry]" in err and "dropped attempt" not in err
    _, err = _render(shown, retry)
    assert "text above this line was from the dropped attempt" in err
    model_call = {"type": "model_call"}
    _, err = _render(shown, model_call, retry)  # text of a finished turn is not from the dropped attempt
    assert "dropped attempt" not in err


def test_cost_is_printed_only_when_prices_are_known():
    out, _ = _render(_stop(0.0), prices_known=False)
    assert "cost unknown (no prices configured)" in out and "$" not in out
    out, _ = _render(_stop(0.0123))
    assert "$0.0123" in out


def test_json_result_leaves_cost_null_without_prices():
    result = RunResult(status="complete", stop_reason="complete", cost_usd=0.0, cost_known=False)
    assert result.to_json()["cost_usd"] is None
    assert RunResult(status="complete", stop_reason="complete", cost_known=True).to_json()["cost_usd"] == 0.0
    assert RunResult(status="error", stop_reason="config_error").to_json()["cost_usd"] is None   # no run: no prices


def test_an_argument_error_line_shows_the_reason_from_the_next_line():
    preview = "Invalid arguments for remember:\n  text: field required\nSchema: {...}"
    out, _ = _render(_tool("remember", "{}", False, preview))
    assert "Invalid arguments for remember: text: field required" in out
