"""Headless answers: an `--attended` run that stops on a question (needs_user) goes on with
`keel run --resume ID --answer TEXT`, the answer reaching the engine as the user's reply, under the
stopped run's limits and acceptance checks. A resume that fails (unknown session, a session not
waiting for an answer, a bad answer, an unreachable engine) exits 2 and leaves the session as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import call

from keel.testing.server import ScriptedEngineServer

QUESTION = "Which port should the server listen on?"
ACCEPT = "python3 -c 'import config; assert config.PORT == 8080'"
ASK = {"tool_calls": [call("ask_user", question=QUESTION)]}
WRITE = {"tool_calls": [call("write_file", path="config.py", content="PORT = 8080\n")]}
FINISH = {"tool_calls": [call("finish", summary="config.py sets PORT = 8080 as asked.")]}
DEAD_ENGINE = "http://127.0.0.1:9/v1"   # the discard port: nothing listens, the connection is refused


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "server.py").write_text("import config\n\nprint(config.PORT)\n")
    return ws


def _ask(run_keel, ws: Path) -> dict:
    """An attended run whose model asks a question: it stops needs_user."""
    with ScriptedEngineServer([ASK]) as server:
        r = run_keel("run", "set the server port in config.py", "--cwd", str(ws), "--attended", "--base-url",
                     server.base_url, "--model", "scripted", "--output-format", "json", "--accept", ACCEPT,
                     "--max-steps", "6")
    assert r.code == 1, r.stderr
    assert (r.result["status"], r.result["stop_reason"]) == ("incomplete", "needs_user")
    return r.result


def _files(result: dict) -> tuple[bytes, bytes]:
    log = Path(result["log"])
    return (log.with_suffix("") / "state.json").read_bytes(), log.read_bytes()


def _listed_status(run_keel) -> str:
    listed = run_keel("log", "--json")
    assert listed.code == 0, listed.stderr
    return json.loads(listed.stdout)[0]["status"]


def test_an_answer_continues_the_stopped_run_to_completion(tmp_path, run_keel):
    ws = _workspace(tmp_path)
    first = _ask(run_keel, ws)
    sid = first["session_id"]

    plain = run_keel("run", "--resume", sid, "--base-url", DEAD_ENGINE, "--model", "scripted")
    assert plain.code == 2 and QUESTION in plain.stderr and "--answer" in plain.stderr

    with ScriptedEngineServer([WRITE, FINISH]) as server:
        r = run_keel("run", "--resume", sid, "--answer", "use port 8080", "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json")
        requests = server.requests
    assert r.code == 0, r.stderr
    assert (r.result["status"], r.result["stop_reason"]) == ("complete", "complete")
    assert r.result["session_id"] == sid and r.result["steps"] == 3   # counted across the stop
    history = requests[0]["messages"]
    assert history[-1] == {"role": "user", "content": "use port 8080"}       # the reply to the question
    assert history[-2]["role"] == "tool" and history[-3]["tool_calls"][0]["function"]["name"] == "ask_user"
    assert (ws / "config.py").read_text() == "PORT = 8080\n"
    # the stopped run's acceptance check still gates the claim: it ran and passed
    checks = r.result["verification"]["checks"]
    assert any(c["command"] == ACCEPT and c["passed"] for c in checks), checks
    assert _listed_status(run_keel) == "complete"

    again = run_keel("run", "--resume", sid, "--answer", "8080", "--base-url", DEAD_ENGINE, "--model", "scripted")
    assert again.code == 2 and "already finished" in again.stderr


def test_an_unreachable_engine_leaves_the_session_waiting(tmp_path, run_keel):
    ws = _workspace(tmp_path)
    first = _ask(run_keel, ws)
    sid, before = first["session_id"], _files(first)

    for fmt in ("text", "json"):
        r = run_keel("run", "--resume", sid, "--answer", "use port 8080", "--base-url", DEAD_ENGINE,
                     "--model", "scripted", "--output-format", fmt)
        assert r.code == 2, r.stdout + r.stderr
        assert _files(first) == before          # state and event log byte for byte as they were
        assert _listed_status(run_keel) == "incomplete (needs_user)"
        if fmt == "json":
            assert (r.result["status"], r.result["stop_reason"]) == ("error", "resume_failed")
            assert "connection refused" in r.result["error"] and "still waits" in r.result["summary"]
        else:
            assert "unchanged and still waits for an answer" in r.stderr

    with ScriptedEngineServer([WRITE, FINISH]) as server:     # the same command, engine back: it goes on
        r = run_keel("run", "--resume", sid, "--answer", "use port 8080", "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json")
    assert r.code == 0, r.stderr
    assert r.result["status"] == "complete"


def test_bad_resumes_exit_2_and_change_nothing(tmp_path, run_keel, keel_env):
    ws = _workspace(tmp_path)
    first = _ask(run_keel, ws)
    sid, before = first["session_id"], _files(first)
    cases = [
        (("--resume", "no-such-session", "--answer", "x"), "no saved session 'no-such-session'"),
        (("--resume", sid, "--answer", "   "), "--answer is empty"),
        (("--resume", sid, "--answer", "x" * 100_001), "at most 100,000"),
        (("--resume", sid, "--answer", "x", "--plan"), "plan mode"),
        (("set the port", "--answer", "8080", "--cwd", str(ws)), "--answer needs --resume"),
    ]
    for args, expected in cases:
        r = run_keel("run", *args, "--base-url", DEAD_ENGINE, "--model", "scripted")
        assert r.code == 2 and expected in r.stderr, (args, r.stderr)
        assert _files(first) == before, args
    # an answer that is not UTF-8 (raw argv bytes)
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "run", "--resume", sid, "--answer", b"port \xff",
                           "--base-url", DEAD_ENGINE, "--model", "scripted"], env=keel_env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 2 and b"not valid UTF-8" in proc.stderr, proc.stderr
    assert _files(first) == before
    assert _listed_status(run_keel) == "incomplete (needs_user)"


def test_an_answer_to_a_session_that_asked_nothing_is_refused(tmp_path, run_keel):
    ws = _workspace(tmp_path)
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="server.py")]}]) as server:
        r = run_keel("run", "read server.py", "--cwd", str(ws), "--attended", "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--max-steps", "1")
    assert r.result["stop_reason"] == "limit:steps"
    before = _files(r.result)
    answered = run_keel("run", "--resume", r.result["session_id"], "--answer", "8080", "--base-url", DEAD_ENGINE,
                        "--model", "scripted", "--output-format", "json")
    assert answered.code == 2 and "did not stop on a question" in answered.stderr
    assert answered.result["status"] == "error"      # json mode still prints a result object
    assert _files(r.result) == before


def test_a_question_stop_carries_the_question_for_a_headless_caller(tmp_path, run_keel):
    """keel issue 32, item 5: the json result of a needs_user stop had "summary": "" and no question; text
    mode printed no way to answer."""
    result = _ask(run_keel, _workspace(tmp_path))
    assert result["summary"] == QUESTION and result["question"] == QUESTION
    (tmp_path / "text").mkdir()
    ws = _workspace(tmp_path / "text")
    with ScriptedEngineServer([ASK]) as server:
        r = run_keel("run", "set the server port in config.py", "--cwd", str(ws), "--attended", "--base-url",
                     server.base_url, "--model", "scripted")
    assert r.code == 1
    assert f"the run asks: {QUESTION}" in r.stderr
    sid = next(line.split("--resume ")[1].split()[0] for line in r.stderr.splitlines() if "--resume " in line)
    assert f'keel run --resume {sid} --answer "YOUR ANSWER"' in r.stderr
