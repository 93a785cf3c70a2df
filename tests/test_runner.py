"""The runner in process: invariants of the message history and of the stop rules, with the
in-process scripted model (the same script format as the HTTP server) and small real tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_tool_messages_answer_calls, call

from keel.core.events import EventBus
from keel.loop.limits import Limits
from keel.loop.runner import Runner
from keel.testing.inprocess import ScriptedModel
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.tools.registry import ToolRegistry
from keel.tools.task import FINISH, TODO_WRITE


class EchoArgs(ToolArgs):
    text: str


def _echo(args: EchoArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(ok=True, output=f"echo: {args.text}")


def _boom(_args: EchoArgs, _ctx: ToolContext) -> ToolResult:
    raise RuntimeError("disk on fire")


def _interrupt(_args: EchoArgs, _ctx: ToolContext) -> ToolResult:
    raise KeyboardInterrupt


ECHO = Tool(ToolSpec("echo", "Echo text.", EchoArgs, ToolAnnotations(read_only=True)), _echo)
BOOM = Tool(ToolSpec("boom", "Always fails.", EchoArgs), _boom)
HALT = Tool(ToolSpec("halt", "Simulates Ctrl-C.", EchoArgs), _interrupt)


def run(script, tmp_path: Path, *, limits=None, attended=False):
    model = ScriptedModel(script, record=True)
    events: list[dict] = []
    bus = EventBus("test", [events.append])
    runner = Runner(model, ToolRegistry([ECHO, BOOM, HALT, TODO_WRITE, FINISH]), ToolContext(workspace=tmp_path),
                    bus, limits=limits or Limits(), attended=attended)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    result = runner.run(messages)
    return result, model.requests, events, messages


def test_several_calls_in_one_turn_each_get_one_answer_in_order(tmp_path):
    script = [{"tool_calls": [call("echo", text="a"), call("echo", text="b"), call("boom", text="c")]},
              {"content": "all done"}]
    result, requests, _, messages = run(script, tmp_path)
    assert result.stop_reason == "complete"
    assert_tool_messages_answer_calls(requests[1])
    tool_texts = [m["content"] for m in messages if m["role"] == "tool"]
    assert tool_texts[:2] == ["echo: a", "echo: b"]
    assert "boom failed: RuntimeError: disk on fire" in tool_texts[2]  # a raising tool is an answer too


def test_assistant_message_is_written_back_as_received(tmp_path):
    script = [{"content": "thinking aloud", "reasoning": "secret chain", "tool_calls": [call("echo", text="x")]},
              {"content": "done"}]
    _, requests, _, _ = run(script, tmp_path)
    assistant = requests[1]["messages"][2]
    assert assistant["content"] == "thinking aloud"
    assert assistant["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"text": "x"}'}
    assert "secret chain" not in str(requests[1])  # reasoning is shown and logged, never resent


def test_tool_failures_never_stop_the_run(tmp_path):
    script = [{"tool_calls": [call("boom", text="1")]}, {"tool_calls": [call("boom", text="2")]},
              {"tool_calls": [call("echo", text="ok")]}, {"content": "recovered"}]
    result, *_ = run(script, tmp_path)
    assert result.stop_reason == "complete" and result.steps == 4


def test_interrupt_mid_tools_still_answers_every_call(tmp_path):
    script = [{"tool_calls": [call("echo", text="a"), call("halt", text="b"), call("echo", text="c")]}]
    result, _, events, messages = run(script, tmp_path)
    assert result.stop_reason == "interrupted" and result.exit_code == 130
    tools = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_0_0", "call_0_1", "call_0_2"]
    assert "Interrupted" in tools[1]["content"] and "Interrupted" in tools[2]["content"]
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "interrupted"


def test_step_limit_stops_with_reason(tmp_path):
    script = [{"tool_calls": [call("echo", text=str(i))]} for i in range(10)]
    result, requests, *_ = run(script, tmp_path, limits=Limits(max_steps=3))
    assert (result.status, result.stop_reason, result.steps) == ("incomplete", "limit:steps", 3)
    assert len(requests) == 3


def test_no_progress_after_repeated_pushbacks(tmp_path):
    script = [{"tool_calls": [call("echo", text="x")]}] + [{"content": "Which file should I edit?"}] * 6
    result, requests, events, _ = run(script, tmp_path, limits=Limits(max_pushbacks_without_progress=3))
    assert result.stop_reason == "limit:no_progress"
    kinds = [e["pushback_kind"] for e in events if e["type"] == "decision" and e["pushback_kind"]]
    assert kinds == ["question_unattended"] * 3
    # wording sharpens as the same kind repeats
    texts = [r["messages"][-1]["content"] for r in requests[2:5]]
    assert len(set(texts)) == 3


def test_todos_block_completion_until_done(tmp_path):
    todos = [{"content": "fix", "status": "in_progress"}, {"content": "test", "status": "pending"}]
    done = [{"content": "fix", "status": "done"}, {"content": "test", "status": "done"}]
    script = [{"tool_calls": [call("todo_write", todos=todos)]},
              {"tool_calls": [call("finish", summary="done")]},
              {"tool_calls": [call("todo_write", todos=done)]},
              {"tool_calls": [call("finish", summary="done")]}]
    result, requests, *_ = run(script, tmp_path)
    assert result.stop_reason == "complete" and result.summary == "done"
    assert "- [pending] test" in requests[2]["messages"][-1]["content"]


def test_question_attended_stops_for_the_user(tmp_path):
    result, *_ = run([{"tool_calls": [call("echo", text="x")]}, {"content": "Which branch?"}], tmp_path,
                     attended=True)
    assert (result.status, result.stop_reason) == ("incomplete", "needs_user")


def test_engine_retries_exhausted_maps_to_limit(tmp_path):
    result, *_ = run([{"tool_calls": [call("echo", text="x")]}, {"error": {"status": 503, "message": "overloaded"}}],
                     tmp_path)
    assert result.stop_reason == "limit:retries"
    assert "overloaded" in (result.error or "")  # the user sees why, not just that it stopped


def test_context_error_maps_to_limit(tmp_path):
    err = {"error": {"status": 400, "code": "context_length_exceeded", "message": "too long"}}
    result, *_ = run([err], tmp_path)
    assert result.stop_reason == "limit:context"


def test_usage_is_summed_and_costed(tmp_path):
    from keel.loop.limits import Prices

    script = [{"tool_calls": [call("echo", text="x")],
               "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 800}},
              {"content": "done", "usage": {"prompt_tokens": 1200, "completion_tokens": 5, "cached_tokens": 1000}}]
    model = ScriptedModel(script)
    runner = Runner(model, ToolRegistry([ECHO]), ToolContext(workspace=tmp_path), EventBus("t"),
                    prices=Prices(input_per_m=1.0, cached_input_per_m=0.1, output_per_m=2.0))
    result = runner.run([{"role": "user", "content": "t"}])
    assert (result.usage.prompt_tokens, result.usage.cached_tokens, result.usage.completion_tokens) == (2200, 1800, 15)
    assert result.cost_usd == pytest.approx((400 * 1.0 + 1800 * 0.1 + 15 * 2.0) / 1e6)


def test_token_budget_stops_the_run(tmp_path):
    script = [{"tool_calls": [call("echo", text=str(i))], "usage": {"prompt_tokens": 600, "completion_tokens": 1}}
              for i in range(5)]
    result, *_ = run(script, tmp_path, limits=Limits(max_tokens=1000))
    assert result.stop_reason == "limit:tokens" and result.steps == 2


def test_read_only_calls_in_one_response_run_in_parallel_results_in_call_order(tmp_path):
    import threading

    barrier = threading.Barrier(3, timeout=5)

    def meet(args: EchoArgs, _ctx: ToolContext) -> ToolResult:
        barrier.wait()  # only passes when all three calls are running at the same time
        return ToolResult(ok=True, output=f"met {args.text}")

    meet_tool = Tool(ToolSpec("meet", "Wait for the others.", EchoArgs, ToolAnnotations(read_only=True)), meet)
    script = [{"tool_calls": [call("meet", text="1"), call("meet", text="2"), call("meet", text="3")]},
              {"content": "done"}]
    runner = Runner(ScriptedModel(script), ToolRegistry([meet_tool]), ToolContext(workspace=tmp_path),
                    EventBus("t"))
    messages = [{"role": "user", "content": "t"}]
    result = runner.run(messages)
    assert result.stop_reason == "complete"
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["met 1", "met 2", "met 3"]


def test_writes_are_never_run_in_parallel(tmp_path):
    active, peak = [0], [0]

    def write(args: EchoArgs, _ctx: ToolContext) -> ToolResult:
        import time

        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        active[0] -= 1
        return ToolResult(ok=True, output=args.text)

    tool = Tool(ToolSpec("put", "Write.", EchoArgs, ToolAnnotations(read_only=False)), write)
    script = [{"tool_calls": [call("put", text=str(i)) for i in range(4)]}, {"content": "done"}]
    Runner(ScriptedModel(script), ToolRegistry([tool]), ToolContext(workspace=tmp_path), EventBus("t")).run(
        [{"role": "user", "content": "t"}])
    assert peak[0] == 1


def test_a_model_stuck_on_broken_calls_stops_with_no_progress(tmp_path):
    script = [{"tool_calls": [{"name": "echo", "arguments": '{"text": ' + str(i)}]} for i in range(20)]
    result, requests, *_ = run(script, tmp_path)
    assert result.stop_reason == "limit:no_progress" and result.steps == 6
    assert "not valid JSON" in requests[1]["messages"][-1]["content"]  # each one was fed back first


def test_a_call_written_as_unparseable_text_is_not_taken_as_the_answer(tmp_path):
    script = [{"tool_calls": [call("echo", text="x")]},
              {"content": "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"y\"</tool_call>"},
              {"tool_calls": [call("echo", text="y")]},
              {"content": "echoed twice"}]
    result, requests, events, _ = run(script, tmp_path)
    assert result.stop_reason == "complete" and result.summary == "echoed twice"


def test_llama_cpp_functions_prefix_form_is_recovered(tmp_path):
    script = [{"content": "functions.echo:\n{\"text\": \"hi\"}"}, {"content": "said hi"}]
    result, _, events, messages = run(script, tmp_path)
    assert result.stop_reason == "complete"
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["echo: hi"]
    assert [e["tool_call_format"] for e in events if e["type"] == "model_call"][0] == "functions"
