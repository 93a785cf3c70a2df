"""Sessions survive a kill -9: the real `keel run` is killed mid-task (during a model call, during a
tool call), then `keel run --continue` / `--resume` finishes it against a new scripted engine with a
valid history (every tool call answered), and every event log line still parses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import CALC, assert_tool_messages_answer_calls, call

from keel.core.schema import read_log
from keel.testing.server import ScriptedEngineServer
from keel.trace.sessions import INTERRUPTED_BY_CRASH, RESUME_NOTE, repair_history

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
TESTS = call("run_shell", command="python -m pytest -q")
FINISH = call("finish", summary="Fixed add(); pytest passes.")


def _start(repo: Path, env: dict[str, str], server: ScriptedEngineServer, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "keel.cli.main", "run", "fix the failing test", "--cwd", str(repo),
                             "--base-url", server.base_url, "--model", "scripted", "--approval", "auto-edit",
                             "--output-format", "json", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _sessions(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["KEEL_HOME"]) / "sessions").glob("*.jsonl"))


def _state(log: Path) -> dict:
    return json.loads((log.with_suffix("") / "state.json").read_text())


def _all_lines_parse(log: Path) -> list[dict]:
    lines = log.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]       # raises on any torn line
    assert all(isinstance(e["schema"], int) for e in events)
    return events


def _survivors(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and b"keel.cli.main" not in cmdline:
            found.append(int(entry))
    return found


def test_killed_during_a_model_call_then_continue_completes(calc_repo, keel_env, run_keel):
    first = [{"tool_calls": [call("read_file", path="calc.py")]}, {"tool_calls": [FIX]},
             {"delay_s": 30, "content": "this answer never arrives"}]
    with ScriptedEngineServer(first) as server:
        proc = _start(calc_repo, keel_env, server, "--verify", "off")
        _wait_for(lambda: len(server.requests) == 3, "the third model call")
        _kill9(proc)
    [log] = _sessions(keel_env)
    state = _state(log)
    assert state["steps"] == 2 and state["status"] == "running"
    assert (calc_repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")  # the fix was made before the kill
    listed = run_keel("log", "--json")
    assert listed.code == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["status"] == "crashed"

    with ScriptedEngineServer([{"tool_calls": [TESTS]}, {"tool_calls": [FINISH]}]) as server:
        r = run_keel("run", "--continue", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--verify", "off")
        requests = server.requests
    assert r.code == 0, r.stderr
    res = r.result
    assert (res["status"], res["stop_reason"]) == ("complete", "complete")
    assert res["session_id"] == log.stem and res["log"] == str(log)
    assert res["steps"] == 4                     # counted across the crash: 2 before, 2 after
    for req in requests:
        assert_tool_messages_answer_calls(req)
    history = requests[0]["messages"]
    assert history[1]["content"].startswith("fix the failing test")
    assert any(m["role"] == "tool" and "calc.py" in m["content"] for m in history)  # the edit's result survived
    assert not any(INTERRUPTED_BY_CRASH in str(m.get("content")) for m in history)   # nothing was in flight
    events = _all_lines_parse(log)
    resume = [e for e in events if e["type"] == "resume"]
    assert len(resume) == 1 and resume[0]["from_step"] == 2
    assert [e["step"] for e in events if e["type"] == "model_call"] == [1, 2, 3, 4]
    assert _state(log)["status"] == "complete"


def test_killed_during_a_tool_call_gets_an_interrupted_result_and_resumes(calc_repo, keel_env, run_keel):
    token = uuid.uuid4().hex
    slow = call("run_shell", command=f"python -c \"import time; time.sleep(30)\" # {token}")
    note = call("write_file", path="notes.txt", content="written in the step that was killed\n")
    with ScriptedEngineServer([{"tool_calls": [FIX]}, {"tool_calls": [note, slow]}]) as server:
        proc = _start(calc_repo, keel_env, server, "--verify", "off")
        try:
            _wait_for(lambda: _survivors(token), "the slow command to start", timeout=120)  # loaded CI machines
            _kill9(proc)
        finally:
            for pid in _survivors(token):   # the sandboxed command may outlive keel's kill -9
                os.kill(pid, signal.SIGKILL)
    [log] = _sessions(keel_env)
    saved = _state(log)["messages"]
    assert saved[-1]["role"] == "assistant" and saved[-1]["tool_calls"][1]["function"]["name"] == "run_shell"
    assert (calc_repo / "notes.txt").exists()

    with ScriptedEngineServer([{"tool_calls": [TESTS]}, {"tool_calls": [FINISH]}]) as server:
        r = run_keel("run", "--resume", log.stem, "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", "--verify", "off")
        requests = server.requests
    assert r.code == 0, r.stderr
    assert r.result["status"] == "complete"
    history = requests[0]["messages"]
    assert_tool_messages_answer_calls(requests[0])
    ids = [c["id"] for c in saved[-1]["tool_calls"]]
    answers = [m["content"] for m in history if m.get("tool_call_id") in ids]
    assert answers == [INTERRUPTED_BY_CRASH, INTERRUPTED_BY_CRASH]   # neither result was saved before the kill
    assert history[-1] == {"role": "user", "content": RESUME_NOTE}
    events = _all_lines_parse(log)
    assert [e["interrupted_calls"] for e in events if e["type"] == "resume"] == [ids]
    # the write that happened in the killed step still counts as a change of this session
    assert r.result["files_changed"] == ["calc.py", "notes.txt"]
    # and its checkpoints outlived the kill: undo puts the workspace back as before the session
    undone = run_keel("undo", "--cwd", str(calc_repo))
    assert undone.code == 0, undone.stdout + undone.stderr
    assert (calc_repo / "calc.py").read_text() == CALC and not (calc_repo / "notes.txt").exists()


def test_a_torn_last_line_is_skipped_by_readers_and_repaired_by_the_resumed_writer(calc_repo, keel_env, run_keel):
    with ScriptedEngineServer([{"tool_calls": [FIX]}, {"error": {"status": 400, "message": "bad request"}}]) as server:
        first = run_keel("run", "fix it", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model", "scripted",
                         "--output-format", "json", "--verify", "off")
    assert first.result["status"] != "complete"
    log = Path(first.result["log"])
    with log.open("a") as fh:
        fh.write('{"type": "tool_call", "schema": 1, "name": "wri')    # what a kill -9 mid-write leaves
    read = read_log(log)
    assert len(read.skipped) == 1 and "torn" in read.skipped[0]
    assert read.events[-1]["type"] == "stop"
    shown = run_keel("log", log.stem)
    assert shown.code == 0 and "skipped the last line" in shown.stderr and "stop" in shown.stdout
    stats = run_keel("stats", log.stem, "--json")
    assert stats.code == 0 and json.loads(stats.stdout)["steps"] >= 1

    with ScriptedEngineServer([{"tool_calls": [TESTS]}, {"tool_calls": [FINISH]}]) as server:
        r = run_keel("run", "--resume", str(log), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", "--verify", "off")
    assert r.code == 0, r.stderr
    lines = log.read_text().splitlines()
    torn = [i for i, line in enumerate(lines) if line.endswith('"name": "wri')]
    assert len(torn) == 1
    for line in lines[:torn[0]] + lines[torn[0] + 1:]:
        json.loads(line)          # the resumed writer started on a fresh line
    assert read_log(log).events[-1]["status"] == "complete"


def test_resume_refuses_what_it_cannot_pick_up(calc_repo, keel_env, run_keel):
    r = run_keel("run", "--continue", "--cwd", str(calc_repo), "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m")
    assert r.code == 2 and "no saved session" in r.stderr
    r = run_keel("run", "--resume", "nope", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert r.code == 2 and "no saved session 'nope'" in r.stderr
    r = run_keel("run", "a task", "--continue", "--cwd", str(calc_repo))
    assert r.code == 2 and "take no task" in r.stderr
    with ScriptedEngineServer([{"tool_calls": [FIX]}, {"tool_calls": [TESTS]}, {"tool_calls": [FINISH]}]) as server:
        done = run_keel("run", "fix it", "--cwd", str(calc_repo), "--base-url", server.base_url,
                        "--model", "scripted", "--output-format", "json", "--verify", "off")
    assert done.result["status"] == "complete"
    r = run_keel("run", "--continue", "--cwd", str(calc_repo), "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m")
    assert r.code == 2 and "already finished (complete)" in r.stderr


def test_a_resumed_gate_still_knows_the_session_broke_a_passing_test(tmp_path, keel_env, run_keel):
    """False done guard: after a crash, a test the agent broke before it must not pass for a failure
    that was there from the start (the gate's baseline and start snapshot outlive the crash)."""
    repo = tmp_path / "ok"
    repo.mkdir()
    (repo / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    (repo / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    task = "make add() subtract"
    breaking = call("edit_file", path="calc.py", old_text="return a + b", new_text="return a - b")
    with ScriptedEngineServer([{"tool_calls": [breaking]}, {"delay_s": 30, "content": "late"}]) as server:
        proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "run", task, "--cwd", str(repo),
                                 "--base-url", server.base_url, "--model", "scripted", "--approval", "auto-edit",
                                 "--output-format", "json"], env=keel_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: len(server.requests) == 2, "the second model call", timeout=120)
        _kill9(proc)
    [log] = _sessions(keel_env)
    assert _state(log)["baseline"]["passed"], "the baseline ran before the edit and passed"
    with ScriptedEngineServer([{"tool_calls": [FINISH]}] * 4) as server:
        r = run_keel("run", "--resume", log.stem, "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", timeout=240)
    assert r.result["status"] != "complete", r.stdout
    verdicts = [e for e in read_log(log).events if e["type"] == "verification"]
    assert verdicts and verdicts[0]["problem"] == "verification_failed", verdicts
    assert verdicts[0]["preexisting_failures"] == [] and verdicts[0]["unchanged"] is False


@pytest.mark.parametrize(("messages", "expected_ids"), [
    ([{"role": "user", "content": "x"}], []),
    ([{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]},
      {"role": "tool", "tool_call_id": "a", "content": "ok"}], ["b"]),
    ([{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}], ["a"]),
    ([{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]},
      {"role": "tool", "tool_call_id": "a", "content": "ok"}, {"role": "user", "content": "next"}], []),
])
def test_repair_history_answers_every_call_in_order(messages, expected_ids):
    repaired, interrupted = repair_history(messages)
    assert interrupted == expected_ids
    calls = [c["id"] for m in repaired if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answers = [m["tool_call_id"] for m in repaired if m["role"] == "tool"]
    assert answers == calls
    assert [m for m in repaired if m.get("content") == INTERRUPTED_BY_CRASH] == [
        {"role": "tool", "tool_call_id": i, "content": INTERRUPTED_BY_CRASH} for i in expected_ids]
