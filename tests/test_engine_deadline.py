"""The wall clock always wins over the engine (keel issue 32, item 3).

Measured before: against a server that accepts and never answers, `keel run … --max-seconds 15` ran 901 s
until killed; a reply delayed 40 s with `--max-seconds 5` stopped after 40.6 s. Here with real servers on
127.0.0.1 — one that accepts and never answers, one that answers late (the scripted engine's delay_s), one
that starts a stream and goes silent, one that asks to retry in a minute — through `python -m keel.cli.main
run` and through the client itself.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.engine.client import OpenAICompatEngine
from keel.engine.runaway import GuardedEngine, ReplyCut
from keel.engine.types import EngineError, StreamDelta
from keel.testing.server import ScriptedEngineServer

SLACK_S = 6.0   # start-up of a keel process and the loop's stop on a shared 2-core machine


class SilentServer:
    """Accepts every connection and reads the request; answers nothing (``first``: only the response
    headers and one SSE event, then nothing)."""

    def __init__(self, first: bytes = b"") -> None:
        self.first = first
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.accepted = 0
        self.requests: list[str] = []    # the request lines read ("POST /v1/chat/completions HTTP/1.1")
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            self.requests.append(conn.recv(65536).split(b"\r\n", 1)[0].decode())
            if self.first:
                conn.sendall(self.first)
        except OSError:
            pass

    @property
    def completions(self) -> int:
        return sum("/chat/completions" in line for line in self.requests)

    def close(self) -> None:
        self._stop.set()
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


FIRST_EVENT = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
               b"%x\r\n%s\r\n" % (len(b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'),
                                  b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'))


def test_a_server_that_never_answers_stops_at_max_seconds(silent: SilentServer, calc_repo: Path, run_keel):
    r = run_keel("run", "fix add() in calc.py", "--cwd", str(calc_repo), "--base-url", silent.base_url,
                 "--model", "m", "--max-seconds", "8", "--output-format", "json", timeout=120)
    assert r.result["stop_reason"] == "limit:wall_clock", r.stdout + r.stderr
    assert r.result["duration_s"] < 8 + SLACK_S and r.duration_s < 8 + 2 * SLACK_S, (r.result, r.duration_s)
    assert silent.completions == 1       # no retry was started that the deadline would not leave time for


def test_the_person_watching_sees_that_keel_waits_for_the_engine(silent: SilentServer, calc_repo: Path, run_keel):
    r = run_keel("run", "fix add() in calc.py", "--cwd", str(calc_repo), "--base-url", silent.base_url,
                 "--model", "m", "--max-seconds", "8", timeout=120)
    assert "waiting for the engine (5 s)" in r.stderr, r.stderr
    assert "limit:wall_clock" in r.stdout


def test_a_reply_later_than_the_deadline_is_not_waited_for(calc_repo: Path, run_keel):
    with ScriptedEngineServer([{"delay_s": 40, "content": "too late"}]) as server:
        r = run_keel("run", "fix add() in calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--max-seconds", "5", "--output-format", "json", timeout=120)
    assert r.result["stop_reason"] == "limit:wall_clock"
    assert r.result["duration_s"] < 5 + SLACK_S, r.result


def test_a_retry_after_longer_than_the_time_left_is_not_waited_for(calc_repo: Path, run_keel):
    script = [{"error": {"status": 429, "retry_after": 60}}, {"content": "after a minute"}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix add() in calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--max-seconds", "6", "--output-format", "json", timeout=120)
    assert r.result["stop_reason"] == "limit:wall_clock"
    assert r.result["duration_s"] < 6 + SLACK_S, r.result


def test_before_the_first_byte_the_engine_timeout_bounds_the_wait(silent: SilentServer):
    """No deadline: [engine] timeout_s alone ends each attempt, and each second of the wait is told."""
    seen: list[StreamDelta] = []
    engine = OpenAICompatEngine(silent.base_url, "m", timeout_s=2.5, max_attempts=2, backoff_base_s=0.1,
                                backoff_cap_s=0.1)
    started = time.monotonic()
    with pytest.raises(EngineError) as err:
        engine.complete([{"role": "user", "content": "hi"}], [], seen.append)
    assert err.value.kind == "retries" and "no reply within 2.5 s" in err.value.message
    assert time.monotonic() - started < 2 * 2.5 + 3
    assert silent.completions == 2


def test_after_the_first_byte_a_silent_stream_counts_as_cut():
    server = SilentServer(first=FIRST_EVENT)
    try:
        engine = OpenAICompatEngine(server.base_url, "m", idle_timeout_s=1.0, timeout_s=60, max_attempts=2,
                                    backoff_base_s=0.1, backoff_cap_s=0.1)
        seen: list[StreamDelta] = []
        started = time.monotonic()
        with pytest.raises(EngineError) as err:
            engine.complete([{"role": "user", "content": "hi"}], [], seen.append)
        assert "silent for 1 s" in err.value.message, err.value.message
        assert time.monotonic() - started < 6
        assert any(d.kind == "retry" for d in seen)   # the dropped attempt is said to be dropped
    finally:
        server.close()


def test_the_deadline_caps_a_wait_the_engine_timeout_would_allow(silent: SilentServer):
    """timeout_s is five minutes (a CPU server's prefill), the run has 3 s left: 3 s it is."""
    engine = GuardedEngine(OpenAICompatEngine(silent.base_url, "m", timeout_s=300), lambda: time.monotonic() + 3)
    started = time.monotonic()
    turn = engine.complete([{"role": "user", "content": "hi"}], [])
    assert turn.cut_reason == "deadline" and turn.finish_reason == "length"
    assert 2.5 < time.monotonic() - started < 5


def test_the_client_alone_stops_at_a_given_deadline(silent: SilentServer):
    engine = OpenAICompatEngine(silent.base_url, "m", timeout_s=300)
    started = time.monotonic()
    with pytest.raises(ReplyCut):
        engine.complete([{"role": "user", "content": "hi"}], [], deadline=time.monotonic() + 1.5)
    assert time.monotonic() - started < 3.5
