"""Constrained tool calls on an HTTP server: `[engine] constrain_tool_calls = "on"` asks for
tool_choice "required" (vLLM's structured outputs, llama.cpp's tool-call grammar), over real HTTP
to the scripted server; a server that refuses it costs one retry and a visible notice, not the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import call

from keel.engine.client import OpenAICompatEngine
from keel.engine.constrain import http_tool_choice, is_refusal
from keel.engine.doctor import run_doctor
from keel.engine.types import EngineError, StreamDelta
from keel.testing.script import ScriptError, load_script
from keel.testing.server import ScriptedEngineServer


def tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} tool",
                                             "parameters": {"type": "object", "properties": {}}}}


WITH_FINISH = [tool("read_file"), tool("finish")]
NO_FINISH = [tool("read_file"), tool("grep")]
MESSAGES = [{"role": "system", "content": "You are keel."}, {"role": "user", "content": "Fix calc.py."}]
READ = {"tool_calls": [call("read_file", path="calc.py")]}


@pytest.mark.parametrize(("mode", "configured", "tools", "refused", "sent"), [
    ("on", "auto", WITH_FINISH, False, "required"),     # a finish tool: every reply can be a call
    ("on", "auto", NO_FINISH, False, "auto"),           # no finish tool: a forced call could never end
    ("on", "auto", [], False, "auto"),
    ("on", "auto", WITH_FINISH, True, "auto"),          # this server refused it once: never again
    ("auto", "auto", WITH_FINISH, False, "auto"),       # auto stays off for servers
    ("off", "auto", WITH_FINISH, False, "auto"),
    ("on", "none", WITH_FINISH, False, "none"),         # the user's explicit choice wins
    ("on", "required", NO_FINISH, False, "required"),
    ("off", "required", WITH_FINISH, False, "required"),
])
def test_which_tool_choice_is_sent(mode, configured, tools, refused, sent):
    assert http_tool_choice(mode, configured, tools, refused=refused) == sent


@pytest.mark.parametrize(("sent", "configured", "kind", "status", "refusal"), [
    ("required", "auto", "protocol", 400, True),
    ("required", "auto", "protocol", 422, True),
    ("required", "auto", "context", 400, False),        # the request is too long, not the field refused
    ("required", "required", "protocol", 400, False),   # the user asked for it: their error to see
    ("auto", "auto", "protocol", 400, False),
    ("required", "auto", "config", 401, False),
])
def test_which_errors_count_as_a_refusal_of_required(sent, configured, kind, status, refusal):
    assert is_refusal(sent, configured, kind, status) is refusal


def engine(server: ScriptedEngineServer, **kw) -> OpenAICompatEngine:
    return OpenAICompatEngine(server.base_url, "scripted", sleep=lambda _s: None, **kw)


@pytest.mark.parametrize("stream", [True, False])
def test_on_sends_required_only_when_finish_is_offered(stream):
    with ScriptedEngineServer([READ, READ]) as server:
        e = engine(server, constrain_tool_calls="on", stream=stream)
        e.complete(MESSAGES, WITH_FINISH)
        e.complete(MESSAGES, NO_FINISH)
        sent = [r["tool_choice"] for r in server.requests]
    assert sent == ["required", "auto"]


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_auto_and_off_leave_tool_choice_alone(mode):
    with ScriptedEngineServer([READ]) as server:
        engine(server, constrain_tool_calls=mode).complete(MESSAGES, WITH_FINISH)
        assert server.requests[0]["tool_choice"] == "auto"


def test_an_explicit_tool_choice_is_not_overridden():
    with ScriptedEngineServer([{"content": "An answer in words."}]) as server:
        engine(server, constrain_tool_calls="on", tool_choice="none").complete(MESSAGES, WITH_FINISH)
        assert server.requests[0]["tool_choice"] == "none"


@pytest.mark.parametrize("stream", [True, False])
def test_a_refusal_is_retried_without_required_and_remembered(stream):
    script = [{**READ, "refuse_tool_choice": "required"}, {"tool_calls": [call("finish", summary="done")]}]
    deltas: list[StreamDelta] = []
    with ScriptedEngineServer(script) as server:
        e = engine(server, constrain_tool_calls="on", stream=stream)
        first = e.complete(MESSAGES, WITH_FINISH, on_delta=deltas.append)
        second = e.complete(MESSAGES, WITH_FINISH)
        sent = [r["tool_choice"] for r in server.requests]
        left = server.remaining
    assert sent == ["required", "auto", "auto"]  # refused, asked again without it, and not sent again
    assert [c.name for c in first.tool_calls] == ["read_file"] and first.retries == 1  # the scripted answer
    assert [c.name for c in second.tool_calls] == ["finish"] and second.retries == 0
    assert left == 0
    notice = [d.text for d in deltas if d.kind == "retry"]
    assert len(notice) == 1 and 'tool_choice "required"' in notice[0] and "HTTP 400" in notice[0]
    assert "rest of this session" in notice[0]
    assert e.required_refused is not None and "not supported" in e.required_refused


def test_a_user_configured_required_that_is_refused_stops_with_the_servers_words():
    with ScriptedEngineServer([{**READ, "refuse_tool_choice": "required"}]) as server:
        with pytest.raises(EngineError) as caught:
            engine(server, constrain_tool_calls="on", tool_choice="required").complete(MESSAGES, WITH_FINISH)
        assert len(server.requests) == 1
    assert caught.value.kind == "protocol" and caught.value.status == 400
    assert 'tool_choice "required" is not supported' in caught.value.message


def test_another_400_is_not_mistaken_for_a_refusal():
    with ScriptedEngineServer([{"error": {"status": 400, "message": "messages[2] is malformed"}}]) as server:
        e = engine(server, constrain_tool_calls="off")
        with pytest.raises(EngineError, match="malformed"):
            e.complete(MESSAGES, WITH_FINISH)
        assert len(server.requests) == 1 and e.required_refused is None


def test_the_script_checks_refuse_tool_choice():
    with pytest.raises(ScriptError, match="refuse_tool_choice"):
        load_script([{"content": "x", "refuse_tool_choice": 3}])
    step = load_script([{"content": "x", "refuse_tool_choice": "required"}])[0]
    assert step.refuses({"tool_choice": "required"}) and not step.refuses({"tool_choice": "auto"})


def write_user_config(keel_env: dict[str, str], text: str) -> None:
    path = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def test_keel_run_with_constrain_on_survives_a_server_that_refuses_required(calc_repo, run_keel, keel_env):
    write_user_config(keel_env, '[engine]\nconstrain_tool_calls = "on"\n')
    script = [{"tool_calls": [call("read_file", path="calc.py")], "refuse_tool_choice": "required"},
              {"tool_calls": [FIX]},
              {"tool_calls": [call("run_shell", command="python -m pytest -q")]},
              {"tool_calls": [call("finish", summary="add() adds; pytest passes.")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix the failing test", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted")
        sent = [req.get("tool_choice") for req in server.requests]
    assert r.code == 0, r.stderr
    assert sent[:2] == ["required", "auto"] and set(sent[2:]) == {"auto"}
    assert 'tool_choice "required" is not supported by this server' in r.stderr
    assert "rest of this session" in r.stderr
    assert (calc_repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"



GET_TIME = {"tool_calls": [call("get_time", timezone="UTC")]}


def test_doctor_with_constrain_on_says_the_server_takes_required():
    with ScriptedEngineServer([GET_TIME, GET_TIME, GET_TIME]) as server:
        checks = {c.name: c for c in run_doctor(server.base_url, "scripted", None, constrain_tool_calls="on")}
        sent = [r["tool_choice"] for r in server.requests]
    assert sent == ["auto", "auto", "required"]  # the tool and cache probes as before, then the constrained one
    assert checks["constrained calls"].ok is True


def test_doctor_without_constrain_on_sends_no_extra_probe():
    with ScriptedEngineServer([GET_TIME, GET_TIME]) as server:
        checks = run_doctor(server.base_url, "scripted", None, constrain_tool_calls="auto")
        assert len(server.requests) == 2
    assert "constrained calls" not in {c.name for c in checks}


def test_keel_doctor_with_constrain_on_names_a_server_that_refuses_required(run_keel, keel_env):
    write_user_config(keel_env, '[engine]\nconstrain_tool_calls = "on"\n')
    with ScriptedEngineServer([GET_TIME, GET_TIME, {**GET_TIME, "refuse_tool_choice": "required"}]) as server:
        r = run_keel("doctor", "--base-url", server.base_url, "--model", "scripted")
        sent = [req["tool_choice"] for req in server.requests]
    assert sent == ["auto", "auto", "required", "auto"]
    assert r.code == 1
    line = next(ln for ln in r.stdout.splitlines() if "constrained calls" in ln)
    assert line.startswith("[!!]") and 'refuses tool_choice "required"' in line and "--jinja" in line
