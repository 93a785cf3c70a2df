"""End to end: the real `keel run` CLI against a scripted engine over real HTTP, in a temp git repo."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import CALC, assert_tool_messages_answer_calls, call

from keel.testing.server import ScriptedEngineServer

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
TESTS = call("run_shell", command="python -m pytest -q")


EXPLAIN = "explain the bug in calc.py"   # a task answered in words: nothing needs to change


def json_run(run_keel, server, repo, *extra, task="fix the failing test"):
    return run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url,
                    "--model", "scripted", "--output-format", "json", *extra)


def last_user_text(request) -> str:
    msg = request["messages"][-1]
    return msg["content"] if msg["role"] == "user" else ""


def test_fixes_a_bug_then_runs_the_tests_and_completes(calc_repo, run_keel):
    script = [
        {"content": "Let me look.", "tool_calls": [call("read_file", path="calc.py")]},
        {"tool_calls": [FIX]},
        {"tool_calls": [TESTS]},
        {"tool_calls": [call("finish", summary="Fixed add() to add; pytest passes.")]},
    ]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo)
        requests = server.requests
    assert r.code == 0, r.stderr
    res = r.result
    assert (res["status"], res["stop_reason"]) == ("complete", "complete")
    assert res["summary"] == "Fixed add() to add; pytest passes."
    assert res["steps"] == 4 and res["files_changed"] == ["calc.py"]
    assert res["usage"]["prompt_tokens"] > 0 and res["usage"]["cached_tokens"] > 0
    assert (calc_repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert "1 passed" in requests[3]["messages"][-1]["content"]
    for req in requests:
        assert_tool_messages_answer_calls(req)
        assert req["temperature"] == 0 and req["stream"] is True
        assert req["stream_options"] == {"include_usage": True}
    # the request prefix (system prompt + tools) is byte-stable across turns
    assert all(json.dumps(r["tools"]) == json.dumps(requests[0]["tools"]) for r in requests)
    assert all(r["messages"][0] == requests[0]["messages"][0] for r in requests)
    first_user = requests[0]["messages"][1]["content"]
    assert first_user.startswith("fix the failing test") and "Top-level entries: calc.py, test_calc.py" in first_user
    kinds = [e["type"] for e in r.events()]
    assert kinds[0] == "session_start" and kinds[-1] == "stop"
    assert kinds.count("model_call") == 4 and kinds.count("tool_call") == 4
    tool_events = [e for e in r.events() if e["type"] == "tool_call"]
    assert [e["name"] for e in tool_events] == ["read_file", "edit_file", "run_shell", "finish"]
    assert all("elapsed_ms" in e and e["ok"] for e in tool_events)


def test_text_output_prints_one_line_per_tool_call(calc_repo, run_keel):
    script = [{"content": "Reading.", "tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [FIX]}, {"tool_calls": [TESTS]}, {"content": "Fixed and verified."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix it", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model",
                     "scripted")
    assert r.code == 0, r.stderr
    assert re.search(r"^\[step 1\] read_file calc\.py → ok \(\d+ ms\)$", r.stdout, re.M), r.stdout
    assert re.search(r"^\[step 2\] edit_file calc\.py → ok \(\d+ ms\)$", r.stdout, re.M)
    assert re.search(r"^\[step 3\] run_shell python -m pytest -q → ok", r.stdout, re.M)
    assert "Reading." in r.stdout and "Fixed and verified." in r.stdout
    assert "complete" in r.stdout.splitlines()[-1]


def test_question_unattended_gets_pushback_that_is_never_stored(calc_repo, run_keel):
    script = [
        {"content": "Should I fix calc.py or the test?"},
        {"tool_calls": [call("read_file", path="calc.py")]},
        {"tool_calls": [FIX]},
        {"content": "calc.py subtracted instead of adding; fixed."},
    ]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo)
        requests = server.requests
    assert r.code == 0 and r.result["stop_reason"] == "complete"
    pushback = last_user_text(requests[1])
    assert "No one is here" in pushback
    # the pushback went with that request only: the next request's history does not contain it
    assert all(pushback not in json.dumps(m) for m in requests[2]["messages"])
    assert requests[2]["messages"][: len(requests[1]["messages"]) - 1] == requests[1]["messages"][:-1]
    decisions = [e for e in r.events() if e["type"] == "decision" and e["pushback_kind"]]
    assert [d["pushback_kind"] for d in decisions] == ["question_unattended"]


def test_claiming_done_without_running_a_check_is_verified_by_the_gate(calc_repo, run_keel):
    """The model never ran the tests: keel ran the project's checks itself on the claim."""
    script = [{"tool_calls": [FIX]}, {"content": "Done, fixed the bug."}]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo)
        requests = server.requests
    assert r.code == 0 and r.result["stop_reason"] == "complete"
    assert len(requests) == 2
    [check] = r.result["verification"]["checks"]
    assert check["command"].endswith("-m pytest -q") and check["passed"]


def test_claiming_done_having_done_nothing_gets_pushback(calc_repo, run_keel):
    script = [{"content": "The bug is fixed."}, {"tool_calls": [FIX]}, {"tool_calls": [TESTS]},
              {"content": "Fixed and the tests pass."}]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo)
        requests = server.requests
    assert r.result["stop_reason"] == "complete"
    assert "have not done anything" in last_user_text(requests[1])


def test_identical_call_and_result_is_reported_as_run_again_then_not_run_then_stops(calc_repo, run_keel):
    read = {"tool_calls": [call("read_file", path="calc.py")]}
    with ScriptedEngineServer([read, read, read, {"content": "unreachable"}]) as server:
        r = json_run(run_keel, server, calc_repo)
        requests = server.requests
    assert r.code == 1
    assert (r.result["status"], r.result["stop_reason"]) == ("incomplete", "limit:repetition")
    assert requests[2]["messages"][-1]["content"].startswith("This ran again: you already called read_file")
    third = [e for e in r.events() if e["type"] == "tool_call"][-1]   # the same answer twice: not run a third time
    assert third["not_run"] and third["result_preview"].startswith("Not run: you already called read_file")
    assert len(requests) == 3


def test_polling_with_changing_output_is_not_refused(calc_repo, run_keel):
    poll = {"tool_calls": [call("run_shell", command="date +%s%N")]}
    with ScriptedEngineServer([poll, poll, poll, {"content": "The clock is advancing; the bug: add() in calc.py subtracts."}]) as server:
        r = json_run(run_keel, server, calc_repo, task=EXPLAIN)
        requests = server.requests
    assert r.result["stop_reason"] == "complete"
    assert not any("Refused" in json.dumps(req["messages"]) for req in requests)


def test_429_is_retried_honouring_retry_after(calc_repo, run_keel):
    script = [{"error": {"status": 429, "retry_after": 1}}, {"tool_calls": [call("list_dir", path=".")]},
              {"content": "It is a calculator project."}]
    with ScriptedEngineServer(script) as server:
        started = time.monotonic()
        r = json_run(run_keel, server, calc_repo, task=EXPLAIN)
        elapsed = time.monotonic() - started
        assert len(server.requests) == 3
    assert r.code == 0 and r.result["stop_reason"] == "complete"
    assert elapsed >= 1.0


def test_bad_api_key_exits_2_fast_with_a_clear_message(calc_repo, run_keel, keel_env):
    with ScriptedEngineServer([{"content": "x"}], api_key="right-key") as server:
        env = dict(keel_env, KEEL_API_KEY="wrong-key")
        r = run_keel("run", "x", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model",
                     "scripted", env=env)
    assert r.code == 2
    assert "key" in r.stderr.lower()
    assert r.duration_s < 2 + 1.5  # the run itself must answer within 2 s; allow interpreter start-up


def test_unknown_model_exits_2_naming_the_model(calc_repo, run_keel):
    with ScriptedEngineServer([{"content": "x"}]) as server:
        r = run_keel("run", "x", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model",
                     "qwen3-coder-typo", "--output-format", "json")
    assert r.code == 2
    assert r.result["status"] == "error" and "qwen3-coder-typo" in r.result.get("error", "")
    assert r.duration_s < 2 + 1.5


def test_missing_base_url_is_a_configuration_error(calc_repo, run_keel):
    r = run_keel("run", "x", "--cwd", str(calc_repo), "--model", "m")
    assert r.code == 2 and "KEEL_BASE_URL" in r.stderr


def test_both_text_tool_call_forms_are_executed(calc_repo, run_keel):
    script = [
        {"content": "Reading.", "tool_calls": [call("read_file", path="calc.py")], "text_tool_calls": "hermes"},
        {"tool_calls": [call("grep", pattern="def add")], "text_tool_calls": "qwen3_coder"},
        {"content": "add() subtracts; that is the bug."},
    ]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo, task=EXPLAIN)
        requests = server.requests
    assert r.result["stop_reason"] == "complete"
    assert "return a - b" in requests[1]["messages"][-1]["content"]
    assert "calc.py:1:" in requests[2]["messages"][-1]["content"]
    for req in requests:
        assert_tool_messages_answer_calls(req)
    formats = [e["tool_call_format"] for e in r.events() if e["type"] == "model_call"]
    assert formats[:2] == ["hermes", "qwen3_coder"]


def test_stream_cut_inside_a_tool_call_is_retried_and_runs_once(calc_repo, run_keel):
    write = call("write_file", path="notes.txt", content="hello\n" * 50)
    script = [{"tool_calls": [write], "cut_after_chunks": 4}, {"tool_calls": [write]},
              {"tool_calls": [call("run_shell", command="python -c 'print(open(\"notes.txt\").read().count(\"hello\"))'")]},
              {"content": "Wrote notes.txt."}]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo, task="write hello 50 times into notes.txt")
    assert r.result["stop_reason"] == "complete", r.result
    writes = [e for e in r.events() if e["type"] == "tool_call" and e["name"] == "write_file"]
    assert len(writes) == 1
    assert (calc_repo / "notes.txt").read_text() == "hello\n" * 50


def test_malformed_arguments_tell_the_model_which_field(calc_repo, run_keel):
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": '{"path": "calc.py"'}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"file": "calc.py"}}]},
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        {"tool_calls": [call("read_file", path="calc.py")]},
        {"content": "add() subtracts."},
    ]
    with ScriptedEngineServer(script) as server:
        r = json_run(run_keel, server, calc_repo, task=EXPLAIN)
        requests = server.requests
    assert r.result["stop_reason"] == "complete"
    assert "not valid JSON" in requests[1]["messages"][-1]["content"]
    bad_field = requests[2]["messages"][-1]["content"]
    assert "field 'path': required" in bad_field and "field 'file'" in bad_field
    assert "Unknown tool 'no_such_tool'" in requests[3]["messages"][-1]["content"]


def test_interrupt_exits_130_and_answers_every_call(calc_repo, keel_env, tmp_path):
    script = [{"tool_calls": [call("run_shell", command="sleep 30"), call("list_dir", path=".")]}]
    log = tmp_path / "log.jsonl"
    with ScriptedEngineServer(script) as server:
        proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "run", "x", "--cwd", str(calc_repo),
                                 "--base-url", server.base_url, "--model", "scripted", "--log", str(log),
                                 "--output-format", "json"], env=keel_env, stdout=subprocess.PIPE,
                                text=True,   # Ctrl-C as from a terminal, also when pytest is a background job
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "model_call" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert json.loads(out.strip().splitlines()[-1])["stop_reason"] == "interrupted"
    stop = [json.loads(line) for line in log.read_text().splitlines()][-1]
    assert stop["type"] == "stop" and stop["reason"] == "interrupted"


def test_project_config_cannot_redirect_requests(calc_repo, run_keel):
    (calc_repo / ".keel").mkdir()
    (calc_repo / ".keel" / "config.toml").write_text('[engine]\nbase_url = "http://127.0.0.1:9/v1"\n')
    answer = {"content": "add() in calc.py subtracts: it returns a - b where it should return a + b."}
    with ScriptedEngineServer([{"tool_calls": [call("list_dir")]}, answer]) as server:
        r = json_run(run_keel, server, calc_repo, task=EXPLAIN)
    assert r.result["stop_reason"] == "complete"
    assert "ignored [engine] base_url" in r.stderr


def test_keel_tool_runs_one_tool_like_the_model(calc_repo, run_keel):
    ok = run_keel("tool", "read_file", '{"path": "calc.py"}', "--cwd", str(calc_repo))
    assert ok.code == 0 and "return a - b" in ok.stdout
    bad = run_keel("tool", "read_file", '{"path": "../outside"}', "--cwd", str(calc_repo))
    assert bad.code == 1 and "outside the workspace" in bad.stdout


def test_read_file_output_is_exactly_what_the_model_sees(calc_repo, run_keel):
    r = run_keel("tool", "read_file", '{"path": "calc.py"}', "--cwd", str(Path(calc_repo)))
    assert "     1\tdef add(a, b):" in r.stdout
