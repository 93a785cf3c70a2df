"""The MCP client against a real stdio MCP server built with the official SDK
(tests/fixtures/mcp_server.py), inside a real run against the scripted engine over HTTP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import call

from keel.agent import Agent
from keel.config import load_config
from keel.engine.types import EngineError
from keel.ext.mcp import McpConfigError, parse_servers, rule_decision, tool_name
from keel.testing.server import ScriptedEngineServer

pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install 'keel[mcp]'")

FIXTURE = Path(__file__).parent / "fixtures" / "mcp_server.py"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def _servers(path: Path, **extra) -> None:
    spec = {"fx": {"command": sys.executable, "args": [str(FIXTURE), "--name", "fx"],
                   "env": {"FIXTURE_TOKEN": "t0k"}}, **extra}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": spec}))


def _agent(repo: Path, server: ScriptedEngineServer, tmp_path: Path, toml: str = "", **kw) -> Agent:
    user = tmp_path / "user.toml"
    user.write_text(toml)
    config, _ = load_config(repo, user_path=user, env={},
                            flags={"engine": {"base_url": server.base_url, "model": "scripted"},
                                   "verify": {"mode": "off"},
                                   # the SDK's import alone takes seconds on a loaded CI machine
                                   "extensions": {"mcp_startup_timeout_s": 120}})
    return Agent(workspace=repo, config=config, log_path=tmp_path / "log.jsonl", **kw)


def _tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_stdio_server_tools_rules_and_a_crash_mid_call(calc_repo, tmp_path):
    _servers(tmp_path / "xdg" / "keel" / "mcp.json")
    script = [
        {"tool_calls": [call("mcp__fx__add", a=2, b=3), call("mcp__fx__whoami"),
                        call("mcp__fx__echo", text="hi"), call("mcp__fx__echo")]},
        {"tool_calls": [call("mcp__fx__crash")]},
        {"tool_calls": [call("mcp__fx__add", a=1, b=1)]},
        {"tool_calls": [call("read_file", path="calc.py")]},
        {"content": "The server crashed; add works in calc.py terms."},
    ]
    toml = '[permissions]\nallow = ["mcp__fx"]\ndeny = ["mcp__fx__echo"]\n'
    with ScriptedEngineServer(script) as server:
        agent = _agent(calc_repo, server, tmp_path, toml)
        try:
            tools = [t["function"] for t in agent.registry.schemas()]
            result = agent.run("use the fx server")
        finally:
            agent.close()
        requests = server.requests
    by_name = {t["name"]: t for t in tools}
    assert {"mcp__fx__add", "mcp__fx__echo", "mcp__fx__crash", "mcp__fx__hang"} <= set(by_name)
    assert by_name["mcp__fx__add"]["parameters"]["required"] == ["a", "b"]
    assert by_name["mcp__fx__add"]["description"].startswith("[MCP fx] Add two integers")
    first = _tool_results(requests[1])
    assert first[0] == "5"
    assert first[1] == f"cwd={calc_repo} token=t0k"  # started in the workspace with its env
    assert "denied by a rule" in first[2] and "required but missing: text" in first[3]
    crashed = _tool_results(requests[2])[-1]
    assert "MCP server 'fx' failed during crash" in crashed and "crashing on purpose" in crashed
    after = _tool_results(requests[3])[-1]
    assert "MCP server 'fx' is not running" in after
    assert "return a - b" in _tool_results(requests[4])[-1]  # the run went on
    assert result.stop_reason == "complete"
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    crash_event = next(e for e in log if e["type"] == "tool_call" and e["name"] == "mcp__fx__crash")
    assert crash_event["ok"] is False


def test_unattended_mcp_calls_need_an_allow_rule_and_a_hung_call_times_out(calc_repo, tmp_path):
    _servers(tmp_path / "xdg" / "keel" / "mcp.json")
    script = [{"tool_calls": [call("mcp__fx__echo", text="x")]},
              {"tool_calls": [call("mcp__fx__hang")]},
              {"tool_calls": [call("mcp__fx__add", a=2, b=2)]},
              {"content": "done"}]
    toml = '[permissions]\nallow = ["mcp__fx__hang", "mcp__fx__add"]\n[extensions]\nmcp_call_timeout_s = 1\n'
    with ScriptedEngineServer(script) as server:
        agent = _agent(calc_repo, server, tmp_path, toml)
        try:
            agent.run("try the server")
        finally:
            agent.close()
        requests = server.requests
    refused = _tool_results(requests[1])[-1]
    assert refused.startswith("Refused: MCP tool mcp__fx__echo needs approval and no one is present")
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    [approval] = [e for e in log if e["type"] == "approval" and e.get("action") == "mcp"]
    assert (approval["target"], approval["allowed"]) == ("mcp__fx__echo", False)
    assert "did not answer hang within 1 s" in _tool_results(requests[2])[-1]
    assert _tool_results(requests[3])[-1] == "4"  # a hung call does not take the server down


@pytest.mark.parametrize("mode", ["auto-edit", "full-auto"])
def test_auto_edit_puts_mcp_calls_to_the_person_and_full_auto_runs_them(calc_repo, tmp_path, mode):
    from keel.policy.sandbox import detect_sandbox

    if mode == "full-auto" and not detect_sandbox().confining:
        pytest.skip("full-auto needs a confining OS tier")
    _servers(tmp_path / "xdg" / "keel" / "mcp.json")
    questions: list[str] = []

    def person(question: str) -> str:
        questions.append(question)
        return "y"

    with ScriptedEngineServer([{"tool_calls": [call("mcp__fx__add", a=1, b=2)]}, {"content": "3"}]) as server:
        agent = _agent(calc_repo, server, tmp_path, f'[permissions]\napproval = "{mode}"\n', prompt=person)
        try:
            agent.run("What are 1 + 2 and 3 + 4? Use the fx server.")
        finally:
            agent.close()
        assert _tool_results(server.requests[1])[-1] == "3"
    asked = [q for q in questions if "keel wants to call MCP tool mcp__fx__add" in q]
    assert len(asked) == (1 if mode == "auto-edit" else 0), questions


def test_project_servers_start_only_in_a_trusted_project(calc_repo, tmp_path):
    from keel.ext.trust import is_trusted

    _servers(calc_repo / ".mcp.json")
    with ScriptedEngineServer([{"content": "x"}]) as server:
        agent = _agent(calc_repo, server, tmp_path)
        agent.close()
    assert not any(n.startswith("mcp__") for n in agent.registry.names)
    assert any("not trusted" in w and "fx:" in w for w in agent.ext.warnings)
    # attended: keel asks whether to trust the project, then asks before each MCP call ("a": this session)
    questions: list[str] = []

    def person(question: str) -> str:
        questions.append(question)
        return "y" if "Trust it" in question else "a"

    script = [{"tool_calls": [call("mcp__fx__add", a=1, b=2)]}, {"tool_calls": [call("mcp__fx__add", a=3, b=4)]},
              {"content": "3 and 7"}]
    with ScriptedEngineServer(script) as server:
        agent = _agent(calc_repo, server, tmp_path, '[permissions]\napproval = "interactive"\n', prompt=person)
        try:
            agent.run("What are 1 + 2 and 3 + 4? Use the fx server.")
        finally:
            agent.close()
        results = [_tool_results(r)[-1] for r in server.requests[1:]]
    assert results == ["3", "7"] and is_trusted(calc_repo)
    assert "Trust it" in questions[0] and "fx: " in questions[0]
    assert len(questions) == 2 and "keel wants to call MCP tool mcp__fx__add" in questions[1]


def test_a_server_that_cannot_start_is_a_warning_and_a_bad_file_a_config_error(calc_repo, tmp_path):
    path = tmp_path / "xdg" / "keel" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"gone": {"command": str(tmp_path / "no-such-server")}}}))
    with ScriptedEngineServer([{"content": "x"}]) as server:
        agent = _agent(calc_repo, server, tmp_path)
        agent.close()
    assert any("MCP server 'gone' is unavailable" in w for w in agent.ext.warnings)
    path.write_text('{"mcpServers": {"bad": {"args": []}}}')
    with ScriptedEngineServer([{"content": "x"}]) as server, pytest.raises(EngineError) as err:
        _agent(calc_repo, server, tmp_path)
    assert "mcp.json: server 'bad'" in err.value.message and "command" in err.value.message


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "not valid JSON"),
    ('{"mcpServers": []}', "expected"),
    ('{"mcpServers": {"a b": {"command": "x"}}}', "names use"),
    ('{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}', "exactly one"),
    ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "list of strings"),
    ('{"mcpServers": {"a": {"url": "http://h", "type": "sse"}}}', "not supported"),
])
def test_parse_servers_errors(text, problem):
    with pytest.raises(McpConfigError, match=problem):
        parse_servers(text, "f.json", "user")


def test_names_and_rules():
    assert tool_name("my.server", "do it") == "mcp__my_server__do_it"
    rules = {"allow": ["mcp__gh"], "deny": ["mcp__gh__delete_repo"]}
    assert rule_decision("mcp__gh__delete_repo", "gh", rules) == "deny"
    assert rule_decision("mcp__gh__list", "gh", rules) == "allow"
    assert rule_decision("mcp__other__x", "other", rules) is None
    [disabled] = parse_servers('{"mcpServers": {"a": {"url": "http://h"}, "b": {"command": "x", "disabled": true}}}',
                               "f", "user")
    assert disabled.name == "a" and disabled.url == "http://h"


def test_a_streamable_http_server(calc_repo, tmp_path):
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(FIXTURE), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        path = tmp_path / "xdg" / "keel" / "mcp.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"mcpServers": {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}}))
        script = [{"tool_calls": [call("mcp__web__add", a=20, b=22)]}, {"content": "42"}]
        with ScriptedEngineServer(script) as server:
            agent = _agent(calc_repo, server, tmp_path, '[permissions]\nallow = ["mcp__web__add"]\n')
            try:
                agent.run("add")
            finally:
                agent.close()
            assert _tool_results(server.requests[1])[-1] == "42"
    finally:
        proc.kill()
        proc.wait()
