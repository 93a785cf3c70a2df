"""Sub-agents: the delegate tool runs an explorer on the same engine (real HTTP to the scripted
server), with its own step limit, the parent's read-only tools only, and its tokens charged to the
parent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CALC, call

from keel.agent import Agent
from keel.config import load_config
from keel.loop.limits import Limits
from keel.testing.server import ScriptedEngineServer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def _agent(repo: Path, server: ScriptedEngineServer, tmp_path: Path, toml: str = "", **kw) -> Agent:
    user = tmp_path / "user.toml"
    user.write_text(toml)
    config, _ = load_config(repo, user_path=user, env={},
                            flags={"engine": {"base_url": server.base_url, "model": "scripted"},
                                   "verify": {"mode": "off"}})
    return Agent(workspace=repo, config=config, log_path=tmp_path / "log.jsonl", **kw)


def _log(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]


EXPLORE = [call("list_dir", path="."), call("grep", pattern="def add"), call("read_file", path="calc.py"),
           call("read_file", path="test_calc.py"), call("find_files", pattern="*.py"),
           call("run_shell", command="git log --oneline")]


def test_a_sub_agent_that_hits_its_own_step_limit_reports_it_and_the_parent_goes_on(calc_repo, tmp_path):
    script = [{"content": "Asking an explorer.", "tool_calls": [call("delegate", task="Where is add defined?")]},
              *[{"tool_calls": [c]} for c in EXPLORE],          # the explorer: six steps, never answers
              {"content": "add is in calc.py and subtracts."}]  # the parent again
    with ScriptedEngineServer(script) as server:
        result = _agent(calc_repo, server, tmp_path).run("where is add?")
        requests = server.requests
    assert result.stop_reason == "complete" and result.steps == 2  # the explorer's steps are its own
    answer = requests[-1]["messages"][-1]["content"]
    assert answer.startswith("Sub-agent explorer-") and "limit:steps" in answer
    assert "its own step limit (6)" in answer
    # the explorer had a fresh context and only read-only tools
    child = requests[1]
    assert len(child["messages"]) == 2 and "explorer sub-agent" in child["messages"][0]["content"]
    assert {t["function"]["name"] for t in child["tools"]} == {
        "list_dir", "read_file", "find_files", "grep", "run_shell"}
    # its events are in the parent's log, tagged; its tokens are the parent's
    log = _log(tmp_path)
    sub = [e for e in log if e.get("subagent")]
    assert sum(e["type"] == "model_call" for e in sub) == 6
    assert any(e["type"] == "subagent_stop" and e["reason"] == "limit:steps" for e in sub)
    assert not any(e["type"] == "stop" for e in sub)
    prompt_total = sum(e["usage"]["prompt_tokens"] for e in log if e["type"] == "model_call")
    assert result.usage.prompt_tokens == prompt_total  # parent + explorer, all eight calls


def test_a_sub_agent_never_gains_what_the_parent_lacks(calc_repo, tmp_path):
    script = [{"tool_calls": [call("delegate", task="Fix calc.py")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"),
                              call("run_shell", command="sed -i s/-/+/ calc.py"),
                              call("run_shell", command="cat calc.py")]},
              {"content": "I cannot edit; add returns a - b."},
              {"content": "The explorer could not change anything."}]
    with ScriptedEngineServer(script) as server:
        result = _agent(calc_repo, server, tmp_path).run("look into calc")
        requests = server.requests
    results = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Unknown tool 'edit_file'")
    assert "read-only sub-agent" in results[1] and "return a - b" in results[2]
    assert (calc_repo / "calc.py").read_text() == CALC
    assert "add returns a - b" in requests[3]["messages"][-1]["content"]
    assert result.files_changed == []


def test_a_sub_agent_spends_the_parents_token_budget(calc_repo, tmp_path):
    big = {"prompt_tokens": 400, "completion_tokens": 100}
    script = [{"tool_calls": [call("delegate", task="Where is add?")], "usage": big},
              {"tool_calls": [call("read_file", path="calc.py")], "usage": big},
              {"tool_calls": [call("grep", pattern="add")], "usage": big},
              {"content": "calc.py line 1.", "usage": big},
              {"content": "unused"}]
    with ScriptedEngineServer(script) as server:
        result = _agent(calc_repo, server, tmp_path).run("where is add?", limits=Limits(max_tokens=1200))
    # parent 500 + explorer 500 (stopped by the 700 it had left) = the budget the parent stops on
    assert result.stop_reason == "limit:tokens"
    assert result.usage.total >= 1200
    sub_stop = next(e for e in _log(tmp_path) if e["type"] == "subagent_stop")
    assert sub_stop["reason"] == "limit:tokens"


def test_the_explorer_step_limit_is_configurable(calc_repo, tmp_path):
    script = [{"tool_calls": [call("delegate", task="Where is add?")]},
              {"tool_calls": [EXPLORE[0]]}, {"tool_calls": [EXPLORE[1]]},
              {"content": "Found nothing yet."}]
    with ScriptedEngineServer(script) as server:
        _agent(calc_repo, server, tmp_path, "[extensions]\nsubagent_max_steps = 2\n").run("where?")
        answer = server.requests[-1]["messages"][-1]["content"]
    assert "its own step limit (2)" in answer
