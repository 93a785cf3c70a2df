"""Never the same reply twice (keel.loop.variety): a reply keel turned down, sent again, makes the
next request a variant (another temperature and seed). Pure tables for the decision, then real runs
of the runner against the scripted engine over HTTP on 127.0.0.1, reading the request bodies the
server received and the events the run logged."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import call

from keel.core.event_types import problems
from keel.core.events import EventBus
from keel.engine.client import OpenAICompatEngine
from keel.engine.runaway import GuardedEngine
from keel.engine.types import VARIANT_TEMPERATURE, variant_sampling
from keel.loop.runner import Runner
from keel.loop.variety import (
    CUT,
    INVALID,
    NORMAL,
    REFUSED,
    STRUCK,
    Variant,
    Variety,
    called_tools,
    fingerprint,
    next_variant,
    turned_down,
    variant_json,
)
from keel.testing.inprocess import ScriptedModel
from keel.testing.server import ScriptedEngineServer
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
from keel.tools.registry import ToolRegistry
from keel.tools.task import FINISH

# ---- the decision, pure ---------------------------------------------------------------------------


@pytest.mark.parametrize("facts, why", [
    (dict(cut=True, pushed_back=True, struck=True, invalid=True, progress=True), CUT),
    (dict(cut=False, pushed_back=True, struck=True, invalid=False, progress=False), REFUSED),
    (dict(cut=False, pushed_back=True, struck=False, invalid=False, progress=True), REFUSED),
    (dict(cut=False, pushed_back=False, struck=True, invalid=True, progress=False), STRUCK),
    (dict(cut=False, pushed_back=False, struck=False, invalid=True, progress=False), INVALID),
    (dict(cut=False, pushed_back=False, struck=True, invalid=True, progress=True), None),  # did something new too
    (dict(cut=False, pushed_back=False, struck=False, invalid=False, progress=False), None),
    (dict(cut=False, pushed_back=False, struck=False, invalid=False, progress=True), None),
])
def test_why_a_reply_was_turned_down(facts, why):
    assert turned_down(**facts) == why


A, B = fingerprint("same", [("echo", '{"text": "x"}')]), fingerprint("other", [])
C = fingerprint("third", [])


@pytest.mark.parametrize("print_, why_now, earlier, repeats, expected", [
    (A, REFUSED, {A: REFUSED}, 0, Variant(1, "repeats a refused reply")),
    (A, CUT, {A: CUT}, 3, Variant(4, "repeats a cut reply")),       # each further repeat: a new seed
    (A, STRUCK, {A: INVALID}, 1, Variant(2, "repeats an invalid reply")),  # named by the earlier refusal
    (A, REFUSED, {A: STRUCK}, 0, Variant(1, "repeats a reply struck as a repeat")),
    (A, None, {A: REFUSED}, 2, NORMAL),       # the same reply went through this time: nothing wasted
    (A, REFUSED, {B: REFUSED}, 2, NORMAL),    # turned down, but a first of its kind
    (A, REFUSED, {}, 0, NORMAL),
])
def test_next_variant(print_, why_now, earlier, repeats, expected):
    assert next_variant(print_, why_now, earlier, repeats) == expected


@pytest.mark.parametrize("called, offered, avoid", [
    (["change_file"], ["read_file", "change_file", "finish"], ("change_file",)),
    (["read_file", "grep", "read_file"], ["read_file", "grep", "finish"], ("grep", "read_file")),  # sorted, once
    (["finish"], ["read_file", "finish"], ("finish",)),   # a refused finish sent again: do something else
    (["read_file", "finish"], ["read_file", "finish"], ()),   # nothing left to call: avoid nothing
    ([], ["read_file", "finish"], ()),                     # a prose reply: only the sampling changes
])
def test_a_variant_avoids_the_tools_the_repeated_reply_called(called, offered, avoid):
    assert next_variant(A, REFUSED, {A: REFUSED}, 0, called, offered) == Variant(1, "repeats a refused reply", avoid)
    assert next_variant(A, None, {A: REFUSED}, 0, called, offered) == NORMAL   # went through: nothing avoided


@pytest.mark.parametrize("content, why, expected", [
    ('```json\n{"name": "change_file", "arguments": {"path": "leap.py", "change": "Replace the line', CUT,
     ["change_file"]),
    ("<tool_call>\n<function=edit_file>\n<parameter=path>\na.py", CUT, ["edit_file"]),   # Qwen3-Coder's form
    ('{"name": "rm_rf", "arguments": {}} {"name": "read_file"', CUT, ["read_file"]),      # only offered tools
    ('{"name": "read_file", "arguments": {"path": "x"}}', REFUSED, []),   # not cut: parsed calls only
    ("I will now " + "think " * 200 + '{"name": "read_file"', CUT, []),  # past the head: not a call's start
])
def test_the_tools_a_cut_reply_was_calling(content, why, expected):
    offered = ["read_file", "edit_file", "change_file", "finish"]
    assert called_tools([], content, why, offered) == expected
    assert called_tools(["finish"], content, why, offered) == ["finish"]   # parsed calls come first


def test_fingerprint_ignores_whitespace_and_argument_order_but_not_content_or_call_order():
    base = fingerprint("Fix it.\n", [("edit", '{"a": 1, "b": 2}'), ("read", '{"p": "x"}')])
    assert fingerprint("  Fix   it. ", [("edit", '{"b":2,"a":1}'), ("read", '{"p":"x"}')]) == base
    assert fingerprint("Fix it!", [("edit", '{"a": 1, "b": 2}'), ("read", '{"p": "x"}')]) != base
    assert fingerprint("Fix it.", [("read", '{"p": "x"}'), ("edit", '{"a": 1, "b": 2}')]) != base
    assert fingerprint("Fix it.", [("edit", '{"a": 1, "b": 3}'), ("read", '{"p": "x"}')]) != base
    assert fingerprint("", [("edit", "{not json")]) != fingerprint("", [("edit", "{not json!")])


def test_a_run_of_repeats_counts_up_and_a_good_reply_resets_to_normal():
    v = Variety()
    steps = [(A, REFUSED), (A, REFUSED), (A, REFUSED), (B, None), (A, REFUSED), (B, CUT), (B, CUT), (C, None)]
    got = [v.after_reply(p, why).n for p, why in steps]
    assert got == [0, 1, 2, 0, 3, 4, 5, 0]   # B went through once; sent again and cut, it is a repeat too


def test_a_reply_that_ran_and_is_then_sent_again_and_struck_gets_a_variant_at_once():
    """Measured on the 1.5B model (py-cli-json-output): a read that ran, then the same read twice,
    each struck as a repeat: the run hit the repetition limit (2 strikes) with no variant asked for."""
    v = Variety()
    assert v.after_reply(A, None) == NORMAL
    second = v.after_reply(A, STRUCK)
    assert (second.n, second.why) == (1, "repeats an earlier reply")
    assert v.after_reply(B, None) == NORMAL and v.after_reply(C, None) == NORMAL   # new replies: normal


@pytest.mark.parametrize("temperature, seed, variant, expected", [
    (0.0, 1234, 0, (0.0, 1234)),
    (0.0, None, 0, (0.0, None)),
    (0.0, 1234, 1, (VARIANT_TEMPERATURE, 1235)),
    (0.0, 1234, 3, (VARIANT_TEMPERATURE, 1237)),
    (0.9, 7, 2, (0.9, 9)),                     # already hotter: kept
    (0.0, None, 2, (VARIANT_TEMPERATURE, 2)),  # no seed configured: the variant number is one
])
def test_variant_sampling(temperature, seed, variant, expected):
    assert variant_sampling(temperature, seed, variant) == expected


def test_variant_json_is_absent_for_a_normal_request_and_unknown_without_sampling_settings():
    assert variant_json(NORMAL, 0.0, 1234) is None
    assert variant_json(Variant(2, "w"), 0.0, 10) == {"n": 2, "why": "w", "temperature": 0.5, "seed": 12}
    assert variant_json(Variant(1, "w"), None, None) == {"n": 1, "why": "w", "temperature": None, "seed": None}


# ---- real runs: the runner, the guarded HTTP client, the scripted server ---------------------------


class EchoArgs(ToolArgs):
    text: str


ECHO = Tool(ToolSpec("echo", "Echo text.", EchoArgs, ToolAnnotations(read_only=True)),
            lambda args, _ctx: ToolResult(ok=True, output=f"echo: {args.text}"))


def run_over_http(script: list[dict], tmp_path: Path, **engine_kw) -> tuple[object, list[dict], list[dict]]:
    """The run's result, the request bodies the server received, and the run's events."""
    events: list[dict] = []
    with ScriptedEngineServer(script) as server:
        engine = GuardedEngine(OpenAICompatEngine(server.base_url, "scripted", **engine_kw))
        runner = Runner(engine, ToolRegistry([ECHO, FINISH]), ToolContext(workspace=tmp_path),
                        EventBus("test", [events.append]))
        result = runner.run([{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}])
        bodies = server.requests
    assert [p for e in events for p in problems(e)] == []
    return result, bodies, events


def sampling(bodies: list[dict]) -> list[tuple[float, int | None]]:
    return [(b["temperature"], b.get("seed")) for b in bodies]


def variants(events: list[dict]) -> dict[int, dict]:
    return {e["step"]: e["variant"] for e in events if e["type"] == "model_call" and "variant" in e}


def test_a_refused_reply_sent_again_makes_the_next_request_a_variant(tmp_path):
    answer = {"content": "The answer is 42."}   # unattended, without looking: pushed back (did_nothing)
    script = [answer, answer, {"tool_calls": [call("echo", text="x")]},
              {"tool_calls": [call("finish", summary="Echoed x.")]}]
    result, bodies, events = run_over_http(script, tmp_path)
    assert result.stop_reason == "complete"
    assert sampling(bodies) == [(0.0, 1234), (0.0, 1234), (VARIANT_TEMPERATURE, 1235), (0.0, 1234)]
    assert variants(events) == {3: {"n": 1, "why": "repeats a refused reply",
                                    "temperature": VARIANT_TEMPERATURE, "seed": 1235}}
    # only the sampling differs: the same tools, tool_choice, max_tokens …; the history as usual
    rest = [{k: v for k, v in b.items() if k not in ("temperature", "seed", "messages")} for b in bodies]
    assert rest[2] == rest[1] == rest[3]
    assert bodies[2]["messages"][:3] == bodies[1]["messages"][:3]


def test_each_further_cut_repeat_gets_a_seed_of_its_own(tmp_path):
    runaway = {"content": "Let me think about it. " * 6, "finish_reason": "length"}
    script = [runaway, runaway, runaway, {"tool_calls": [call("echo", text="x")]},
              {"tool_calls": [call("finish", summary="Echoed x.")]}]
    result, bodies, events = run_over_http(script, tmp_path, seed=None)
    assert result.stop_reason == "complete"
    # no seed configured: normal requests send none, variants send their number
    assert sampling(bodies) == [(0.0, None), (0.0, None), (VARIANT_TEMPERATURE, 1), (VARIANT_TEMPERATURE, 2),
                                (0.0, None)]
    assert [(s, v["n"], v["why"]) for s, v in variants(events).items()] == \
        [(3, 1, "repeats a cut reply"), (4, 2, "repeats a cut reply")]


def test_an_invalid_call_sent_again_makes_the_next_request_a_variant(tmp_path):
    bad = {"tool_calls": [call("echo", txt="x")]}   # wrong argument name: not run
    script = [bad, bad, {"tool_calls": [call("echo", text="x")]}, {"tool_calls": [call("finish", summary="ok")]}]
    _, bodies, events = run_over_http(script, tmp_path, temperature=0.2, seed=5)
    assert sampling(bodies) == [(0.2, 5), (0.2, 5), (VARIANT_TEMPERATURE, 6), (0.2, 5)]
    assert variants(events)[3]["why"] == "repeats an invalid reply"


def test_a_call_sent_again_after_its_refusal_is_not_offered_to_the_variant_request(tmp_path):
    """The 1.5B model sent the same change_file of a protected test three times, the third at
    temperature 0.5: the variant request must not be able to send it at all."""
    bad = {"tool_calls": [call("echo", txt="x")]}   # refused (invalid arguments) twice
    script = [bad, bad, {"tool_calls": [call("finish", summary="Could not echo.")]}]
    result, bodies, events = run_over_http(script, tmp_path)
    assert result.stop_reason == "complete"
    offered = [[t["function"]["name"] for t in b["tools"]] for b in bodies]
    assert offered == [["echo", "finish"], ["echo", "finish"], ["finish"]]   # the variant: echo taken out
    assert bodies[2]["tool_choice"] == bodies[1]["tool_choice"]
    assert variants(events)[3] == {"n": 1, "why": "repeats an invalid reply", "temperature": VARIANT_TEMPERATURE,
                                   "seed": 1235, "avoid": ["echo"]}


def test_the_scripted_model_and_keel_log_see_what_a_variant_avoids(tmp_path):
    from keel.cli.log import event_line

    bad = {"tool_calls": [call("echo", txt="x")]}
    model = ScriptedModel([bad, bad, {"tool_calls": [call("finish", summary="ok")]}], record=True)
    events: list[dict] = []
    Runner(model, ToolRegistry([ECHO, FINISH]), ToolContext(workspace=tmp_path),
           EventBus("test", [events.append])).run([{"role": "user", "content": "task"}])
    assert [r.get("avoid") for r in model.requests] == [None, None, ["echo"]]
    line = event_line([e for e in events if e["type"] == "model_call"][2], events[0]["ts"])
    assert "variant 1 (temperature None, seed None, without echo)" in line


def test_a_runaway_call_cut_again_is_not_offered_to_the_variant_request(tmp_path):
    """py-write-tests on the 1.5B: the same runaway change_file was cut four times in a row, the last
    two at temperature 0.5: the tool a cut reply was calling is taken away too."""
    runaway = {"content": '{"name": "echo", "arguments": {"text": "' + "again and again, " * 400,
               "finish_reason": "length"}
    script = [runaway, runaway, {"tool_calls": [call("finish", summary="Could not echo.")]}]
    _, bodies, events = run_over_http(script, tmp_path)
    assert [[t["function"]["name"] for t in b["tools"]] for b in bodies] == \
        [["echo", "finish"], ["echo", "finish"], ["finish"]]
    assert variants(events)[3]["avoid"] == ["echo"] and variants(events)[3]["why"] == "repeats a cut reply"


def test_a_normal_run_sends_the_configured_sampling_every_time(tmp_path):
    script = [{"content": "The answer is 42."}, {"content": "The answer is 43."},  # refused twice, not the same
              {"tool_calls": [call("echo", text="b")]}, {"tool_calls": [call("finish", summary="Echoed b.")]}]
    result, bodies, events = run_over_http(script, tmp_path)
    assert result.stop_reason == "complete"
    assert sampling(bodies) == [(0.0, 1234)] * 4
    assert variants(events) == {}


def test_the_in_process_scripted_model_is_told_the_variant(tmp_path):
    answer = {"content": "The answer is 42."}
    model = ScriptedModel([answer, answer, {"tool_calls": [call("finish", summary="ok")]}], record=True)
    events: list[dict] = []
    Runner(model, ToolRegistry([ECHO, FINISH]), ToolContext(workspace=tmp_path),
           EventBus("test", [events.append])).run([{"role": "user", "content": "task"}])
    assert [r.get("variant", 0) for r in model.requests] == [0, 0, 1]
    assert variants(events) == {3: {"n": 1, "why": "repeats a refused reply", "temperature": None, "seed": None}}


def test_keel_log_shows_a_variant_request(tmp_path):
    from keel.cli.log import event_line

    answer = {"content": "The answer is 42."}
    _, _, events = run_over_http([answer, answer, {"tool_calls": [call("finish", summary="ok")]}], tmp_path)
    lines = [event_line(e, events[0]["ts"]) for e in events if e["type"] == "model_call"]
    assert "variant" not in lines[0] + lines[1]
    assert "variant 1 (temperature 0.5, seed 1235)" in lines[2]


# ---- the in-process engine on a real GGUF: only the grammar narrows --------------------------------

READ = {"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
LIST = {"type": "function", "function": {"name": "list_dir", "description": "List a directory.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
DONE = {"type": "function", "function": {"name": "finish", "description": "End the task.", "parameters": {
    "type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}}


@pytest.mark.timeout(600)   # a real model on a CPU
def test_a_local_variant_cannot_call_an_avoided_tool_and_keeps_the_cached_prompt():
    from conftest import smoke_model

    from keel.engine.local import LocalEngine

    engine = LocalEngine(smoke_model(), n_ctx=4096, max_tokens=64, prefix_cache=None)
    messages = [{"role": "system", "content": "You are a coding agent. Answer with one tool call."},
                {"role": "user", "content": "Read the file notes.txt and tell me what it says."}]
    try:
        first = engine.complete(messages, [READ, LIST, DONE])
        assert [c.name for c in first.tool_calls] == ["read_file"], first.content   # what it wants to do
        varied = engine.complete(messages, [READ, LIST, DONE], variant=1, avoid=("read_file",))
        assert varied.tool_calls and {c.name for c in varied.tool_calls} <= {"list_dir", "finish"}, varied.content
        # the prompt still shows every tool: all but its last token came from the cache
        assert varied.usage.cached_tokens == varied.usage.prompt_tokens - 1 == first.usage.prompt_tokens - 1
    finally:
        engine.close()
