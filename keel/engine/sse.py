"""Reading a streamed Chat Completions response at the speed the bytes arrive.

The SDK's stream goes through an HTTP stack that handles every SSE event as its own HTTP chunk
and then builds a pydantic object per event; a 5 MB tool call (~650 000 events of 8 characters)
spent over a minute of CPU there. Streaming requests are therefore sent with ``http.client``
(chunked decoding in the standard library's buffered reader) and the body is cut into events at
blank lines here. The SDK still does everything else (model listing, non-streaming calls, and
streaming when a proxy is configured, which ``http.client`` would not honour).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.request
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

READ_BYTES = 1 << 16
ERROR_BODY_BYTES = 1 << 20


class StreamErrorEvent(Exception):
    """An ``{"error": {...}}`` event inside a stream; shaped like the SDK's APIError (message,
    body, code, type) so one description serves both."""

    def __init__(self, message: str, body: Any) -> None:
        super().__init__(message)
        self.message = message
        self.body = body
        self.code = str(body["code"]) if isinstance(body, dict) and body.get("code") is not None else None
        self.type = str(body["type"]) if isinstance(body, dict) and body.get("type") is not None else None


class ConnectTimeout(OSError):
    """No TCP (or TLS) handshake within the connect timeout. The name is what the client's
    error description looks for, as it does for the SDK's own exception of that name."""


class ConnectFailed(Exception):
    """Nothing answered at all; ``__cause__`` says why (refused, unresolvable, timed out)."""


def can_stream_raw(base_url: str) -> bool:
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return False
    proxies = urllib.request.getproxies()
    return not (proxies.get(url.scheme) or proxies.get("all")) or bool(urllib.request.proxy_bypass(url.hostname))


def open_stream(url: str, body: bytes, headers: dict[str, str], connect_timeout: float,
                read_timeout: float, wait: Callable[[socket.socket], None] | None = None
                ) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
    """POST ``body`` and return the response (status not checked) and its connection to close.

    ``wait(sock)``, when given, is called after the request is sent and returns once the reply's first
    byte can be read (or raises): the wait before it has bounds of its own (keel.engine.client); the
    socket's ``read_timeout`` then bounds each read after it."""
    parts = urlsplit(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=connect_timeout,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=connect_timeout)
    try:
        conn.connect()
    except TimeoutError:
        conn.close()
        raise ConnectFailed() from ConnectTimeout(f"no answer within {connect_timeout:g} s")
    except (ConnectionRefusedError, socket.gaierror) as exc:
        conn.close()
        raise ConnectFailed() from exc
    assert conn.sock is not None
    conn.sock.settimeout(read_timeout)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers={**headers, "Content-Length": str(len(body))})
        if wait is not None:
            wait(conn.sock)
        return conn.getresponse(), conn
    except BaseException:
        conn.close()
        raise


def list_model_ids(base_url: str, headers: dict[str, str], timeout: float) -> list[str] | None:
    """``GET /models`` without the SDK (explaining a 404 should not cost the SDK's import)."""
    try:
        return get_models(base_url, headers, timeout)[1]
    except (OSError, http.client.HTTPException):
        return None


def get_models(base_url: str, headers: dict[str, str], timeout: float) -> tuple[int, list[str] | None]:
    """(``GET /models``'s status, the model ids it lists or None); raises OSError when nothing answers."""
    parts = urlsplit(f"{base_url}/models")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path, headers=headers)
        response = conn.getresponse()
        if response.status != 200:
            return response.status, None
        try:
            data = json.loads(response.read(ERROR_BODY_BYTES)).get("data")
            return 200, [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, TypeError, AttributeError):
            return 200, None
    finally:
        conn.close()


def read_blocks(response: http.client.HTTPResponse, before_read: Callable[[], None] | None = None) -> Iterator[bytes]:
    """The body as it arrives, one block per socket read (never waiting to fill a buffer).

    A chunked body is de-chunked here in bulk: http.client's own reader does a readline and a
    few calls per HTTP chunk, and servers send every SSE event as its own chunk. ``before_read`` is
    called before each read (the client sets the socket's timeout to what the deadline leaves)."""
    ready = before_read or (lambda: None)
    if not response.chunked:
        while True:
            ready()
            if not (block := response.read1(READ_BYTES)):
                return
            yield block
    source = response.fp
    buf, pos = b"", 0
    while True:
        out: list[bytes] = []
        while (newline := buf.find(b"\r\n", pos)) >= 0:
            try:
                size = int(buf[pos:newline].split(b";", 1)[0], 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size line {buf[pos:newline][:40]!r}") from None
            if size == 0:  # the last chunk (trailers, if any, are not needed)
                if out:
                    yield b"".join(out)
                return
            end = newline + 2 + size
            if end + 2 > len(buf):
                break
            out.append(buf[newline + 2:end])
            pos = end + 2
        if out:
            yield b"".join(out)
        ready()
        more = source.read1(READ_BYTES)
        if not more:
            raise http.client.IncompleteRead(buf[pos:])
        buf, pos = buf[pos:] + more, 0


def error_details(raw: bytes, reason: str) -> tuple[str, str | None, str | None]:
    """The server's message, code and type from an error body, as the SDK would extract them."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = raw.decode("utf-8", errors="replace").strip()[:500]
        return text or reason, None, None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if not isinstance(body, dict):
        return json.dumps(body)[:500], None, None
    message = body.get("message") or body.get("detail") or body.get("error")
    text = message if isinstance(message, str) and message else json.dumps(body)[:500]
    code, kind = body.get("code"), body.get("type")
    return text, None if code is None else str(code), None if kind is None else str(kind)


def sse_events(blocks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of a ``text/event-stream`` body, up to ``data: [DONE]``.

    Works on whole read blocks: the events in a block are cut at blank lines and decoded with one
    ``json.loads`` of a JSON array, not one call per event. An error event (``{"error": {...}}``)
    is raised as ``StreamErrorEvent``."""
    pending = b""
    for block in blocks:
        pending += block
        if b"\r" in pending[:-1]:  # CRLF framing; a trailing CR may pair with the next block's LF
            pending = pending[:-1].replace(b"\r\n", b"\n") + pending[-1:]
        if b"\n\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n\n")
        done = yield from _decode(complete)
        if done:
            return
    tail = pending.replace(b"\r\n", b"\n").strip(b"\n")
    if tail:
        yield from _decode([tail])


def _decode(events: list[bytes]) -> Generator[dict[str, Any], None, bool]:
    """Payloads of complete events; returns True once ``[DONE]`` was seen."""
    found = [e[6:] if e.startswith(b"data: ") and b"\n" not in e else _event_data(e) for e in events]
    datas = [d for d in found if d is not None]
    done = b"[DONE]" in datas
    if done:
        datas = datas[:datas.index(b"[DONE]")]
    if not datas:
        return done
    try:
        payloads = json.loads(b"[" + b",".join(datas) + b"]")
    except json.JSONDecodeError:
        payloads = [json.loads(d) for d in datas]  # name the event that is broken (raises)
    for payload in payloads:
        if isinstance(payload, dict) and payload.get("error"):
            error = payload["error"]
            message = error.get("message") if isinstance(error, dict) else None
            raise StreamErrorEvent(message if isinstance(message, str) and message else
                                   "an error event in the stream", body=error)
        if isinstance(payload, dict):
            yield payload
    return done


def _event_data(event: bytes) -> bytes | None:
    lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None  # comments, event:/id:/retry: lines carry no data
