"""The `keel acp` server: protocol handlers on the loop thread, runs on the main thread (keel.cli.acp).

The handlers (keel.cli.acp_protocol) are passed in, so they can import this module without it
importing them back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast


@dataclass
class Job:
    session: Any
    text: str
    future: concurrent.futures.Future[str] = field(default_factory=concurrent.futures.Future)


class Server:
    """The ACP agent: protocol handlers on the loop thread, runs on the main thread."""

    def __init__(self, flags: dict[str, Any], allow_any_cwd: bool, handlers: Callable[[Server, Any], Any]) -> None:
        self.flags, self.allow_any_cwd = flags, allow_any_cwd
        self.handlers = handlers      # keel.cli.acp_protocol.Handlers: (server, connection) -> the SDK's Agent
        self.sessions: dict[str, Any] = {}
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.lock = threading.Lock()
        self.active: Any = None       # the session whose run is on the main thread now
        self.asking: concurrent.futures.Future[str] | None = None   # an approval awaiting the client
        self.loop: asyncio.AbstractEventLoop | None = None
        self.conn: Any = None
        self.outbox: asyncio.Queue[Any] | None = None
        self.closed = False
        self.failed = False           # the connection broke: keel acp exits 1
        self.approvals = 0

    # -- the protocol thread ----------------------------------------------------------------------
    def serve_protocol(self, fd_in: int, fd_out: int) -> None:
        try:
            asyncio.run(self._serve(fd_in, fd_out))
        except Exception as exc:  # the client's pipes broke in a way the SDK did not absorb
            logging.warning("the protocol connection failed: %s", exc)
            self.failed = True
        finally:
            self.shutdown()

    async def _serve(self, fd_in: int, fd_out: int) -> None:
        from acp.agent.connection import AgentSideConnection

        from keel.cli.acp_io import StdioTransport

        self.loop = asyncio.get_running_loop()
        self.outbox = asyncio.Queue()
        transport = await StdioTransport.open(fd_in, fd_out)
        conn = AgentSideConnection(lambda c: cast(Any, self.handlers(self, c)), transport, listening=False)
        self.conn = conn
        sender = asyncio.create_task(self._send_updates())
        try:
            await conn.listen()
            if transport.finite:   # requests read from a file: answer them all before closing
                await self._finish_requests(transport)
        finally:
            self.shutdown()   # a client gone mid-run: cancel it, so it stops and is saved
            await self.flush()
            sender.cancel()
            await conn.close()

    async def _send_updates(self) -> None:
        """The one sender of session updates: they leave in the order the run made them."""
        assert self.outbox is not None
        while True:
            item = await self.outbox.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            session_id, update = item
            try:
                await self.conn.session_update(session_id, update)
            except Exception:  # the client is gone; the session log still has everything
                continue

    async def _finish_requests(self, transport: Any) -> None:
        """Wait until every request read has been answered (its prompt run, its updates sent)."""
        while transport.unanswered:
            await asyncio.sleep(0.05)
        await self.flush()

    async def flush(self) -> None:
        """Wait until every update posted so far has been sent."""
        if self.outbox is None:
            return
        done = asyncio.get_running_loop().create_future()
        self.outbox.put_nowait(done)
        await done

    def post(self, session_id: str, update: Any) -> None:
        """From any thread: queue an update for the client."""
        loop, outbox = self.loop, self.outbox
        if loop is None or outbox is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop has stopped: the client is gone
            loop.call_soon_threadsafe(outbox.put_nowait, (session_id, update))

    # -- cancel and shutdown (loop thread) ----------------------------------------------------------
    def cancel(self, session: Any) -> None:
        """session/cancel: an approval being asked is withdrawn (the run stops as interrupted, not
        refused), a running loop gets SIGINT."""
        session.cancelled = True
        with self.lock:
            if self.active is not session:
                return   # queued or idle: the job sees the flag when it starts
            if self.asking is not None:
                self.asking.cancel()
            else:
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self.lock:
            active = self.active
        if active is not None:
            self.cancel(active)
        self.jobs.put(None)

    # -- the main thread --------------------------------------------------------------------------
    def work(self) -> None:
        """Run jobs until the client goes away."""
        while True:
            try:
                job = self.jobs.get()
                if job is None:
                    return
                self._process(job)
            except KeyboardInterrupt:   # a cancel that arrived just as a run ended: nothing left to stop
                continue

    def _process(self, job: Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        outcome = "end_turn"
        try:
            outcome = self._run_job(job)
        except KeyboardInterrupt:
            outcome = "cancelled"
        except Exception as exc:   # a bug in keel: the client hears it, the next prompt may still work
            logging.warning("the run failed: %s: %s", type(exc).__name__, exc)
            self.post(job.session.id, _message(f"\n\nkeel: internal error: {type(exc).__name__}: {exc}\n"))
        finally:
            with self.lock:
                self.active = None
            if not job.future.done():
                job.future.set_result("cancelled" if job.session.cancelled else outcome)

    def _run_job(self, job: Job) -> str:
        from keel.cli.acp_map import stop_reason, verdict_message

        session = job.session
        if session.cancelled or self.closed:
            return "cancelled"
        for w in session.warnings:   # untrusted project hooks / MCP servers left out, said once
            session.sink.say(f"keel: warning: {w}\n\n")
        session.warnings = []
        with self.lock:
            self.active = session
        try:
            result = session.run(job.text)
        finally:
            with self.lock:
                self.active = None
        session.sink.say(verdict_message(result))
        return stop_reason(result.stop_reason, session.cancelled)

    def ask(self, session_ref: list[Any], question: str) -> str:
        """The Approver's prompt (main thread): a permission request to the client, its answer."""
        from keel.cli.acp_map import answer_for, permission_request

        session = session_ref[0] if session_ref else None
        loop = self.loop
        if session is None or session.cancelled or self.closed or loop is None or self.active is not session:
            return "n"   # no run of this session is asking (e.g. trust questions while it is built)
        self.approvals += 1
        tool, options = permission_request(question, session.sink.running_call(question), session.workspace,
                                           f"approval-{self.approvals}")

        async def request() -> Any:
            await self.flush()   # the tool call it is about reaches the client first
            return await self.conn.request_permission(session_id=session.id, tool_call=tool, options=options)

        future = asyncio.run_coroutine_threadsafe(request(), loop)
        with self.lock:
            self.asking = future
        try:
            response = future.result()
        except (concurrent.futures.CancelledError, Exception):
            response = None
        finally:
            with self.lock:
                self.asking = None
        # a cancel (the client's "cancelled" outcome, session/cancel, the client gone) is no answer: the
        # run stops as interrupted and the call is answered as cut short, not as refused by the person
        if session.cancelled or self.closed or getattr(getattr(response, "outcome", None), "outcome", "") == "cancelled":
            raise KeyboardInterrupt
        return answer_for(response) if response is not None else "n"

    def close_sessions(self) -> None:
        for session in list(self.sessions.values()):
            try:
                session.close()
            except Exception as exc:  # closing MCP servers is best effort
                logging.warning("closing session %s: %s", session.id, exc)


def _message(text: str) -> Any:
    from acp.helpers import update_agent_message_text

    return update_agent_message_text(text)


def workspace_for(cwd: str, allow_any: bool) -> Path:
    """The session's workspace, or a protocol error saying why not."""
    from acp import RequestError

    from keel.cli.guard import check_workspace

    if not os.path.isabs(cwd):
        raise RequestError.invalid_params({"cwd": cwd, "reason": "cwd must be an absolute path"})
    workspace, problem = check_workspace(cwd, allow_any)
    if problem:
        raise RequestError.invalid_params({"cwd": cwd, "reason": problem})
    return workspace
