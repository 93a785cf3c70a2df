"""`keel mcp-serve` driven by the official MCP client SDK over real stdio (the server is a subprocess),
against the scripted engine on 127.0.0.1: a run that fixes a bug, a busy workspace refused (by the
same server and by a second one), bad input answered with errors, and a client that goes away mid-run."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import CALC, call

from keel.testing.server import ScriptedEngineServer

pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install 'keel[mcp]'")

import anyio  # noqa: E402  (comes with the SDK)

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
FIXED = CALC.replace("a - b", "a + b")


def _command(base_url: str) -> list[str]:
    return [sys.executable, "-m", "keel.cli.main", "mcp-serve", "--base-url", base_url, "--model", "scripted"]


@asynccontextmanager
async def _client(base_url: str, env: dict[str, str], errlog: Path):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = _command(base_url)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _body(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return dict(json.loads(result.content[0].text))


def _error(result: Any) -> str:
    assert result.is_error, result.content[0].text
    text = str(result.content[0].text)
    assert "Traceback" not in text
    return text


def test_run_task_fixes_a_bug_with_passing_verification(calc_repo, keel_env, tmp_path):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"tool_calls": [FIX]},
              {"tool_calls": [call("finish", summary="add() adds now")]}]
    progress: list[tuple[float, str]] = []

    async def on_progress(value: float, _total: float | None, message: str | None) -> None:
        progress.append((value, message or ""))

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with _client(server.base_url, keel_env, tmp_path / "err.txt") as s:
            tools = (await s.list_tools()).tools
            assert {"run_task", "session_status", "list_sessions"} <= {t.name for t in tools}
            for tool in tools:   # one paragraph each, not the source's indentation
                assert "  " not in tool.description and "\n" not in tool.description, tool.description
            result = _body(await s.call_tool("run_task", {"task": "fix the failing test",
                                                          "workspace": str(calc_repo)},
                                             progress_callback=on_progress))
            status = _body(await s.call_tool("session_status", {"session_id": result["session_id"]}))
            listed = _body(await s.call_tool("list_sessions", {"workspace": str(calc_repo)}))
            return result, status, listed

    with ScriptedEngineServer(script) as server:
        result, status, listed = anyio.run(main)
    assert (result["status"], result["stop_reason"], result["summary"]) == ("complete", "complete", "add() adds now")
    assert result["verification"]["status"] == "passed"
    assert all(c["passed"] for c in result["verification"]["checks"])
    assert result["changes"]["diffstat"] == "1 file changed, 1 insertion(+), 1 deletion(-)"
    assert result["files_changed"] == ["calc.py"] and (calc_repo / "calc.py").read_text() == FIXED
    assert result["cost_usd"] is None   # no prices configured: unknown, not 0
    messages = [m for _, m in progress]
    assert messages[0].startswith(f"session {result['session_id']} started in {calc_repo}")
    assert "step 2: edit_file → ok" in messages and messages[-1] == "stopped: complete (complete)"
    assert [v for v, _ in progress] == sorted({v for v, _ in progress})   # strictly growing
    assert (status["status"], status["steps"]) == ("complete", 3)
    assert status["last_events"][-1]["type"] == "stop"
    assert listed["sessions"][0]["session_id"] == result["session_id"]
    assert "Traceback" not in (tmp_path / "err.txt").read_text()


def test_a_second_run_in_a_busy_workspace_is_refused(calc_repo, keel_env, tmp_path):
    # the first run's model call takes 4 s: the other calls arrive while it runs
    script = [{"tool_calls": [call("read_file", path="calc.py")], "delay_s": 4}, {"tool_calls": [FIX]},
              {"tool_calls": [call("finish", summary="fixed")]}]
    seen: list[str] = []

    async def main() -> tuple[dict[str, Any], str, str, dict[str, Any], dict[str, Any]]:
        started = anyio.Event()   # an anyio object belongs to the loop that runs main

        async def on_progress(_v: float, _t: float | None, message: str | None) -> None:
            seen.append(message or "")
            started.set()

        out: dict[str, Any] = {}
        async with _client(server.base_url, keel_env, tmp_path / "a.txt") as a, \
                _client(server.base_url, keel_env, tmp_path / "b.txt") as b:
            async def first() -> None:
                out["first"] = _body(await a.call_tool("run_task", {"task": "fix it", "workspace": str(calc_repo)},
                                                       progress_callback=on_progress))
            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await started.wait()
                session_id = seen[0].split()[1]
                same = _error(await a.call_tool("run_task", {"task": "another", "workspace": str(calc_repo)}))
                other = _error(await b.call_tool("run_task", {"task": "another", "workspace": str(calc_repo)}))
                live = _body(await a.call_tool("session_status", {"session_id": session_id}))
                for _ in range(20):   # the session is on disk once its first state is saved, just after
                    answer = await b.call_tool("session_status", {"session_id": session_id})
                    if not answer.is_error:
                        break
                    await anyio.sleep(0.1)
                from_b = _body(answer)
        return out["first"], same, other, live, from_b

    with ScriptedEngineServer(script) as server:
        first, same, other, live, from_b = anyio.run(main)
        remaining = server.remaining
    assert (first["status"], first["verification"]["status"]) == ("complete", "passed")
    assert remaining == 0   # the refused calls took no model turns
    assert f"workspace {calc_repo} is busy: this server is running session {first['session_id']}" in same
    assert "never interleaved" in same
    assert f"workspace {calc_repo} is busy: keel mcp-serve (pid" in other and "never interleaved" in other
    assert (live["status"], live["session_id"]) == ("running", first["session_id"])
    assert live["last_events"][0]["type"] == "session_start"
    assert from_b["status"] == "running"   # the other server reads it from disk: its process is alive


def test_bad_input_gets_error_results_and_the_server_goes_on(calc_repo, keel_env, tmp_path):
    from mcp.shared.exceptions import MCPError

    a_file = calc_repo / "calc.py"
    bad_calls = [
        ("session_status", {"session_id": "20990101-000000-abcdef"}, "no saved session"),
        ("session_status", {"session_id": "../../etc/passwd"}, "is not a session id"),
        ("session_status", {}, "session_id"),
        ("run_task", {"task": "fix it"}, "workspace"),
        ("run_task", {"task": "fix it", "workspace": str(tmp_path / "gone")},
         f"run_task: workspace {tmp_path / 'gone'}: no such directory"),   # the path said once
        ("run_task", {"task": "fix it", "workspace": str(a_file)}, "not a directory"),
        ("run_task", {"task": "fix it", "workspace": keel_env.get("HOME", "/root")}, "home directory"),
        ("run_task", {"task": "fix it", "workspace": "/"}, "refusing /"),
        ("run_task", {"task": "  ", "workspace": str(calc_repo)}, "task is empty"),
        ("run_task", {"task": "fix it", "workspace": str(calc_repo), "max_steps": 0},
         "run_task: max_steps: must be at least 1 (got 0)"),
        ("run_task", {"task": "fix it", "workspace": str(calc_repo), "max_steps": "many"},
         "run_task: max_steps: must be a whole number (got 'many')"),
        ("run_task", {"task": "fix it", "workspace": str(calc_repo), "accept": [""]}, "accept needs"),
        ("list_sessions", {"workspace": str(tmp_path / "gone")}, "not a directory"),
    ]

    async def main() -> tuple[list[str], str, dict[str, Any], dict[str, Any]]:
        async with _client("http://127.0.0.1:9/v1", keel_env, tmp_path / "err.txt") as s:
            texts = [_error(await s.call_tool(name, args)) for name, args, _ in bad_calls]
            try:   # the SDK answers an unknown tool with an error result (older ones: a protocol error)
                unknown = _error(await s.call_tool("no_such_tool", {}))
            except MCPError as e:
                unknown = str(e)
            # an engine that is not there: the run stops with an error result, the workspace is freed
            failed = _body(await s.call_tool("run_task", {"task": "fix it", "workspace": str(calc_repo)}))
            listed = _body(await s.call_tool("list_sessions", {"workspace": str(calc_repo)}))
        return texts, unknown, failed, listed

    texts, unknown, failed, listed = anyio.run(main)
    for text, (name, _args, expected) in zip(texts, bad_calls, strict=True):
        assert expected in text, (name, text)
        assert "\n" not in text and "http" not in text and "Error executing" not in text, text   # one plain line
    assert "no_such_tool" in unknown
    assert failed["status"] in ("error", "incomplete") and failed["stop_reason"] != "complete"
    assert [s["session_id"] for s in listed["sessions"]] == [failed["session_id"]]
    assert (calc_repo / "calc.py").read_text() == CALC
    assert "Traceback" not in (tmp_path / "err.txt").read_text()


def _send(proc: subprocess.Popen[str], message: dict[str, Any] | str) -> None:
    assert proc.stdin is not None
    proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    proc.stdin.flush()


def test_a_client_that_disconnects_mid_run_loses_nothing(calc_repo, keel_env, tmp_path):
    """Raw JSON-RPC: a malformed line and an unknown method first, then a run_task, then stdin closes
    while the model call is in flight. The run stops after that step, saved as interrupted (resumable),
    the workspace lock is released and the server exits on its own."""
    script = [{"tool_calls": [call("read_file", path="calc.py")], "delay_s": 3}, {"tool_calls": [FIX]},
              {"tool_calls": [call("finish", summary="fixed")]}]
    with ScriptedEngineServer(script) as server, (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.Popen(_command(server.base_url), env=keel_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        try:
            _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            assert json.loads(proc.stdout.readline())["id"] == 1
            _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _send(proc, "{this is not json")
            _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
            reply = json.loads(proc.stdout.readline())
            assert reply["id"] == 2 and reply["error"]["code"] == -32601   # method not found
            _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "run_task", "arguments": {"task": "fix it", "workspace": str(calc_repo)},
                "_meta": {"progressToken": "p"}}})
            note = json.loads(proc.stdout.readline())
            assert note["method"] == "notifications/progress" and "started in" in note["params"]["message"]
            session_id = note["params"]["message"].split()[1]
            deadline = time.monotonic() + 30   # the first model call is in flight (it takes 3 s)
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests, "the run never called the model"
            proc.stdin.close()   # the client is gone, mid model call
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        remaining = server.remaining
    assert code == 0
    assert remaining == 2   # the step in flight ended, no further step ran
    session = Path(keel_env["KEEL_HOME"]) / "sessions" / session_id
    state = json.loads((session / "state.json").read_text())
    assert (state["status"], state["stop_reason"], state["steps"]) == ("interrupted", "interrupted", 1)
    events = [json.loads(line) for line in session.with_suffix(".jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "interrupted"
    [lock] = (Path(keel_env["KEEL_HOME"]) / "locks").iterdir()
    with lock.open() as fh:   # free again: a later run may take the workspace
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert (calc_repo / "calc.py").read_text() == CALC
    assert "Traceback" not in (tmp_path / "err.txt").read_text()


def _start_run(proc: subprocess.Popen[str], workspace: Path) -> str:
    """initialize, then a run_task with a progress token; the session id from the first progress note."""
    assert proc.stdout is not None
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert json.loads(proc.stdout.readline())["id"] == 1
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_task", "arguments": {"task": "run the slow job", "workspace": str(workspace)},
        "_meta": {"progressToken": "p"}}})
    note = json.loads(proc.stdout.readline())
    assert "started in" in note["params"]["message"]
    return str(note["params"]["message"].split()[1])


def _sleeping(seconds: str) -> list[int]:
    """PIDs of live `sleep SECONDS` processes, seen from /proc (sandboxed or not)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()]:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("how", ["disconnect", "sigterm"])
def test_a_running_command_is_stopped_when_the_client_leaves_and_the_session_is_interrupted(
        calc_repo, keel_env, tmp_path, how):
    """A command that would run a minute: the client closes stdin (or the server gets SIGTERM) while it
    runs. The command's process tree is killed at once, the session is saved as interrupted (not
    crashed) with the call answered as cut short, and the server exits within seconds."""
    import signal
    import time

    script = [{"tool_calls": [call("run_shell", command="sleep 61.5")]},
              {"tool_calls": [call("finish", summary="never reached")]}]
    with ScriptedEngineServer(script) as server, (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.Popen(_command(server.base_url), env=keel_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            session_id = _start_run(proc, calc_repo)
            deadline = time.monotonic() + 30
            while not _sleeping("61.5") and time.monotonic() < deadline:   # the command runs
                time.sleep(0.1)
            assert _sleeping("61.5")
            started = time.monotonic()
            if how == "disconnect":
                assert proc.stdin is not None
                proc.stdin.close()
            else:
                proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
            took = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert took < 10, took                                   # not the minute the command would have run
    assert code == (0 if how == "disconnect" else -signal.SIGTERM)
    assert not _sleeping("61.5")                             # its process tree is gone
    session = Path(keel_env["KEEL_HOME"]) / "sessions" / session_id
    state = json.loads((session / "state.json").read_text())
    assert (state["status"], state["stop_reason"]) == ("interrupted", "interrupted")   # not crashed
    answer = [m for m in state["messages"] if m["role"] == "tool"][-1]["content"]
    assert answer.startswith("Interrupted by the user")
    assert "Traceback" not in (tmp_path / "err.txt").read_text()
