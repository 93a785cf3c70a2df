"""`keel replay`: a recorded run's model outputs re-served (scripted engine, real HTTP, real `keel run`)
against a fresh starting workspace; differences in what the harness observed are reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keel.eval.cases import load_case, materialize
from keel.eval.execute import JobSpec, run_job
from keel.eval.replay import compare_runs, normalize, recorded_turns, to_script_lines
from keel.testing.script import load_script

FIXTURES = Path(__file__).parent / "fixtures" / "evals"


def keel(env, *args, timeout=240):
    return subprocess.run([sys.executable, "-m", "keel.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real scripted eval run of fix-sub, its log saved under the eval's naming."""
    home = tmp_path_factory.mktemp("replay")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_"))}
    env.update(KEEL_HOME=str(home / "keel-home"), XDG_CONFIG_HOME=str(home / "xdg"))
    output = run_job(JobSpec(case_id="fix-sub", case_dir=str(FIXTURES / "fix-sub"), engine="scripted"))
    assert output.record["outcome"] == "success", output.record
    log = home / "fix-sub__keel__r1.jsonl"
    log.write_text(output.log_text)
    return env, home, log


def test_replay_against_the_case_matches_the_recording(recorded):
    env, _home, log = recorded
    proc = keel(env, "replay", str(log), "--cases-dir", str(FIXTURES))  # case inferred from the log's name
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 recorded turn(s) against case fix-sub" in proc.stdout
    assert "recorded: complete (complete) after 4 step(s) · now: complete (complete) after 4 step(s)" in proc.stdout
    assert "0 difference(s)" in proc.stdout


def test_replay_reports_where_observations_now_differ(recorded, tmp_path):
    env, _home, log = recorded
    start = materialize(load_case(FIXTURES / "fix-sub"), tmp_path / "start")
    (start / "mathx.py").write_text("def sub(a, b):\n    return a - b  # already fixed\n")
    proc = keel(env, "replay", str(log), "--cwd", str(start), "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    diffs = {(d["step"], d["call"], d["tool"], d["field"]) for d in report["differences"]}
    assert (1, 1, "read_file", "output") in diffs               # the file reads differently
    assert (2, 1, "edit_file", "ok") in diffs                   # the recorded edit no longer applies
    edit = next(d for d in report["differences"] if d["tool"] == "edit_file" and d["field"] == "ok")
    assert (edit["recorded"], edit["now"]) == (True, False)
    assert (start / "mathx.py").read_text().endswith("# already fixed\n")  # --cwd is copied, never touched


def test_to_script_turns_a_run_into_a_script_that_replays_the_same_calls(recorded, tmp_path):
    env, _home, log = recorded
    script = tmp_path / "script.jsonl"
    proc = keel(env, "replay", str(log), "--to-script", str(script))
    assert proc.returncode == 0, proc.stderr
    steps = load_script(script)
    original = load_script(FIXTURES / "fix-sub" / "script.jsonl")
    assert [[(c.name, json.loads(c.arguments)) for c in s.tool_calls] for s in steps] == \
        [[(c.name, json.loads(c.arguments)) for c in s.tool_calls] for s in original]
    assert steps[1].content == "The operands are swapped."
    # the new script solves the case through a real scripted eval run
    case_dir = tmp_path / "from-replay"
    shutil.copytree(FIXTURES / "fix-sub", case_dir)
    shutil.copy(script, case_dir / "script.jsonl")
    assert run_job(JobSpec(case_id="from-replay", case_dir=str(case_dir), engine="scripted")).record["outcome"] == "success"


def test_replay_needs_a_starting_point_and_a_keel_log(recorded, tmp_path):
    env, _home, log = recorded
    renamed = tmp_path / "session.jsonl"
    shutil.copy(log, renamed)
    proc = keel(env, "replay", str(renamed))
    assert proc.returncode == 2 and "--case CASE or --cwd DIR" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "stop"}\n')
    proc = keel(env, "replay", str(bad), "--cwd", str(tmp_path))
    assert proc.returncode == 2 and "no session_start event" in proc.stderr


def test_text_format_calls_are_served_as_text_again_and_old_logs_fall_back_to_tool_call_events():
    events = [
        {"type": "session_start", "task": "t", "workspace": "/w"},
        {"type": "model_call", "step": 1, "tool_call_format": "hermes", "content": "", "finish_reason": "stop",
         "replay": {"content": None, "calls": [{"id": "c1", "name": "read_file", "arguments": '{"path": "a.py"}'}]}},
        {"type": "model_call", "step": 2, "tool_call_format": "structured", "content": "old log"},
        {"type": "tool_call", "step": 2, "call_id": "x", "name": "finish", "arguments": '{"summary": "s"}'},
    ]
    rec = recorded_turns(events)
    assert rec.steps[0] == {"content": None, "text_tool_calls": "hermes",
                            "tool_calls": [{"name": "read_file", "arguments": '{"path": "a.py"}'}]}
    assert rec.steps[1]["tool_calls"] == [{"id": "x", "name": "finish", "arguments": '{"summary": "s"}'}]
    served = load_script([json.loads(line) for line in to_script_lines(rec.steps).splitlines()])
    assert "<tool_call>" in served[0].content and not served[0].tool_calls


def test_normalize_hides_paths_timings_and_session_ids_but_not_content():
    a = normalize("/tmp/ws1/calc.py: 1 passed in 0.03s (session 20261130-190041-b5c268)", "/tmp/ws1")
    b = normalize("/tmp/ws2/calc.py: 1 passed in 1.20s (session 20261130-191111-aaaaaa)", "/tmp/ws2")
    assert a == b == "<workspace>/calc.py: 1 passed in <time> (session <session>)"
    old = [{"type": "tool_call", "step": 1, "name": "run_shell", "ok": True, "result_preview": "1 passed in 0.1s"}]
    new = [{"type": "tool_call", "step": 1, "name": "run_shell", "ok": True, "result_preview": "1 failed in 0.2s"}]
    assert [d.field for d in compare_runs(old, new, "", "")] == ["output"]
