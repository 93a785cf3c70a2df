"""What `keel mcp-serve`'s tools do, without the protocol: one unattended run per workspace at a time,
built exactly as `keel run` builds it, and the sessions' progress read back from their logs.

A run holds two locks on its workspace: this process's table of busy workspaces (so a second call
gets a clear refusal naming the session that runs there) and an ``flock`` on a file under keel's data
directory, ``locks/<hash of the workspace's real path>.lock``, so that two servers started by two
clients cannot interleave in one workspace either. The kernel drops the flock when the process
dies, so a killed server leaves no stale lock. Runs in different workspaces go on side by side.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from keel.core.events import Event, data_dir

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")   # an id, never a path to probe
RECENT = 12   # the last events session_status shows


class Refused(Exception):
    """A call keel will not carry out; the message says why and what to do instead."""


@dataclass
class ServerOptions:
    """What the person who started the server chose; a calling agent cannot change these."""
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    approval: str | None = None
    allow_any_cwd: bool = False
    local_model: str | None = None   # --local: the in-process engine, loaded for each run


@dataclass
class Job:
    """One run in this process: its stop flag, the events so far, its result once it ends."""
    workspace: Path
    task: str
    stop: threading.Event = field(default_factory=threading.Event)
    now: threading.Event = field(default_factory=threading.Event)   # the run's ToolContext.cancel
    events: deque[Event] = field(default_factory=lambda: deque(maxlen=RECENT))
    pending: deque[Event] = field(default_factory=deque)   # for progress notifications, drained by the server
    session_id: str = ""
    steps: int = 0
    notified: int = 0
    started: float = field(default_factory=time.time)
    agent: Any = None
    lock_file: IO[str] | None = None

    def on_event(self, event: Event) -> None:
        if event["type"] == "assistant_delta":
            return
        self.session_id = self.session_id or str(event.get("session_id") or "")
        if event["type"] == "model_call":
            self.steps += 1
        self.events.append(compact_event(event))
        self.pending.append(event)

    def request_stop(self, now: bool = False) -> None:
        """Stop after the step in flight; ``now`` also kills a command in flight and starts no further
        call (ToolContext.cancel), and cuts a streaming model reply (the run's deadline)."""
        self.stop.set()
        if now:
            self.now.set()
            if self.agent is not None:
                self.agent.ctx.deadline = time.monotonic()


class Runs:
    """The busy workspaces of this server."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self.jobs: dict[str, Job] = {}

    def claim(self, task: str, workspace: str) -> Job:
        """A job that holds ``workspace``, or Refused: a bad workspace, or one that is busy."""
        from keel.cli.guard import check_workspace

        if not task.strip():
            raise Refused("task is empty: say what to do")
        if not workspace.strip():
            raise Refused("workspace is empty: give the project directory's absolute path")
        path, problem = check_workspace(workspace, self.options.allow_any_cwd, name="workspace")
        if problem:
            raise Refused(problem.replace("--allow-any-cwd", "keel mcp-serve --allow-any-cwd"))
        key = str(path)
        with self._lock:
            if key in self.jobs:
                held = self.jobs[key]
                raise Refused(f"workspace {key} is busy: this server is running session "
                              f"{held.session_id or '(starting)'} there (task: {held.task[:80]!r}); "
                              "one run per workspace at a time, never interleaved. Wait for it to finish "
                              "(session_status shows its progress), then call again")
            job = Job(path, task)
            job.lock_file = _flock(path)
            self.jobs[key] = job
        return job

    def release(self, job: Job) -> None:
        with self._lock:
            self.jobs.pop(str(job.workspace), None)
        if job.lock_file is not None:
            job.lock_file.close()   # closing the descriptor drops the flock
            job.lock_file = None

    def live(self, session_id: str) -> Job | None:
        with self._lock:
            return next((j for j in self.jobs.values() if j.session_id == session_id), None)

    def stop_all(self, now: bool) -> list[Job]:
        with self._lock:
            jobs = list(self.jobs.values())
        for job in jobs:
            job.request_stop(now)
        return jobs


def execute(runs: Runs, job: Job, limits: dict[str, Any], accept: list[str]) -> dict[str, Any]:
    """Carry ``job`` to a stop as `keel run` would (the server's engine and approval, the workspace's
    config, its sandbox and gate, no person present) and return the result object. Refused for a
    configuration the run cannot start with; the job's workspace is released either way."""
    try:
        return _execute(runs.options, job, limits, accept)
    finally:
        runs.release(job)


def _execute(options: ServerOptions, job: Job, limits: dict[str, Any], accept: list[str]) -> dict[str, Any]:
    from keel.agent import Agent
    from keel.config import ConfigError, load_config
    from keel.engine.types import EngineError
    from keel.loop.result import RunResult
    from keel.policy.rules import RuleError
    from keel.policy.tier import approval_problem, unconfined_warning

    flags = {"engine": {"base_url": options.base_url, "model": options.model, "api_key_env": options.api_key_env,
                        "local_model": options.local_model},
             "limits": limits, "permissions": {"approval": options.approval}}
    try:
        config, warnings = load_config(job.workspace, flags=flags)
    except ConfigError as e:
        raise Refused(f"configuration error: {e}") from None
    if config.permissions.approval == "interactive":   # no person is present to ask
        config.permissions.approval = "unattended"
        warnings.append('approval "interactive" is configured, but no person is present here: running '
                        "unattended (edits proceed, ask-class commands are refused)")
    if accept:
        config.verify.add_accept(accept)
    if problem := approval_problem(config):
        raise Refused(problem)
    prices_known = config.prices.known
    if (tier := unconfined_warning(config)) is not None:
        warnings.append(tier)
    try:
        agent = Agent(workspace=job.workspace, config=config, sinks=[job.on_event], attended=False)
    except EngineError as e:
        raise Refused(e.message) from None
    except RuleError as e:
        raise Refused(f"configuration error: {e}") from None
    except OSError as e:
        raise Refused(f"cannot write the event log: {e}") from None
    job.agent, job.session_id = agent, agent.session_id
    agent.ctx.cancel = job.now
    agent.after_step = lambda _step: not job.stop.is_set()   # a stop request ends the run after this step
    try:
        result = agent.run(job.task)
    except EngineError as e:
        result = RunResult(status="error", stop_reason="config_error", error=e.message, session_id=agent.session_id)
    finally:
        with contextlib.suppress(Exception):   # stopping MCP servers the run started is best effort
            agent.close()
    result.cost_known = prices_known
    out = result.to_json()
    if warnings or agent.ext.warnings:
        out["warnings"] = [*warnings, *agent.ext.warnings]
    return out


def _flock(workspace: Path) -> IO[str]:
    """The cross-process lock on ``workspace``; Refused when another process holds it."""
    directory = data_dir() / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (hashlib.sha256(str(workspace).encode()).hexdigest()[:24] + ".lock")
    fh = path.open("a+", encoding="utf-8")   # not inherited by commands the run starts (O_CLOEXEC)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another keel process"
        fh.close()
        raise Refused(f"workspace {workspace} is busy: {holder} holds it ({path}); one run per workspace "
                      "at a time, never interleaved. Wait for that run to finish, then call again") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"keel mcp-serve (pid {os.getpid()})")
    fh.flush()
    return fh


def compact_event(event: Event) -> dict[str, Any]:
    """An event as session_status shows it: its kind and the few fields that say what happened."""
    keep = ("step", "name", "ok", "elapsed_ms", "status", "reason", "summary", "passed", "verdict", "error")
    out = {"type": event.get("type"), "ts": event.get("ts")}
    for key in keep:
        if key in event and event[key] is not None:
            value = event[key]
            out[key] = value[:300] if isinstance(value, str) else value
    return out


def progress_line(event: Event) -> str | None:
    """One line for a progress notification, or None for events not worth one."""
    kind = event.get("type")
    if kind == "session_start":
        return f"session {event.get('session_id')} started in {event.get('workspace')} (sandbox: {event.get('sandbox')})"
    if kind == "tool_call":
        return f"step {event.get('step', '?')}: {event.get('name')} → {'ok' if event.get('ok') else 'failed'}"
    if kind == "stop":
        return f"stopped: {event.get('status')} ({event.get('reason')})"
    return None


def session_status(runs: Runs, session_id: str) -> dict[str, Any]:
    """A session's status, steps so far and last events; Refused for an unknown id."""
    from keel.core.events import read_events
    from keel.trace.sessions import load_session

    if not SESSION_ID.match(session_id or ""):
        raise Refused(f"{session_id!r} is not a session id (list_sessions gives them)")
    job = runs.live(session_id)
    if job is not None:   # this process's own run: its saved pid is ours, which the disk view calls gone
        return {"session_id": session_id, "status": "running", "workspace": str(job.workspace),
                "task": job.task, "steps": job.steps, "last_events": list(job.events)}
    try:
        saved = load_session(session_id)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    try:
        events = read_events(saved.log_path) if saved.log_path.is_file() else []
    except (OSError, ValueError):
        events = []
    try:
        status = saved.status
    except ValueError:   # state.json unreadable (a newer keel, a torn disk): the log still tells the story
        status = "unknown"
    out: dict[str, Any] = {"session_id": saved.id, "status": status, "workspace": saved.workspace,
                           "task": saved.task, "steps": sum(e.get("type") == "model_call" for e in events),
                           "last_events": [compact_event(e) for e in events[-RECENT:]], "log": str(saved.log_path)}
    with contextlib.suppress(ValueError):
        out["stop_reason"] = saved.stop_reason
    return out


def list_sessions(runs: Runs, workspace: str, limit: int) -> list[dict[str, Any]]:
    """The workspace's sessions, newest first."""
    from keel.trace.sessions import saved_sessions

    real = os.path.realpath(Path(workspace).expanduser())
    if not os.path.isdir(real):
        raise Refused(f"workspace {workspace} is not a directory")
    found = []
    for saved in saved_sessions():
        if os.path.realpath(saved.workspace) != real:
            continue
        live = runs.live(saved.id) is not None
        try:
            status = "running" if live else saved.status
        except ValueError:   # state.json unreadable: still list the session
            status = "unknown"
        found.append({"session_id": saved.id, "status": status, "task": saved.task[:200],
                      "started": saved.meta.get("started")})
        if len(found) >= limit:
            break
    return found
