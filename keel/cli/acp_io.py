"""The stdio side of ``keel acp``: the protocol's own file descriptors, framing with protocol errors,
and logging that never prints a traceback.

stdout carries nothing but protocol frames, so the protocol gets private copies of fds 0 and 1 and
the process's own stdin and stdout become /dev/null and stderr: a print anywhere in keel, a hook or
an MCP server that inherits them cannot corrupt the stream or read the client's messages.

The SDK's reader logs a line it cannot parse and drops it; the JSON-RPC spec wants an answer
(-32700 parse error, -32600 invalid request), so this transport gives one and goes on reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import sys
import threading
from typing import Any

LINE_LIMIT = 50 * 1024 * 1024   # one message; images and embedded files are large, a runaway client larger


def take_stdio() -> tuple[int, int]:
    """Private copies of stdin and stdout for the protocol; fds 0 and 1 become /dev/null and stderr."""
    sys.stdout.flush()
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_in, proto_out


class _OneLine(logging.Formatter):
    """A log record as one line: what failed and the exception's own words, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"keel acp: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f": {type(exc).__name__}: {exc}"
        return text


def quiet_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)


def _problem(message: Any) -> str | None:
    """Why ``message`` is not a JSON-RPC 2.0 request, notification or response, or None."""
    if not isinstance(message, dict):
        return "a message must be a JSON object (batches are not used by ACP)"
    if message.get("jsonrpc") != "2.0":
        return 'a message must say "jsonrpc": "2.0"'
    if "id" in message and (isinstance(message["id"], bool) or not isinstance(message["id"], str | int | None)):
        return "id must be a string, an integer or null"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if "params" in message and not isinstance(message["params"], dict | list | None):
            return "params must be an object"
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return "neither a request (method) nor a response (id with result or error)"
    return None


def _is_file(fd: int) -> bool:
    """A regular file or a device such as /dev/null: what asyncio's pipe transports refuse."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISREG(mode) or (stat.S_ISCHR(mode) and not os.isatty(fd))


def _read_in_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    """Feed ``reader`` from a file on a thread of its own (reading a file never blocks the loop)."""
    def pump() -> None:
        with os.fdopen(fd, "rb", 0) as fh:
            while chunk := fh.read(65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="keel-acp-stdin", daemon=True).start()


class _FileWriter:
    """The write side of an asyncio transport, for a stdout that is a file."""

    def __init__(self, fd: int) -> None:
        self.fh = os.fdopen(fd, "wb", 0)

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def is_closing(self) -> bool:
        return self.fh.closed

    def close(self) -> None:
        self.fh.close()


class StdioTransport:
    """Newline-delimited JSON-RPC over the protocol's fds (the SDK's message-level Transport)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, finite: bool = False) -> None:
        self.reader, self.writer = reader, writer
        self.closed = False
        # stdin is a file (`keel acp < requests.jsonl`): its end is not a client leaving, so what
        # it asked for is finished before the server closes (a pipe's end is: runs are cancelled)
        self.finite = finite
        self.unanswered: set[Any] = set()   # ids of the client's requests not yet answered

    @classmethod
    async def open(cls, fd_in: int, fd_out: int) -> StdioTransport:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        finite = _is_file(fd_in)
        if finite:   # asyncio's pipe transports take pipes, sockets and terminals only
            _read_in_thread(loop, reader, fd_in)
        else:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd_in, "rb", 0))
        if _is_file(fd_out):
            writer: Any = _FileWriter(fd_out)
        else:
            writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(fd_out, "wb", 0))
        return cls(reader, writer, finite)

    async def send(self, message: dict[str, Any]) -> None:
        if self.closed or self.writer.is_closing():
            raise ConnectionError("the client's end of stdout is closed")
        if "method" not in message:
            self.unanswered.discard(message.get("id"))
        self.writer.write((json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))

    async def receive(self) -> dict[str, Any] | None:
        while self.finite and self.unanswered:   # a file of requests is a script: each in turn, answered
            await asyncio.sleep(0.02)
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                await self._error(None, -32700, "Parse error", f"not valid JSON: {exc}")
                continue
            problem = _problem(message)
            if problem is not None:
                if isinstance(message, dict) and "method" not in message and "id" in message:
                    logging.warning("dropped a malformed response: %s", problem)  # no one to answer
                    continue
                ident = message.get("id") if isinstance(message, dict) else None
                await self._error(ident if isinstance(ident, str | int) else None, -32600, "Invalid Request", problem)
                continue
            if "method" in message and "id" in message:
                self.unanswered.add(message["id"])
            return message

    async def _line(self) -> bytes | None:
        try:
            return await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:   # the end of input: a last line without newline counts
            return exc.partial or None
        except asyncio.LimitOverrunError:
            while True:   # skip the rest of the oversized line, then say why it was dropped
                try:
                    await self.reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as more:
                    await self.reader.readexactly(more.consumed)
                except asyncio.IncompleteReadError:
                    return None
            await self._error(None, -32700, "Parse error", f"a message over {LINE_LIMIT} bytes was dropped")
            return b""

    async def _error(self, ident: Any, code: int, message: str, detail: str) -> None:
        with contextlib.suppress(ConnectionError):
            await self.send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message,
                                                                       "data": {"details": detail}}})

    async def close(self) -> None:
        self.closed = True
        self.writer.close()
