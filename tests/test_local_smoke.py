"""CI smoke test of the in-process engine on a real GGUF (Qwen2.5-Coder-0.5B-Instruct).

The model is test data fetched by ``scripts/fetch_test_model.py`` (.ci/run does it and passes the
path in KEEL_SMOKE_MODEL); without it, or without llama-cpp-python, the test skips and says why.
It runs the real ``keel run --local`` in a subprocess and watches that process: it must stop by
itself with a stated reason after at least one executed tool call, and never listen on a port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import smoke_model

TCP_LISTEN = "0A"


def listening_sockets(pid: int) -> list[str]:
    """TCP sockets in LISTEN state owned by process ``pid`` (via its fds and /proc/net/tcp*)."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile (e.g. the fd of this very listing)
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == TCP_LISTEN and cols[9] in inodes:
                found.append(f"{table}: {cols[1]}")
    return found


def test_proc_scan_sees_a_listening_socket() -> None:
    """The watcher itself works: a socket this process listens on is found."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert listening_sockets(os.getpid())


@pytest.mark.timeout(900)
def test_local_run_stops_by_itself_after_a_tool_call(tmp_path: Path) -> None:
    model = smoke_model()
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("The answer is 42.\n")
    config_home = tmp_path / "xdg"
    (config_home / "keel").mkdir(parents=True)
    # Short replies and a small window: a CI machine makes a few tokens per second.
    (config_home / "keel" / "config.toml").write_text("[engine]\nmax_tokens = 96\nlocal_context = 4096\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_"))}
    env.update(KEEL_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(config_home))
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as out_fh, err.open("w") as err_fh:  # files, not pipes: polling must not block it
        proc = subprocess.Popen(
            [sys.executable, "-m", "keel.cli.main", "run", "Read notes.txt and tell me the number in it.",
             "--local", str(model), "--max-steps", "3", "--max-seconds", "600", "--verify", "off",
             "--output-format", "json", "--cwd", str(work)],
            stdout=out_fh, stderr=err_fh, text=True, env=env, stdin=subprocess.DEVNULL)
        listening: list[str] = []
        try:
            while proc.poll() is None:
                listening += listening_sockets(proc.pid)
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.kill()
    stdout, stderr = out.read_text(), err.read_text()
    assert stdout.strip(), f"no result on stdout (exit {proc.returncode}): {stderr[-2000:]}"
    assert not listening, f"keel --local listened on a port: {listening}"
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["status"] in ("complete", "incomplete"), (result, stderr[-2000:])
    assert result["stop_reason"] and result["stop_reason"] != "interrupted", result
    events = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    executed = [e for e in events if e.get("type") == "tool_call"]
    assert executed, f"no tool call was executed; model said: {[e.get('content') for e in events if e.get('type') == 'model_call']}"
    stop = [e for e in events if e.get("type") == "stop"]
    assert stop and stop[-1]["reason"] == result["stop_reason"]
    setup = next(e for e in events if e.get("type") == "session_start")["engine_setup"]
    assert setup["threads"] >= 1 and setup["threads_mode"] == "auto", setup   # the choice is on record
    serving = next(e for e in events if e.get("type") == "session_start")["serving"]   # what served the run
    import hashlib

    import llama_cpp
    assert (serving["engine"], serving["server"], serving["server_version"]) == ("local", "llama-cpp-python",
                                                                                llama_cpp.__version__)
    assert serving["gguf_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert serving["quantization"] and len(serving["chat_template_sha256"]) == 64, serving
    assert serving["context_window"] == 4096 and serving["sampling"]["max_tokens"] == 96
    assert result["serving"]["gguf_sha256"] == serving["gguf_sha256"]
    assert sum(result["serving"]["tool_call_formats"].values()) == sum(1 for e in events
                                                                       if e.get("type") == "model_call" and e["tool_calls"])
    calls = [e for e in events if e.get("type") == "model_call"]
    assert calls and all(c["usage"]["prompt_tokens"] > 0 for c in calls)
    if len(calls) > 1:  # the KV cache carried the history: later steps evaluate only the new tail
        assert calls[1]["usage"]["cached_tokens"] > 0.5 * calls[1]["usage"]["prompt_tokens"], calls[1]["usage"]


@pytest.mark.timeout(600)   # a real model on a CPU: two prompt reads, under CI load minutes, not seconds
def test_a_deadline_cuts_the_reply_while_the_prompt_is_still_being_read() -> None:
    import time as clock

    from keel.engine.local import LocalEngine
    from keel.engine.runaway import GuardedEngine

    engine = LocalEngine(smoke_model(), n_ctx=4096, max_tokens=16)
    try:
        long_text = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(60))   # ~800 tokens: several 128-token chunks
        messages = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": f"{long_text}\n\nHow many lines were there?"}]
        guarded = GuardedEngine(engine, lambda: clock.monotonic() + 0.5)   # the run has half a second left
        turn = guarded.complete(messages, [], lambda d: None)
        assert (turn.finish_reason, turn.content, turn.cut_reason) == ("length", "", "deadline")
        assert turn.usage.completion_tokens == 0
        read = engine._llm.n_tokens
        assert 0 < read < turn.usage.prompt_tokens - 1   # stopped part way through the prompt
        again = GuardedEngine(engine).complete(messages, [], lambda d: None)   # no deadline
        assert again.usage.cached_tokens >= read - 1     # what was read before the cut is reused
        assert again.usage.completion_tokens > 0
    finally:
        engine.close()
