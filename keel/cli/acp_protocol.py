"""The ACP methods `keel acp` answers (the SDK's Agent interface), on the protocol thread.

Every refusal is a JSON-RPC error with a reason the client can show: an unknown session, a cwd
that is not a usable workspace, a configuration keel cannot start with, a second prompt while one
runs. Building an agent (config, sandbox detection, MCP servers) happens off the loop thread so the
connection keeps answering meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, schema

from keel.cli.acp_map import call_outcomes, prompt_text, replay_history
from keel.cli.acp_server import Job, Server, workspace_for

_SESSION_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")   # keel's ids; never a path


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("keel")
    except PackageNotFoundError:
        return "unknown"


def _unknown(session_id: str, why: str = "no such session in this keel acp process") -> RequestError:
    return RequestError.invalid_params({"sessionId": session_id, "reason": why})


class Handlers:
    def __init__(self, server: Server, conn: Any) -> None:
        self.server, self.conn = server, conn

    async def initialize(self, **_: Any) -> schema.InitializeResponse:
        """Protocol version 1 whatever the client asks (the only one keel speaks; the client decides)."""
        caps = schema.AgentCapabilities(load_session=True, prompt_capabilities=schema.PromptCapabilities(
            image=False, audio=False, embedded_context=True))
        return schema.InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps,
                                         agent_info=schema.Implementation(name="keel", title="keel",
                                                                          version=_version()),
                                         auth_methods=[])

    async def authenticate(self, **_: Any) -> schema.AuthenticateResponse:
        return schema.AuthenticateResponse()   # keel needs no sign-in: the engine's key is in its config

    async def new_session(self, cwd: str, **_: Any) -> schema.NewSessionResponse:
        workspace = workspace_for(cwd, self.server.allow_any_cwd)
        session = await asyncio.to_thread(self._build, workspace, None)
        return schema.NewSessionResponse(session_id=session.id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> schema.LoadSessionResponse:
        from keel.core.schema import read_log
        from keel.trace.sessions import load_session

        workspace = workspace_for(cwd, self.server.allow_any_cwd)
        if not _SESSION_ID.match(session_id):
            raise _unknown(session_id, "not a keel session id")
        live = self.server.sessions.get(session_id)
        if live is not None and live.busy:
            raise RequestError.invalid_request({"sessionId": session_id, "reason": "a prompt is running in it"})
        try:
            saved = load_session(session_id)
        except ValueError as exc:
            raise _unknown(session_id, str(exc)) from None
        if os.path.realpath(saved.workspace) != os.path.realpath(workspace):
            raise RequestError.invalid_params({"sessionId": session_id, "cwd": cwd,
                                               "reason": f"the session's workspace is {saved.workspace}"})
        try:
            if saved.status == "running":
                raise _unknown(session_id, f"the session is still running (pid {saved.data.get('pid')})")
            messages = list(saved.data.get("messages") or [])
        except ValueError as exc:   # state.json unreadable or from a newer keel
            raise _unknown(session_id, str(exc)) from None
        if live is not None:
            live.close()
        session = await asyncio.to_thread(self._build, workspace, saved)
        log = saved.log_path   # how each call ended: a refused or interrupted one is not shown as done
        events = (await asyncio.to_thread(read_log, log)).events if log.exists() else []
        replay_history(messages, saved.task, workspace, lambda u: self.server.post(session.id, u),
                       call_outcomes(events))
        await self.server.flush()   # the whole history reaches the client before the response
        return schema.LoadSessionResponse()

    def _build(self, workspace: Any, saved: Any) -> Any:
        """A session on ``workspace`` with the same config layers, policy and gate as `keel run`."""
        from keel.cli.acp_session import AcpSession
        from keel.config import ConfigError, load_config
        from keel.engine.types import EngineError
        from keel.policy.rules import RuleError
        from keel.policy.tier import approval_problem

        try:
            config, warnings = load_config(workspace, flags=self.server.flags)
        except ConfigError as exc:
            raise RequestError.invalid_params({"reason": f"configuration error: {exc}"}) from None
        if problem := approval_problem(config):
            raise RequestError.invalid_params({"reason": problem})
        ref: list[Any] = []
        try:
            session = AcpSession(workspace, config, lambda u: self.server.post(ref[0].id, u) if ref else None,
                                 lambda q: self.server.ask(ref, q), saved)
        except EngineError as exc:
            raise RequestError.internal_error({"reason": exc.message}) from None
        except (RuleError, OSError) as exc:
            raise RequestError.internal_error({"reason": f"{type(exc).__name__}: {exc}"}) from None
        ref.append(session)
        session.warnings = warnings + session.warnings
        self.server.sessions[session.id] = session
        return session

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> schema.PromptResponse:
        session = self.server.sessions.get(session_id)
        if session is None:
            raise _unknown(session_id)
        if session.busy:
            raise RequestError.invalid_request({"sessionId": session_id,
                                                "reason": "a prompt is already running in this session"})
        text = prompt_text(prompt)
        if not text:
            raise RequestError.invalid_params({"reason": "the prompt has no text keel can use"})
        session.busy, session.cancelled = True, False
        job = Job(session, text)
        self.server.jobs.put(job)
        try:
            outcome = await asyncio.wrap_future(job.future)
        finally:
            session.busy = False
        await self.server.flush()   # every update of the turn before its response
        return schema.PromptResponse(stop_reason=outcome)  # type: ignore[arg-type]

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.server.sessions.get(session_id)
        if session is not None and session.busy:
            self.server.cancel(session)
