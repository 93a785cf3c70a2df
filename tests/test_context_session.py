"""Whole sessions under a small window, over real HTTP to the scripted engine: compaction, the window
never exceeded, prefix reuse measured independently on the requests the server received, context-length
errors, the summarising call and its fallback, the circuit breaker."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CALC, assert_tool_messages_answer_calls, call

from keel.config import Config, ContextSettings
from keel.context.manager import ContextManager
from keel.context.record import sections
from keel.context.window import Window
from keel.core.events import EventBus
from keel.engine.client import OpenAICompatEngine
from keel.loop.limits import Limits
from keel.loop.runner import Runner
from keel.testing.server import ScriptedEngineServer
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.tools.registry import ToolRegistry
from keel.tools.task import FINISH

SERVER_CHARS_PER_TOKEN = 4  # how the scripted engine counts prompt tokens


def server_prompt_tokens(request) -> int:
    """The prompt as the scripted engine counts it (independent of keel's own estimate)."""
    def compact(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return -(-(len(compact(request["messages"])) + len(compact(request.get("tools") or []))) // SERVER_CHARS_PER_TOKEN)


def full_text(request) -> str:
    """tools then messages, compact JSON: the bytes a prefix cache sees, in keel's measuring order."""
    def compact(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return compact(request.get("tools") or []) + "".join(compact(m) for m in request["messages"])


def shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def is_record(message) -> bool:
    return message["role"] == "user" and str(message["content"]).startswith("[keel context record]")


class ObserveArgs(ToolArgs):
    n: int


def _observe(args: ObserveArgs, _ctx: ToolContext) -> ToolResult:
    return ToolResult(ok=True, output=f"observation {args.n}\n" + ("lorem ipsum dolor sit amet " * 24))


OBSERVE = Tool(ToolSpec("observe", "Return an observation.", ObserveArgs, ToolAnnotations(read_only=True)), _observe)


def runner_for(server, tmp_path, window, *, summarizer=None, settings=None, reply_cap=1000, max_steps=300,
               tools=(OBSERVE, FINISH)):
    events: list[dict] = []
    bus = EventBus("t", [events.append])
    engine = OpenAICompatEngine(server.base_url, "scripted", max_tokens=reply_cap, max_attempts=1)
    manager = ContextManager(bus, Window(window, "config"), reply_cap=reply_cap, workspace=tmp_path,
                             settings=settings or ContextSettings(), summarizer=summarizer or engine)
    runner = Runner(engine, ToolRegistry(list(tools)), ToolContext(workspace=tmp_path), bus,
                    limits=Limits(max_steps=max_steps), context=manager)
    return runner, events


def observe_steps(n, start=0):
    return [{"content": f"looking at {i}", "tool_calls": [call("observe", n=i)]} for i in range(start, start + n)]


FINISH_STEP = {"tool_calls": [call("finish", summary="observed everything")]}
MESSAGES = [{"role": "system", "content": "You observe."}, {"role": "user", "content": "observe 0..99"}]


# ---- the CLI: tool outputs several times the window -------------------------------------------


def test_cli_session_over_several_windows_compacts_finishes_and_never_exceeds_the_window(
        calc_repo, run_keel, keel_env, tmp_path):
    window = 8192
    for i in range(16):  # each read is ~1.9k tokens: sixteen of them are over three windows
        (calc_repo / f"data{i}.txt").write_text("".join(f"record {i}.{j}: some measured value\n" for j in range(190)))
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[context]\nsummarizer = "deterministic"\n')
    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"tool_calls": [call("write_file", path="NOTES.md", content="add() now adds.\n")]}]
    script += [{"tool_calls": [call("read_file", path=f"data{i}.txt")]} for i in range(16)]
    script += [{"tool_calls": [call("run_shell", command="python -m pytest -q")]},
               {"tool_calls": [call("finish", summary="Fixed add(); pytest passes.")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix add() in calc.py, read the data files first", "--cwd", str(calc_repo),
                     "--base-url", server.base_url, "--model", "scripted", "--output-format", "json",
                     "--context-window", str(window), "--verify", "off")
        requests = server.requests
    assert r.code == 0, r.stderr + r.stdout
    assert r.result["stop_reason"] == "complete"
    assert (calc_repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    events = r.events()
    sent = [server_prompt_tokens(q) for q in requests]
    longest: dict[str, int] = {}
    for m in (m for q in requests for m in q["messages"] if m["role"] == "tool"):
        longest[m["tool_call_id"]] = max(longest.get(m["tool_call_id"], 0), len(m["content"]))
    assert sum(longest.values()) // SERVER_CHARS_PER_TOKEN > 3 * window  # what the tools returned
    for request, tokens in zip(requests, sent, strict=True):
        assert request["max_tokens"] == window // 4       # the reply cap shrank with the small window
        assert tokens + request["max_tokens"] <= window, (tokens, request["max_tokens"])
        assert_tool_messages_answer_calls(request)
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions and all(e["ok"] for e in compactions)
    assert all(e["tokens_after"] < e["tokens_before"] for e in compactions)
    # the stable prefix: system prompt, task message and tools byte-identical on every request
    assert all(q["messages"][:2] == requests[0]["messages"][:2] and q["tools"] == requests[0]["tools"]
               for q in requests)
    # every record names every file modified before it, with its current content; the model saw it
    for compaction in compactions:
        files = sections(compaction["record"])["## Files modified"]
        assert "- calc.py — current content:" in files and "return a + b" in files
        assert "- NOTES.md — current content:\n```\nadd() now adds.\n" in files
        assert any(m["content"] == compaction["record"] for q in requests for m in q["messages"])
    breaks = [e for e in events if e["type"] == "cache_break"]
    assert breaks and {e["cause"] for e in breaks} == {"compaction"}
    assert all(e["index"] == 2 for e in breaks)       # right after the stable prefix
    calls = [e for e in events if e["type"] == "model_call"]
    assert calls[0]["prefix_reuse"] is None and all(0 <= e["prefix_reuse"] <= 1 for e in calls[1:])
    window_event = next(e for e in events if e["type"] == "context_window")
    assert (window_event["tokens"], window_event["source"]) == (window, "config")


def test_record_names_every_modified_file_after_edits_fold(tmp_path):
    """Files are modified early, then long outputs fold them out of the verbatim tail."""
    script = [{"tool_calls": [call("write_file", path=f"src/m{i}.py", content=f"X = {i}\n")]} for i in range(3)]
    script += observe_steps(40) + [FINISH_STEP, {"content": "done"}]

    def _write(args, ctx):
        path = tmp_path / args.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args.content)
        return ToolResult(ok=True, output=f"wrote {args.path}", files_changed=[args.path])

    class WriteArgs(ToolArgs):
        path: str
        content: str

    write = Tool(ToolSpec("write_file", "Write a file.", WriteArgs), _write)
    with ScriptedEngineServer(script) as server:
        runner, events = runner_for(server, tmp_path, 6000, settings=ContextSettings(summarizer="deterministic"),
                                    tools=(OBSERVE, write, FINISH))
        runner.run(list(MESSAGES))
        requests = server.requests
    compactions = [e for e in events if e["type"] == "compaction"]
    assert len(compactions) >= 2
    for event in compactions:
        files = sections(event["record"])["## Files modified"]
        for i in range(3):
            assert f"src/m{i}.py — current content:\n```\nX = {i}\n" in files
    assert all(server_prompt_tokens(q) + 1000 <= 6000 for q in requests)


# ---- prefix reuse over a 100-step session ------------------------------------------------------


def test_hundred_steps_one_compaction_reuse_at_least_95_percent_and_100_off_compaction(tmp_path):
    summary = {"content": "## Approaches ruled out\n- none\n## Next step\n- keep observing"}
    with ScriptedEngineServer(observe_steps(100) + [FINISH_STEP]) as server, \
            ScriptedEngineServer([summary]) as summarizer_server:
        summarizer = OpenAICompatEngine(summarizer_server.base_url, "scripted", max_attempts=1)
        runner, events = runner_for(server, tmp_path, 20_000, summarizer=summarizer,
                                    settings=ContextSettings(compact_to=0.3))
        result = runner.run(list(MESSAGES))
        requests = server.requests
        summary_requests = summarizer_server.requests
    assert result.stop_reason == "complete" and result.steps == 101
    compactions = [e for e in events if e["type"] == "compaction"]
    assert len(compactions) == 1 and compactions[0]["summarizer"] == "model"
    assert "keep observing" in compactions[0]["record"]
    compacted_at = _index_of_compaction(requests)
    # the summarising request is the history as it stood (a cached prefix) plus one instruction, same tools
    before = requests[compacted_at - 1]["messages"]
    assert summary_requests[0]["tools"] == requests[0]["tools"]
    assert summary_requests[0]["messages"][:len(before)] == before
    assert len(summary_requests[0]["messages"]) == len(before) + 3  # + the reply, its tool answer, the ask
    texts = [full_text(q) for q in requests]
    shared = base = 0
    for i in range(1, len(texts)):
        s = shared_prefix(texts[i - 1], texts[i])
        shared, base = shared + s, base + len(texts[i - 1])
        if i != compacted_at:
            assert s == len(texts[i - 1]), f"request {i} did not repeat request {i - 1} whole"
    assert shared / base >= 0.95, shared / base
    # keel's own measure agrees with the independent one
    assert abs(runner.context.prefix_reuse - shared / base) < 0.01
    reuse = [e["prefix_reuse"] for e in events if e["type"] == "model_call"]
    assert [i for i, x in enumerate(reuse) if x is not None and x < 1.0] == [compacted_at]
    for q in requests:
        assert_tool_messages_answer_calls(q)


def _index_of_compaction(requests) -> int:
    return next(i for i, q in enumerate(requests) if any(is_record(m) for m in q["messages"]))


# ---- the engine says the request did not fit ---------------------------------------------------


CONTEXT_ERROR = {"error": {"status": 400, "code": "context_length_exceeded",
                           "message": "This model's maximum context length is 4096 tokens."}}


def test_context_length_error_compacts_with_a_summary_and_retries_once(tmp_path):
    summary = {"content": "## Approaches ruled out\n- observing 3 twice: same output\n## Next step\n- finish"}
    script = observe_steps(8) + [CONTEXT_ERROR, summary] + [FINISH_STEP]
    with ScriptedEngineServer(script) as server:
        runner, events = runner_for(server, tmp_path, 32_768, settings=ContextSettings(keep_last=2))
        result = runner.run(list(MESSAGES))
        requests = server.requests
    assert result.stop_reason == "complete", result
    failed, summary_request, retried = requests[8], requests[9], requests[10]
    # the history plus the instruction, its oldest outputs folded: it must fit what the failure taught
    assert len(summary_request["messages"]) == len(failed["messages"]) + 1
    assert summary_request["messages"][-2] == failed["messages"][-1]
    assert server_prompt_tokens(summary_request) < server_prompt_tokens(failed)
    assert "Do not call any tool" in summary_request["messages"][-1]["content"]
    assert server_prompt_tokens(retried) < server_prompt_tokens(failed)
    compaction = next(e for e in events if e["type"] == "compaction")
    assert (compaction["trigger"], compaction["summarizer"]) == ("context_error", "model")
    assert "observing 3 twice: same output" in compaction["record"]
    assert retried["messages"][2]["content"] == compaction["record"]
    # the summarising call counts in the run's usage (token limits and cost see it)
    assert compaction["summary_tokens"] > 0
    assert result.usage.prompt_tokens == sum(server_prompt_tokens(q) for i, q in enumerate(requests) if i != 8)
    # what the engine taught: the window is smaller than configured
    assert runner.context.prompt_limit < 32_768 - 1000
    assert_tool_messages_answer_calls(retried)


def test_a_second_context_error_in_a_row_stops_with_limit_context(tmp_path):
    script = observe_steps(4) + [CONTEXT_ERROR, {"content": "## Next step\n- retry"}, CONTEXT_ERROR]
    with ScriptedEngineServer(script) as server:
        runner, events = runner_for(server, tmp_path, 32_768, settings=ContextSettings(keep_last=2))
        result = runner.run(list(MESSAGES))
        assert server.remaining == 0
    assert result.stop_reason == "limit:context"
    assert [e["trigger"] for e in events if e["type"] == "compaction"] == ["context_error"]


def test_failing_summary_falls_back_to_keels_own_record(tmp_path):
    broken = [{"error": {"status": 500, "message": "summarizer is down"}}]
    with ScriptedEngineServer(observe_steps(60) + [FINISH_STEP]) as server, ScriptedEngineServer(broken) as down:
        summarizer = OpenAICompatEngine(down.base_url, "scripted", max_attempts=1)
        runner, events = runner_for(server, tmp_path, 12_000, summarizer=summarizer)
        result = runner.run(list(MESSAGES))
        requests = server.requests
    assert result.stop_reason == "complete"
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions[0]["summarizer"] == "deterministic" and "summarizer is down" in compactions[0]["summary_error"]
    assert "## Folded steps" in compactions[0]["record"] and all(e["ok"] for e in compactions)
    assert all(server_prompt_tokens(q) + 1000 <= 12_000 for q in requests)


# ---- what cannot fit is never sent ---------------------------------------------------------------


def test_a_prefix_larger_than_the_window_is_never_sent(tmp_path):
    with ScriptedEngineServer([FINISH_STEP]) as server:
        runner, events = runner_for(server, tmp_path, 2048, reply_cap=512)
        huge = [{"role": "system", "content": "rule " * 3000}, MESSAGES[1]]
        result = runner.run(huge)
        assert server.requests == []
    assert result.stop_reason == "limit:context"
    assert "does not fit the context window" in (result.error or "")


def test_circuit_breaker_stops_compactions_that_keep_failing(tmp_path):
    # a prefix between the trigger (80%) and the window minus the reply cap: every request is over the
    # trigger, no compaction can help, each is still sendable; after three failures the run stops
    system = {"role": "system", "content": "rule " * 6480}  # ~8100 tokens of a 10000-token window
    script = observe_steps(10) + [FINISH_STEP]
    with ScriptedEngineServer(script) as server:
        runner, events = runner_for(server, tmp_path, 10_000, settings=ContextSettings(keep_last=2))
        result = runner.run([system, MESSAGES[1]])
        requests = server.requests
    assert result.stop_reason == "limit:context"
    compactions = [e for e in events if e["type"] == "compaction"]
    assert [e["ok"] for e in compactions] == [False, False, False, False]
    assert compactions[0]["error"] == "nothing left to fold"
    assert compactions[-1]["trigger"] == "circuit_breaker"
    assert 3 <= len(requests) < 10
    assert all(server_prompt_tokens(q) + 1000 <= 10_000 for q in requests)


def test_explicit_compaction_through_the_runner(tmp_path):
    with ScriptedEngineServer(observe_steps(12) + [FINISH_STEP, {"content": "## Next step\n- none"}]) as server:
        runner, events = runner_for(server, tmp_path, 32_768)
        messages = list(MESSAGES)
        runner.run(messages)
        before = len(messages)
        event = runner.compact(messages)
    assert event is not None and event["trigger"] == "requested" and event["summarizer"] == "model"
    assert len(messages) < before and messages[:2] == MESSAGES and is_record(messages[2])
    assert_tool_messages_answer_calls({"messages": messages})
    assert "## Next step" not in sections(event["record"])  # the model's headings sit inside keel's section
    assert "- none" in event["record"]


def test_a_result_folded_away_may_be_asked_for_again_without_a_repeat_refusal(tmp_path):
    again = {"tool_calls": [call("observe", n=0)]}
    script = observe_steps(30) + [again, again, FINISH_STEP]
    with ScriptedEngineServer(script) as server:
        runner, events = runner_for(server, tmp_path, 8000, settings=ContextSettings(summarizer="deterministic"))
        result = runner.run(list(MESSAGES))
        last = server.requests[-1]["messages"]
    assert any(e["type"] == "compaction" for e in events)
    answers = [m["content"] for m in last if m["role"] == "tool"][-2:]
    assert answers[0].startswith("observation 0")            # asked again after it was folded: answered
    assert answers[1].startswith("This ran again: you already called observe")  # twice in a row: still a repeat
    assert result.stop_reason == "complete"


def test_agent_compact_folds_a_finished_runs_history(calc_repo):
    from keel.agent import Agent
    from keel.testing.inprocess import ScriptedModel

    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [call("read_file", path="test_calc.py")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"tool_calls": [call("run_shell", command="python -m pytest -q")]},
              {"content": "Fixed add(); the test passes."},
              {"content": "## Next step\n- nothing: the task is done"}]
    config = Config.model_validate({"verify": {"mode": "off"}, "engine": {"context_window": 32768},
                                    "context": {"keep_last": 2}})
    agent = Agent(ScriptedModel(script), workspace=calc_repo, config=config, log_path=False)
    messages = agent.initial_messages("fix add()")
    result = agent.continue_run(messages, task="fix add()")
    assert result.stop_reason == "complete"
    event = agent.compact(messages)
    assert event["trigger"] == "requested" and event["ok"] and event["summarizer"] == "model"
    # prefix, record, then the last turns verbatim: the test run with its answer, and the final reply
    assert is_record(messages[2]) and [m["role"] for m in messages[3:]] == ["assistant", "tool", "assistant"]
    assert_tool_messages_answer_calls({"messages": messages})
    files = sections(event["record"])["## Files modified"]
    assert "calc.py — current content:" in files and "return a + b" in files
    assert "nothing: the task is done" in event["record"]


def test_text_output_says_when_the_history_was_compacted():
    import io

    from keel.cli.render import TextRenderer

    out, err = io.StringIO(), io.StringIO()
    render = TextRenderer(out=out, err=err)
    render({"type": "compaction", "step": 7, "trigger": "threshold", "ok": True, "tokens_before": 26000,
            "tokens_after": 9100, "folded": {"messages": 14}, "summarizer": "model"})
    render({"type": "compaction", "step": 9, "trigger": "circuit_breaker", "ok": False, "tokens_before": 1,
            "tokens_after": 1, "error": "3 compactions in a row did not get the history under the trigger"})
    lines = err.getvalue().splitlines()
    assert lines[0] == ("[step 7] context compacted (threshold): 26,000 → 9,100 tokens, 14 messages folded, "
                        "summary by the model")
    assert "did not free enough room (3 compactions in a row" in lines[1]
    assert out.getvalue() == ""  # stdout carries only the answer
