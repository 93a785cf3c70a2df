"""The library as a program uses it: `with Agent(...)`, the engine named by keywords, a Config built in
code — each run over real HTTP against the scripted engine on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import call

from keel.agent import Agent
from keel.config import Config, EngineSettings, LimitSettings, PriceSettings
from keel.testing import ScriptedEngineServer, ScriptedModel


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """The agent's data dir and config files in the test's own folder, no engine in the environment."""
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("KEEL_BASE_URL", "OPENAI_BASE_URL", "KEEL_MODEL", "KEEL_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_agent_is_a_context_manager_naming_its_engine_by_keywords(calc_repo):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "calc.py defines add."}]
    with ScriptedEngineServer(script, api_key="sk-test") as server:
        before = _open_fds()
        with Agent(workspace=calc_repo, base_url=server.base_url, model="scripted", api_key="sk-test") as agent:
            result = agent.run("what does calc.py define?")
            log = Path(agent.log_path)
        requests = server.requests
    assert result.status == "complete" and "defines add" in result.summary
    assert [r["model"] for r in requests] == ["scripted", "scripted"]   # the keyword, over real HTTP, with the key
    assert _open_fds() <= before                                        # leaving `with` closed the log
    assert json.loads(log.read_text().splitlines()[-1])["type"] == "stop"


def test_keywords_go_over_a_given_config_without_changing_it(calc_repo):
    config = Config(engine=EngineSettings(base_url="http://127.0.0.1:9/v1", model="elsewhere"),
                    limits=LimitSettings(max_steps=3))
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "An add function."}]) as server:
        with Agent(workspace=calc_repo, config=config, base_url=server.base_url, model="scripted") as agent:
            result = agent.run("what is in calc.py?")
            assert agent.config.limits.max_steps == 3                   # the rest of the config stands
        assert server.requests and server.requests[0]["model"] == "scripted"
    assert result.status == "complete"
    assert (config.engine.base_url, config.engine.model) == ("http://127.0.0.1:9/v1", "elsewhere")


def test_a_config_built_in_code_is_used_as_given(calc_repo):
    config = Config(engine=EngineSettings(model="scripted"), prices=PriceSettings(input_per_m=1.0, output_per_m=2.0))
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "An add function."}]) as server:
        config.engine.base_url = server.base_url
        with Agent(workspace=calc_repo, config=config) as agent:
            result = agent.run("what is in calc.py?")
    assert result.status == "complete" and result.cost_usd > 0 and result.to_json()["cost_usd"] > 0


def test_engine_and_engine_keywords_together_are_refused(calc_repo):
    with pytest.raises(ValueError, match="either engine= or base_url="):
        Agent(ScriptedModel([]), workspace=calc_repo, base_url="http://127.0.0.1:9/v1")


def test_an_unknown_cost_is_none_not_zero(calc_repo):
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "An add function."}]) as server, \
            Agent(workspace=calc_repo, base_url=server.base_url, model="scripted") as agent:
        result = agent.run("what is in calc.py?")
        stop = json.loads(Path(agent.log_path).read_text().splitlines()[-1])
    assert result.to_json()["cost_usd"] is None and stop["type"] == "stop" and stop["cost_usd"] is None
