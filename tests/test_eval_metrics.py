"""Per-run metrics from events, aggregates, false done, and `compare` — pure functions over dicts."""

from __future__ import annotations

from keel.eval.compare import compare, format_compare
from keel.eval.metrics import aggregate, outcome, run_metrics
from keel.eval.peer import trajectory_events


def model_call(step, calls, fmt="structured", prompt=1000, cached=0, completion=50, **extra):
    return {"type": "model_call", "step": step, "tool_calls": calls, "tool_call_format": fmt if calls else "",
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached}, **extra}


def tool_call(step, name="read_file", invalid=False):
    return {"type": "tool_call", "step": step, "name": name, "ok": not invalid, "invalid": invalid}


def pushback(step, kind):
    return {"type": "decision", "step": step, "verdict": "continue", "reason": kind, "pushback_kind": kind}


EVENTS = [
    {"type": "session_start"},
    model_call(1, 1, prompt=1000), tool_call(1),
    model_call(2, 0, prompt=1200, cached=992), pushback(2, "malformed_call"),           # idle: no call
    model_call(3, 1, prompt=1400, cached=1184), tool_call(3, "edit_file", invalid=True),  # idle: invalid only
    pushback(3, "unverified"),
    model_call(4, 2, fmt="hermes", prompt=1600, cached=1392), tool_call(4, "edit_file"), tool_call(4, "run_shell"),
    model_call(5, 1, prompt=1800, cached=1584), tool_call(5, "finish"),
    {"type": "verification", "step": 5}, pushback(5, "verification_failed"),
    model_call(6, 1, prompt=2000, cached=1776), tool_call(6, "finish"), {"type": "verification", "step": 6},
]


def test_run_metrics_counts_idle_turns_recovered_and_invalid_calls_pushbacks_and_rounds():
    result = {"steps": 6, "usage": {"prompt_tokens": 9000, "completion_tokens": 300, "cached_tokens": 6928},
              "duration_s": 12.5, "cost_usd": None}
    m = run_metrics(result, EVENTS)
    assert m["steps"] == 6 and m["tool_calls"] == 6
    assert m["idle_turns"] == 2          # step 2 (no call) and step 3 (only an invalid call)
    assert m["invalid_calls"] == 1 and m["recovered_calls"] == 2 and m["malformed_turns"] == 1
    assert m["pushbacks"] == {"malformed_call": 1, "unverified": 1, "verification_failed": 1}
    assert m["verification_rounds"] == 2
    assert (m["prompt_tokens"], m["cached_tokens"], m["cached_share"]) == (9000, 6928, 0.7698)
    assert m["prefix_reuse"] is None     # no model_call carries it


def test_tokens_fall_back_to_the_event_log_and_prefix_reuse_is_averaged_when_present():
    events = [model_call(1, 1, prompt=100, cached=0, prefix_reuse=0.0), tool_call(1),
              model_call(2, 1, prompt=200, cached=96, prefix_reuse=0.5), tool_call(2)]
    m = run_metrics(None, events)        # a crashed run leaves no result object
    assert (m["steps"], m["prompt_tokens"], m["cached_tokens"], m["prefix_reuse"]) == (2, 300, 96, 0.25)


def test_false_done_is_a_complete_whose_acceptance_fails():
    assert outcome("complete", passed=False) == "false_done"
    assert outcome("complete", passed=True) == "success"
    assert outcome("incomplete", passed=False) == "failed"
    # the acceptance passes but the run did not claim it (e.g. limit:retries): not a success (issue 22)
    assert outcome("incomplete", passed=True) == "done_unclaimed"
    assert outcome(None, passed=False, error="keel crashed") == "error"


def record(case, word, repeat=1, agent="keel", steps=4, wall=10.0, stop="complete"):
    return {"key": f"{case}__{agent}__r{repeat}", "case": {"id": case}, "agent": agent, "repeat": repeat,
            "outcome": word, "stop_reason": stop, "metrics": {"steps": steps, "wall_s": wall, "idle_turns": 1,
                                                              "prompt_tokens": 1000, "cached_tokens": 500}}


def test_aggregate_keeps_false_done_apart_from_failures():
    agg = aggregate([record("a", "success"), record("b", "false_done"), record("c", "failed", stop="limit:steps"),
                     record("d", "error", stop=None)])
    assert (agg["runs"], agg["success"], agg["false_done"], agg["failed"], agg["errors"]) == (4, 1, 1, 1, 1)
    assert agg["success_rate"] == 0.25 and agg["cached_share"] == 0.5
    assert agg["stop_reasons"] == {"complete": 2, "limit:steps": 1, "error": 1}
    assert agg["distributions"]["idle_turns"]["sum"] == 4


def test_compare_shows_deltas_and_flips_with_repeats():
    a = [record("a", "success", 1), record("a", "failed", 2), record("b", "success", 1), record("b", "success", 2),
         record("c", "false_done", 1, steps=8), record("c", "false_done", 2, steps=8)]
    b = [record("a", "success", 1), record("a", "success", 2), record("b", "failed", 1), record("b", "success", 2),
         record("c", "success", 1, steps=4), record("c", "success", 2, steps=4)]
    result = compare(a, b)["agents"]["keel"]
    flips = {f["case"]: (f["kind"], f["a"], f["b"]) for f in result["flips"]}
    assert flips == {"a": ("fixed", "1/2", "2/2"), "b": ("broke", "2/2", "1/2"), "c": ("fixed", "0/2", "2/2")}
    by_name = {m["metric"]: m for m in result["metrics"]}
    assert by_name["false done"]["a"] == 2 and by_name["false done"]["b"] == 0 and by_name["false done"]["better"]
    assert by_name["success rate"]["delta"] == round(5 / 6 - 3 / 6, 4)
    text = format_compare(compare(a, b), "runA", "runB")
    assert "repeats A=2 B=2" in text and "fixed" in text and "a: 1/2 → 2/2" in text


def test_peer_trajectory_becomes_events_the_same_metrics_read():
    usage = {"prompt_tokens": 500, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 256}}
    trajectory = {"messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "look", "tool_calls": [{"id": "1"}],
         "extra": {"actions": [{"command": "ls"}], "response": {"usage": usage}}},
        {"role": "tool", "content": "a.py"},
        {"role": "user", "content": "Format error", "extra": {"interrupt_type": "FormatError", "response": {
            "usage": usage, "choices": [{"message": {"content": "thinking aloud", "tool_calls": None}}]}}},
        {"role": "assistant", "content": "done", "tool_calls": [{"id": "2"}],
         "extra": {"actions": [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}], "response": {"usage": usage}}},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ]}
    m = run_metrics(None, trajectory_events(trajectory))
    assert (m["steps"], m["tool_calls"], m["idle_turns"], m["pushbacks"]) == (3, 2, 1, {"format_error": 1})
    assert (m["prompt_tokens"], m["cached_tokens"]) == (1500, 768)


def test_same_replies_in_row_counts_the_longest_run_of_identical_text_and_calls():
    def reply(step, content, *calls):
        return model_call(step, len(calls), content=content,
                          replay={"content": None, "calls": [{"id": f"c{step}", "name": n, "arguments": a}
                                                             for n, a in calls]})
    same = ("change_file", '{"path": "test_calc.py", "change": "x"}')
    events = [reply(1, "", ("read_file", '{"path": "calc.py"}')), reply(2, "", same), reply(3, "", same),
              reply(4, "", same), reply(5, "", ("change_file", '{"path": "calc.py", "change": "x"}')),
              reply(6, "", same)]
    assert run_metrics(None, events)["same_replies_in_row"] == 3      # steps 2-4; call ids differ, that is all
    assert run_metrics(None, events[:2])["same_replies_in_row"] == 1
    assert run_metrics(None, [reply(1, "a"), reply(2, "b")])["same_replies_in_row"] == 1   # text differs
    assert run_metrics(None, [])["same_replies_in_row"] == 0
