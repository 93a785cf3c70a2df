"""`keel acp` driven by the ACP SDK's own client side over real stdio, against the scripted engine
on 127.0.0.1: a permission asked and answered, updates in order, a cancel mid-run that saves the
session, session/load resuming it in a new process, and bad input answered with protocol errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CALC, call

from keel.testing.server import ScriptedEngineServer

acp = pytest.importorskip("acp", reason="the ACP SDK is not installed (pip install 'keel[acp]')")
from acp import schema  # noqa: E402

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
FIXED = CALC.replace("a - b", "a + b")


class Client:
    """The editor's side: records every update and permission request in arrival order."""

    def __init__(self, answer: str | None = "allow_once") -> None:
        self.log: list[tuple[str, Any]] = []
        self.answer = answer
        self.asked = asyncio.Event()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        self.log.append(("permission", (tool_call, options)))
        self.asked.set()
        if self.answer is None:   # no one answers until the run is cancelled
            await asyncio.sleep(30)
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected",
                                                                              option_id=self.answer))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.log.append((update.session_update, update))

    def on_connect(self, conn: Any) -> None:
        pass

    def updates(self, kind: str) -> list[Any]:
        return [u for k, u in self.log if k == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.updates(kind))


def spawn(client: Client, server: ScriptedEngineServer, env: dict[str, str], *extra: str) -> Any:
    return acp.spawn_agent_process(client, sys.executable, "-m", "keel.cli.main", "acp",
                                   "--base-url", server.base_url, "--model", "scripted", *extra, env=env)


def state(env: dict[str, str], session_id: str) -> dict[str, Any]:
    return json.loads((Path(env["KEEL_HOME"]) / "sessions" / session_id / "state.json").read_text())


async def stderr_of(proc: Any) -> str:
    return (await proc.stderr.read()).decode() if proc.stderr else ""


def test_prompt_edits_with_permission_and_streams_in_order(calc_repo, keel_env):
    script = [{"reasoning": "add() subtracts", "content": "Fixing calc.py.", "tool_calls": [FIX]},
              {"tool_calls": [call("todo_write", todos=[{"content": "fix add", "status": "done"}])]},
              {"tool_calls": [call("finish", summary="add() adds now; the test passes.")]}]

    async def scenario() -> tuple[Client, Any, str]:
        client = Client()
        async with spawn(client, server, keel_env) as (conn, proc):
            init = await conn.initialize(protocol_version=1)
            assert init.protocol_version == 1 and init.agent_capabilities.load_session
            session = await conn.new_session(cwd=str(calc_repo))
            done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("fix the failing test")])
        return client, (session.session_id, done), await stderr_of(proc)

    with ScriptedEngineServer(script) as server:
        client, (session_id, done), err = asyncio.run(scenario())
    assert done.stop_reason == "end_turn"
    assert (calc_repo / "calc.py").read_text() == FIXED
    kinds = [k for k, _ in client.log]
    assert kinds[0] == "agent_thought_chunk" and client.text("agent_thought_chunk") == "add() subtracts"
    edit_id = client.updates("tool_call")[0].tool_call_id
    lifecycle = [(k, getattr(u, "status", None)) for k, u in client.log
                 if getattr(u, "tool_call_id", None) == edit_id or k == "permission"]
    # announced, started, asked about (while it waits), then done: the order an editor renders
    assert lifecycle == [("tool_call", "pending"), ("tool_call_update", "in_progress"), ("permission", None),
                         ("tool_call_update", "completed")]
    start = client.updates("tool_call")[0]
    assert start.kind == "edit" and start.locations[0].path == str(calc_repo / "calc.py")
    tool, options = client.updates("permission")[0]
    assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once"}
    assert tool.content[-1].new_text == FIXED and tool.content[-1].old_text == CALC   # the proposed change
    diff = [u for u in client.updates("tool_call_update") if u.status == "completed"
            and u.tool_call_id == edit_id][0].content[0]
    assert (diff.type, diff.old_text, diff.new_text) == ("diff", CALC, FIXED)
    assert client.updates("plan")[0].entries[0].content == "fix add"
    assert client.updates("plan")[0].entries[0].status == "completed"
    verify = [u for u in client.updates("tool_call") if u.tool_call_id.startswith("verify-")]
    assert verify and verify[0].status == "in_progress" and verify[0].title == "Verify"   # shown as it starts
    ended = [u for u in client.updates("tool_call_update") if u.tool_call_id == verify[0].tool_call_id]
    assert ended[-1].status == "completed" and "passed" in ended[-1].content[0].content.text
    assert ended[-1].title == "Verify: passed" and ended[-1].raw_output["elapsed_s"] >= 0
    # the person is asked before the baseline checks run, not after them: nobody waits on the checks
    order = [k if k == "permission" else u.tool_call_id.split("-")[0] for k, u in client.log
             if k == "permission" or (k == "tool_call" and u.tool_call_id.startswith("baseline-"))]
    assert order == ["permission", "baseline"]
    text = client.text()
    assert text.startswith("Fixing calc.py.") and "add() adds now" in text
    assert kinds[-1] == "agent_message_chunk" and "keel: complete" in text and "verification passed" in text
    assert state(keel_env, session_id)["status"] == "complete"
    assert "Traceback" not in err


def test_rejected_edit_leaves_the_file_and_fails_the_call(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"content": "Understood, I leave calc.py alone."}]

    async def scenario() -> Client:
        client = Client(answer="reject")
        async with spawn(client, server, keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(calc_repo))
            await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("fix the bug in calc.py")])
        return client

    with ScriptedEngineServer(script) as server:
        client = asyncio.run(scenario())
        requests = server.requests
    assert (calc_repo / "calc.py").read_text() == CALC
    edit_id = client.updates("tool_call")[0].tool_call_id
    assert [u.status for u in client.updates("tool_call_update") if u.tool_call_id == edit_id][-1] == "failed"
    assert not [u for u in client.updates("tool_call") if u.tool_call_id.startswith("baseline-")]   # no change: no baseline
    assert "refused by the user" in requests[1]["messages"][-1]["content"]


def test_cancel_mid_run_saves_and_load_resumes_in_a_new_process(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]},
              {"delay_s": 20, "content": "never seen: the run is cancelled while the engine thinks"},
              {"tool_calls": [call("finish", summary="Resumed and finished.")]}]

    async def cancel_run() -> tuple[str, Any, float, Client]:
        client = Client()
        async with spawn(client, server, keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(calc_repo))
            prompt = asyncio.create_task(conn.prompt(session_id=session.session_id,
                                                     prompt=[acp.text_block("fix the failing test")]))
            while len(server.requests) < 2:   # the second model call is in flight (20 s delay)
                await asyncio.sleep(0.05)
            started = time.monotonic()
            await conn.cancel(session_id=session.session_id)
            done = await asyncio.wait_for(prompt, 15)
            return session.session_id, done, time.monotonic() - started, client

    async def load_and_go_on(session_id: str) -> tuple[Client, Any]:
        client = Client()
        async with spawn(client, server, keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(calc_repo), session_id=session_id)
            replayed = list(client.log)
            done = await conn.prompt(session_id=session_id, prompt=[acp.text_block("please go on")])
        return client, (replayed, done)

    with ScriptedEngineServer(script) as server:
        session_id, cancelled, took, first = asyncio.run(cancel_run())
        assert cancelled.stop_reason == "cancelled" and took < 10
        saved = state(keel_env, session_id)
        assert saved["status"] == "interrupted" and saved["steps"] >= 1
        assert (calc_repo / "calc.py").read_text() == FIXED   # the edit before the cancel is kept
        client, (replayed, done) = asyncio.run(load_and_go_on(session_id))
        last = server.requests[-1]
    assert replayed[0][0] == "user_message_chunk" and replayed[0][1].content.text == "fix the failing test"
    assert any(k == "tool_call" and u.title == "Edit calc.py" for k, u in replayed)
    assert done.stop_reason == "end_turn" and "Resumed and finished." in client.text()
    resumed = last["messages"][-1]["content"] if last["messages"][-1]["role"] == "user" else \
        next(m["content"] for m in reversed(last["messages"]) if m["role"] == "user")
    assert "please go on" in json.dumps(last["messages"]) and "resumed" in json.dumps(last["messages"])
    assert resumed
    assert state(keel_env, session_id)["status"] == "complete"


def test_cancel_while_a_permission_is_pending_stops_the_run(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"content": "should not be asked for"}]

    async def scenario() -> tuple[Any, Client]:
        client = Client(answer=None)
        async with spawn(client, server, keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(calc_repo))
            prompt = asyncio.create_task(conn.prompt(session_id=session.session_id,
                                                     prompt=[acp.text_block("fix the failing test")]))
            await asyncio.wait_for(client.asked.wait(), 20)
            await conn.cancel(session_id=session.session_id)
            return await asyncio.wait_for(prompt, 15), client

    async def load(session_id: str) -> Client:
        client = Client()
        async with spawn(client, server, keel_env) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(calc_repo), session_id=session_id)
        return client

    with ScriptedEngineServer(script) as server:
        done, client = asyncio.run(scenario())
        assert len(server.requests) == 1   # stopped at once, no further model call
        saved_id = next(p.name for p in (Path(keel_env["KEEL_HOME"]) / "sessions").iterdir() if p.is_dir())
        replayed = asyncio.run(load(saved_id))
    assert done.stop_reason == "cancelled"
    assert (calc_repo / "calc.py").read_text() == CALC
    saved = state(keel_env, saved_id)
    assert saved["status"] == "interrupted"                        # a cancel, not a refusal the model goes on from
    answer = [m for m in saved["messages"] if m["role"] == "tool"][-1]["content"]
    assert answer.startswith("Interrupted by the user") and "refused" not in answer
    log = [json.loads(line) for line in (Path(keel_env["KEEL_HOME"]) / "sessions" / f"{saved_id}.jsonl")
           .read_text().splitlines()]
    approval = next(e for e in log if e["type"] == "approval")
    assert approval["cancelled"] is True and approval["allowed"] is False
    edit = [u for u in replayed.updates("tool_call_update") if u.tool_call_id.startswith("h-")]
    assert [u.status for u in edit] == ["failed"]                  # replayed as cut short, not as done


def test_unknown_session_gets_a_protocol_error(calc_repo, keel_env):
    async def scenario() -> tuple[list[Any], str]:
        errors = []
        async with spawn(Client(), server, keel_env) as (conn, proc):
            await conn.initialize(protocol_version=1)
            for attempt in (lambda: conn.prompt(session_id="nope", prompt=[acp.text_block("hi")]),
                            lambda: conn.load_session(cwd=str(calc_repo), session_id="20990101-000000-abcdef"),
                            lambda: conn.load_session(cwd=str(calc_repo), session_id="../../etc"),
                            lambda: conn.new_session(cwd="relative/dir")):
                with pytest.raises(acp.RequestError) as info:
                    await attempt()
                errors.append(info.value)
            session = await conn.new_session(cwd=str(calc_repo))   # and the connection still works
            assert session.session_id
        return errors, await stderr_of(proc)

    with ScriptedEngineServer([]) as server:
        errors, err = asyncio.run(scenario())
    assert [e.code for e in errors] == [-32602] * 4
    assert "no saved session" in json.dumps(errors[1].data) and "absolute" in json.dumps(errors[3].data)
    assert "Traceback" not in err


def _raw(env: dict[str, str], server: ScriptedEngineServer, lines: list[bytes], wait_for: int) -> list[dict[str, Any]]:
    """Write raw lines to `keel acp` and read ``wait_for`` replies (no SDK: the bytes are the test)."""
    proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "acp", "--base-url", server.base_url,
                             "--model", "scripted"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(lines))
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(wait_for)]
    proc.stdin.close()
    assert proc.wait(20) == 0
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert "Traceback" not in err, err
    return replies


def test_malformed_messages_get_json_rpc_errors_and_the_stream_goes_on(keel_env):
    init = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}
    lines = [b"{not json\n", b'[1, 2]\n', b'{"id": 3, "method": "initialize"}\n',
             b'{"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"sessionId": 5}}\n',
             b'{"jsonrpc": "2.0", "id": 5, "method": "no/such/method", "params": {}}\n',
             json.dumps(init).encode() + b"\n"]
    with ScriptedEngineServer([]) as server:
        replies = _raw(keel_env, server, lines, 6)
    by_id = {r.get("id"): r for r in replies}
    codes = [r["error"]["code"] for r in replies if r.get("id") is None]
    assert sorted(codes) == [-32700, -32600]
    assert by_id[3]["error"]["code"] == -32600
    assert by_id[4]["error"]["code"] == -32602
    assert by_id[5]["error"]["code"] == -32601
    assert by_id[7]["result"]["protocolVersion"] == 1   # the stream survived every bad line


def test_client_that_disconnects_mid_run_loses_nothing(calc_repo, keel_env):
    script = [{"tool_calls": [FIX]}, {"delay_s": 20, "content": "the client is gone by now"}]
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(calc_repo), "mcpServers": []}}
    with ScriptedEngineServer(script) as server:
        proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "acp", "--base-url", server.base_url,
                                 "--model", "scripted", "--approval", "auto-edit"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=keel_env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(init) + "\n" + json.dumps(new) + "\n").encode())
        proc.stdin.flush()
        replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
        session_id = replies[1]["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "fix the failing test"}]}}
        proc.stdin.write((json.dumps(prompt) + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 20
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.stdin.close()   # the editor went away mid-run
        proc.stdout.close()
        code = proc.wait(15)
        err = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 0 and "Traceback" not in err, err
    assert (calc_repo / "calc.py").read_text() == FIXED
    saved = state(keel_env, session_id)
    assert saved["status"] == "interrupted" and any(m.get("tool_calls") for m in saved["messages"])


@pytest.mark.timeout(240)
def test_acplint_conformance(keel_env, tmp_path):
    """acplint (PyPI), the only ACP linter that runs offline. Version 0.1.0 checks two things against
    an outdated schema (protocolVersion as the string "1"; the prompt under "content" instead of the
    spec's "prompt"), so the checks that fail on those are named here; everything else must pass."""
    pytest.importorskip("acplint", reason="acplint is not installed (it comes with keel[dev])")
    known = {"initialize_v1", "protocol_version_returned", "schema_initialize",   # protocolVersion "1"
             "session_update_received", "agent_message_chunk_received", "prompt_stop_reason"}   # "content"
    report, workspace = tmp_path / "acplint.json", tmp_path / "ws"
    workspace.mkdir()   # no checks to run: the linter's dozens of prompts stay quick
    with ScriptedEngineServer([{"content": "Hello."}] * 40) as server:
        subprocess.run([sys.executable, "-m", "acplint.cli", "--agent", sys.executable, "--agent-args",
                        f"-m keel.cli.main acp --base-url {server.base_url} --model scripted",
                        "--cwd", str(workspace), "--timeout", "20", "--output", "json",
                        "--output-file", str(report)], env=keel_env, timeout=200, capture_output=True)
    results = json.loads(report.read_text())["results"]
    failed = {r["name"] for r in results if r["status"] in ("FAIL", "ERROR")}
    assert failed <= known, failed
    assert sum(r["status"] == "PASS" for r in results) >= 35


def test_without_the_sdk_keel_acp_says_what_to_install(keel_env, tmp_path):
    shadow = tmp_path / "shadow"
    (shadow / "acp").mkdir(parents=True)
    (shadow / "acp" / "__init__.py").write_text("raise ImportError('no SDK here')\n")
    env = {**keel_env, "PYTHONPATH": str(shadow)}
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "acp"], env=env, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "pip install 'keel[acp]'" in proc.stderr


def test_requests_from_a_file_are_answered_in_turn_and_the_exit_is_0(calc_repo, keel_env, tmp_path):
    """`keel acp < requests.jsonl > replies.jsonl`: stdin and stdout are files, not pipes. Each request
    is answered in turn — a saved session loaded, then prompted — and a malformed line gets its error."""
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]},
                               {"content": "calc.py defines add."}, {"content": "It subtracts."}]) as server:
        first = subprocess.run([sys.executable, "-m", "keel.cli.main", "run", "what is in calc.py?", "--cwd",
                                str(calc_repo), "--base-url", server.base_url, "--model", "scripted",
                                "--output-format", "json"], env=keel_env, capture_output=True, text=True)
        session_id = json.loads(first.stdout.splitlines()[-1])["session_id"]
        requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
                    "{not json",
                    {"jsonrpc": "2.0", "id": 2, "method": "session/load",
                     "params": {"cwd": str(calc_repo), "sessionId": session_id, "mcpServers": []}},
                    {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                     "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "and what is wrong?"}]}}]
        (tmp_path / "requests.jsonl").write_text("\n".join(r if isinstance(r, str) else json.dumps(r)
                                                           for r in requests) + "\n")
        with (tmp_path / "requests.jsonl").open() as stdin, (tmp_path / "replies.jsonl").open("w") as stdout:
            done = subprocess.run([sys.executable, "-m", "keel.cli.main", "acp", "--base-url", server.base_url,
                                   "--model", "scripted"], env=keel_env, stdin=stdin, stdout=stdout,
                                  stderr=subprocess.PIPE, text=True, timeout=120)
    replies = [json.loads(line) for line in (tmp_path / "replies.jsonl").read_text().splitlines()]
    answers = {r["id"]: r for r in replies if "method" not in r}
    assert done.returncode == 0 and "failed" not in done.stderr, done.stderr
    assert answers[1]["result"]["protocolVersion"] == 1
    assert answers[None]["error"]["code"] == -32700
    assert "error" not in answers[2]
    assert answers[3]["result"]["stopReason"] == "end_turn"
    said = "".join(r["params"]["update"]["content"]["text"] for r in replies if r.get("method") == "session/update"
                   and r["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
    assert "It subtracts." in said
