"""A real OpenAI-compatible HTTP server that replays a script, shaped like vLLM on the wire.

keel's own tests and users' tests point a real client at it: streaming arrives in many small SSE
chunks, tool-call arguments are split across deltas, usage and prefix-cache hits are reported, and
errors, throttling and cut connections happen exactly where the script says. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from keel.testing.script import (
    PromptMeter,
    ScriptError,
    ScriptPlayer,
    ScriptStep,
    cached_tokens_for,
    load_script,
    parse_step,
    serialize,
    step_usage,
    stream_deltas,
)

PROBE_HEADER = "X-Keel-Probe"
WRITE_BATCH_FRAMES = 512


class ScriptedEngineServer:
    """Serves ``script`` on a background thread from construction until ``close()``."""

    def __init__(self, script: str | os.PathLike[str] | Sequence[Any], host: str = "127.0.0.1",
                 port: int = 0, model: str = "scripted", api_key: str | None = None,
                 record: str | os.PathLike[str] | None = None, canned_probes: bool = False) -> None:
        self.model = model
        # True: `keel doctor`'s probes get a canned get_time call and use up no script line, so
        # doctor-then-run replays the script from its start. False (the default for tests that
        # emulate a server's quirks for doctor): probes are answered from the script like any request.
        self.canned_probes = canned_probes
        self.api_key = api_key
        self.record = record
        self._player = ScriptPlayer(load_script(script))
        self._meter = PromptMeter()
        self._requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd = _Httpd((host, port), _Handler, self)
        # A short poll keeps close() quick: shutdown() waits for the serve loop's next wake-up.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="keel-scripted-engine", daemon=True)
        self._closed = False
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        text = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{text}]" if ":" in text else text
        return f"http://{shown}:{port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        return self._player.remaining

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedEngineServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- called by request handlers ------------------------------------------------------------

    def _remember(self, body: dict[str, Any]) -> int:
        with self._lock:
            self._requests.append(body)
            self._counter += 1
            if self.record is not None:
                with open(self.record, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(body, ensure_ascii=False) + "\n")
            return self._counter


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 owner: ScriptedEngineServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.owner = owner
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streaming, as SDK connection pools expect
    server_version = "keel-scripted-engine"
    timeout = 60  # an idle keep-alive connection must not pin a thread forever
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # tests and the CLI's stdout stay clean; the record file is the log

    # ---- routing ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            owner = self.server.owner
            self._send_json(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "keel"}]})
        else:
            self._send_error(404, f"no route for GET {self.path}", "not_found_error", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized():
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route for POST {self.path}", "not_found_error", None)
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send_error(400, f"request body is not valid JSON: {exc}", "invalid_request_error", None)
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_error(400, "request body must be an object with a messages list",
                             "invalid_request_error", None)
            return
        owner = self.server.owner
        number = owner._remember(body)
        if body.get("model") != owner.model:
            self._send_error(404, f"The model '{body.get('model')}' does not exist.",
                             "invalid_request_error", "model_not_found")
            return
        # `keel doctor` marks its probes; they get a canned tool call so they use up no script line.
        probe = owner.canned_probes and self.headers.get(PROBE_HEADER) == "doctor"
        step = _doctor_probe_step() if probe else owner._player.take(body)
        if step is None:
            self._send_error(500, owner._player.exhausted_message(), "server_error", "script_exhausted")
            return
        if step.refuses(body):  # the step stays next in line for the request asked again without it
            self._send_error(400, f'tool_choice "{step.refuse_tool_choice}" is not supported by this server',
                             "invalid_request_error", None)
            return
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.error is not None:
            err = step.error
            extra = {} if err.retry_after is None else {"Retry-After": _seconds(err.retry_after)}
            self._send_json(err.status, err.body(), extra)
            return
        prompt_chars, shared_chars = owner._meter.measure(body["messages"])
        usage = step_usage(step, prompt_chars + len(serialize(body.get("tools") or [])),
                           cached_tokens_for(shared_chars))
        completion_id = f"chatcmpl-scripted-{number}"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(step, completion_id, usage if include_usage and step.report_usage else None)
        else:
            self._send_json(200, self._completion(step, completion_id, usage))

    # ---- answers ---------------------------------------------------------------------------------

    def _authorized(self) -> bool:
        key = self.server.owner.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._send_error(401, "Incorrect API key provided.", "authentication_error", "invalid_api_key")
        return False

    def _completion(self, step: ScriptStep, completion_id: str, usage: dict[str, int]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": step.content if step.content or not step.tool_calls else None}
        if step.reasoning:
            message["reasoning_content"] = step.reasoning
        if step.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in step.tool_calls]
        out: dict[str, Any] = {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                               "model": self.server.owner.model,
                               "choices": [{"index": 0, "message": message, "logprobs": None,
                                            "finish_reason": step.finish_reason}]}
        if step.report_usage:
            out["usage"] = _usage_body(usage)
        return out

    def _stream(self, step: ScriptStep, completion_id: str, usage: dict[str, int] | None) -> None:
        created = int(time.time())
        model = self.server.owner.model

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        events = [chunk(d) for d in stream_deltas(step)]
        events.append(chunk({}, step.finish_reason))
        if usage is not None:
            events.append({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                           "model": model, "choices": [], "usage": _usage_body(usage)})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        cut = step.cut_after_chunks
        frames = [_http_chunk(f"data: {json.dumps(e, ensure_ascii=False)}\n\n") for e in events]
        if cut is not None and cut < len(frames):
            # No [DONE] and no terminating zero-length chunk: the client sees a broken body.
            self.wfile.write(b"".join(frames[:cut]))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        frames.append(_http_chunk("data: [DONE]\n\n"))
        frames.append(b"0\r\n\r\n")
        # In batches: the socket timeout bounds each write, and one write of a multi-megabyte stream
        # to a slow reader would hit it and cut the body. Paced steps go one frame at a time.
        batch = 1 if step.chunk_delay_s else WRITE_BATCH_FRAMES
        for start in range(0, len(frames), batch):
            self.wfile.write(b"".join(frames[start:start + batch]))
            if step.chunk_delay_s:
                self.wfile.flush()
                time.sleep(step.chunk_delay_s)

    def _send_error(self, status: int, message: str, err_type: str, code: str | None) -> None:
        self._send_json(status, {"error": {"message": message, "type": err_type, "code": code}})

    def _send_json(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] = {}) -> None:  # noqa: B006 - read only
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _doctor_probe_step() -> ScriptStep:
    return parse_step({"tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}]}, 0, "doctor probe")


def _http_chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _usage_body(usage: dict[str, int]) -> dict[str, Any]:
    return {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]}}


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# ---- command line ------------------------------------------------------------------------------


def serve_main(argv: list[str] | None = None) -> int:
    """``keel scripted-engine SCRIPT ...``: print the base URL first, then serve until a signal."""
    parser = argparse.ArgumentParser(
        prog="keel scripted-engine",
        description="Serve a scripted OpenAI-compatible engine that replays SCRIPT (JSON Lines).")
    parser.add_argument("script", help="JSON Lines file, one scripted response per line")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--record", metavar="FILE", help="append every request body to FILE as JSON Lines")
    parser.add_argument("--model", default="scripted", help="model name served (default: scripted)")
    parser.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY'")
    parser.add_argument("--script-probes", action="store_true",
                        help="answer `keel doctor`'s probe requests from the script too (by default they "
                             "get a canned tool call and use up no script line)")
    args = parser.parse_args(argv)
    try:
        server = ScriptedEngineServer(args.script, host=args.host, port=args.port, model=args.model,
                                      api_key=args.api_key, record=args.record,
                                      canned_probes=not args.script_probes)
    except ScriptError as exc:
        print(f"keel scripted-engine: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"keel scripted-engine: error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    if server.remaining == 0:
        server.close()
        print(f"keel scripted-engine: error: {args.script} has no responses (one JSON object per line "
              "is needed, e.g. {\"content\": \"Done.\"})", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(server.base_url, flush=True)
        stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()
    print(f"keel scripted-engine: served {len(server.requests)} requests, "
          f"{server.remaining} responses left", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(serve_main())
