"""`--local [MODEL]` is taken by every command that runs a model — `keel`, `keel repl`, `keel acp`,
`keel mcp-serve` as `keel run` — with one declaration (keel.cli.usage.add_local_flag). A model
path that does not exist gets the in-process engine's own message, through each real entry point."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pexpect
import pytest

MISSING = "/nonexistent/model.gguf"
SAID = f"local model '{MISSING}' does not exist"


@pytest.mark.parametrize("argv", [["--local", MISSING], ["repl", "--local", MISSING]], ids=["keel", "keel repl"])
def test_the_repl_takes_local(calc_repo, keel_env, argv):
    child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", *argv, "--cwd", str(calc_repo)],
                          env=keel_env, encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert SAID in child.before and "unrecognized arguments" not in child.before
    assert child.exitstatus == 2


@pytest.mark.parametrize("command", ["run", "repl", "acp", "mcp-serve"])
def test_every_command_that_runs_a_model_lists_local_in_its_help(run_keel, command):
    r = run_keel(command, "--help")
    assert r.code == 0 and "--local [MODEL]" in r.stdout and "GGUF" in r.stdout


def test_keel_acp_takes_local(calc_repo, keel_env):
    acp = pytest.importorskip("acp", reason="the ACP SDK is not installed (pip install 'keel[acp]')")

    class Client:
        async def request_permission(self, *_a, **_k):
            raise AssertionError("nothing to approve")

        async def session_update(self, *_a, **_k):
            return None

        def on_connect(self, _conn):
            pass

    async def scenario() -> str:
        async with acp.spawn_agent_process(Client(), sys.executable, "-m", "keel.cli.main", "acp", "--local", MISSING,
                                           env=keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            with pytest.raises(Exception) as refused:
                await conn.new_session(cwd=str(calc_repo))
            return str(refused.value) + json.dumps(getattr(refused.value, "data", None))

    assert SAID in asyncio.run(scenario())


def test_keel_mcp_serve_takes_local(calc_repo, keel_env, tmp_path):
    pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install 'keel[mcp]'")
    proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "mcp-serve", "--local", MISSING], env=keel_env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_task", "arguments": {"task": "fix it", "workspace": str(calc_repo)}}})
        reply = json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert reply["result"]["isError"] and SAID in reply["result"]["content"][0]["text"]
