"""Persisted sessions: the run's state after every step, and picking a run up again after a crash.

``<data>/sessions/<id>.jsonl`` is the event log; ``<data>/sessions/<id>/`` holds ``state.json``
(history, task state, counters, what the limits have used, the gate's baseline) and the
checkpoints (keel.trace.checkpoints). state.json is replaced atomically twice per step: once the
model's reply is in the history (so a kill during its tool calls still knows they were asked
for) and once the step is decided. A ``kill -9`` loses at most the step in flight (docs/sessions.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.core.events import Event, data_dir
from keel.core.files import write_atomic
from keel.core.state import CheckEvidence, TaskState, Todo
from keel.trace.checkpoints import CheckpointStore
from keel.trace.resume import baseline_to_json

if TYPE_CHECKING:
    from keel.config import Config
    from keel.loop.decider import Decision
    from keel.loop.runner import Runner
    from keel.tools.registry import ToolRegistry

STATE_VERSION = 1
INTERRUPTED_BY_CRASH = ("keel stopped (killed or crashed) while this call ran or before it started, so it may "
                        "have run partly, fully or not at all. Check the files it would touch before repeating it.")
RESUME_NOTE = ("keel was stopped and has been resumed here from its saved state. Calls marked as interrupted may "
               "or may not have run; check before repeating them, then continue the task.")
FINISHED = ("complete",)


def sessions_root() -> Path:
    return data_dir() / "sessions"


def session_dir_for(log_path: Path) -> Path:
    return log_path.with_suffix("")


# -- (de)serialising the task state ------------------------------------------------------------
def task_state_to_json(state: TaskState) -> dict[str, Any]:
    out = dataclasses.asdict(state)
    out["pushback_counts"] = dict(state.pushback_counts)
    out["repair_rounds"] = dict(state.repair_rounds)
    return out


def task_state_from_json(data: dict[str, Any]) -> TaskState:
    fields = {f.name for f in dataclasses.fields(TaskState)}
    kept = {k: v for k, v in data.items() if k in fields}
    kept["todos"] = [Todo(t["content"], t["status"]) for t in kept.get("todos", [])]
    kept["checks"] = [CheckEvidence(**c) for c in kept.get("checks", [])]
    kept["pushback_counts"] = Counter(kept.get("pushback_counts", {}))
    kept["repair_rounds"] = Counter(kept.get("repair_rounds", {}))
    return TaskState(**kept)


def repair_history(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """A copy of ``messages`` in which every assistant tool call has its tool message, in order;
    calls that had none get a synthesised "interrupted" result. Returns (history, interrupted ids)."""
    out: list[dict[str, Any]] = []
    interrupted: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        if msg.get("role") != "assistant" or not msg.get("tool_calls"):
            continue
        answers: dict[str, dict[str, Any]] = {}
        while i < len(messages) and messages[i].get("role") == "tool":
            answers[messages[i].get("tool_call_id", "")] = messages[i]
            i += 1
        for call in msg["tool_calls"]:
            answer = answers.get(call["id"])
            if answer is None:
                interrupted.append(call["id"])
                answer = {"role": "tool", "tool_call_id": call["id"], "content": INTERRUPTED_BY_CRASH}
            out.append(answer)
    return out, interrupted


# -- a saved session ---------------------------------------------------------------------------
class SavedSession:
    """A session on disk: ``session.json`` (small: id, workspace, task, when, log), read to find
    sessions, and ``state.json`` (the whole history), read only when needed."""

    def __init__(self, directory: Path, meta: dict[str, Any]) -> None:
        self.dir, self.meta = directory, meta

    @functools.cached_property
    def data(self) -> dict[str, Any]:
        return _read_json(self.dir / "state.json")

    @property
    def id(self) -> str:
        return str(self.meta.get("session_id") or self.dir.name)

    @property
    def log_path(self) -> Path:
        return Path(self.meta.get("log") or self.dir.with_suffix(".jsonl"))

    @property
    def workspace(self) -> str:
        return str(self.meta["workspace"])

    @property
    def task(self) -> str:
        return str(self.meta.get("task") or "")

    @property
    def stop_reason(self) -> str | None:
        """Why the run last stopped (``needs_user``, ``limit:steps`` …); None while it runs or crashed,
        and for sessions saved before keel recorded it."""
        reason = self.data.get("stop_reason")
        return str(reason) if reason and self.status not in ("running", "crashed") else None

    @property
    def status(self) -> str:
        """complete / incomplete / error as the run ended, "running", or "crashed" (its process is gone)."""
        status = str(self.data.get("status", "running"))
        if status == "running" and not _alive(self.data.get("pid"), self.data.get("updated")):
            return "crashed"
        return status


def _alive(pid: Any, updated: Any = None) -> bool:
    """Whether the process that saved the state still runs. Its pid may belong to another process by
    now (a restarted container hands out the same small pids, often to the keel asking), so a process
    that started after the state was last written is not it."""
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped by its parent) is gone too
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    fields = stat[stat.rfind(b")") + 2:].split()
    if fields[:1] == [b"Z"]:
        return False
    started = _process_start(fields)
    return not (started is not None and isinstance(updated, int | float) and started > updated + 2.0)


def _process_start(fields: list[bytes]) -> float | None:
    """Wall-clock start of a process from its /proc stat fields after the name (starttime is the
    20th: clock ticks since boot)."""
    try:
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def load_session(ref: str) -> SavedSession:
    """A session by id, by its log path (.jsonl) or by its directory. Raises ValueError when none."""
    for path in (Path(ref), sessions_root() / ref):
        directory = session_dir_for(path) if path.suffix == ".jsonl" else path
        if (directory / "session.json").is_file():
            return SavedSession(directory, _read_json(directory / "session.json"))
    raise ValueError(f"no saved session {ref!r} (looked in {sessions_root()}; `keel log` lists them)")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"the saved session file {path} cannot be read: {exc}") from exc
    if not isinstance(data, dict) or data.get("version", 0) > STATE_VERSION:
        raise ValueError(f"the saved session file {path} was written by a newer keel")
    return data


def saved_sessions() -> list[SavedSession]:
    """Every saved session, newest first (reads only the small session.json files)."""
    found = []
    root = sessions_root()
    for meta in root.glob("*/session.json") if root.is_dir() else []:
        try:
            found.append(SavedSession(meta.parent, _read_json(meta)))
        except ValueError:
            continue
    return sorted(found, key=lambda s: s.meta.get("started", 0), reverse=True)


def latest_session(workspace: Path) -> SavedSession | None:
    real = os.path.realpath(workspace)
    return next((s for s in saved_sessions() if os.path.realpath(s.workspace) == real), None)


def resumable(ref: str | None, workspace: Path) -> tuple[SavedSession | None, str | None]:
    """The session `keel run --resume REF` (or `--continue`, ref None) picks up, or why none."""
    if ref is None:
        session = latest_session(workspace)
        if session is None:
            return None, f"no saved session for {workspace} to continue (`keel log` lists sessions)"
    else:
        try:
            session = load_session(ref)
        except ValueError as exc:
            return None, str(exc)
    if session.status == "running":
        return None, f"session {session.id} is still running (pid {session.data.get('pid')})"
    if session.status in FINISHED:
        return None, f"session {session.id} already finished ({session.status}); start a new run instead"
    if not Path(session.workspace).is_dir():
        return None, f"session {session.id}'s workspace {session.workspace} no longer exists"
    return session, None


# -- recording ---------------------------------------------------------------------------------
class SessionRecorder:
    """Saves the run after every step and feeds the checkpoint store the step number."""

    def __init__(self, directory: Path, store: CheckpointStore, *, session_id: str, workspace: Path, model: str,
                 log_path: Path, emit: Callable[..., Any]) -> None:
        self.dir, self.store = directory, store
        self.session_id, self.workspace, self.model, self.log_path, self.emit = session_id, workspace, model, log_path, emit
        self.resume_from: SavedSession | None = None
        self.interrupted: list[str] = []
        self.runner: Runner | None = None
        self.messages: list[dict[str, Any]] = []
        self.pushback: str | None = None
        self.started = time.time()
        self.elapsed_before = 0.0
        self.run_t0 = time.time()
        self.step_base = 0
        self.status = "running"
        self.stop_reason: str | None = None  # why the run stopped (needs_user: `--resume --answer` may go on)
        self.meta_written = self.save_failed = False

    def prepare(self, runner: Runner, messages: list[dict[str, Any]]) -> None:
        """Called once the runner exists: on a resume, give it back the saved counters."""
        self.runner, self.messages, self.run_t0, self.status = runner, messages, time.time(), "running"
        self.stop_reason = None
        # a second task in one session (the REPL) goes on numbering steps where the first stopped
        self.step_base = self.store.step
        saved, self.resume_from = self.resume_from, None
        if saved is not None:
            data = saved.data
            self.started = data.get("started", self.started)
            self.elapsed_before = float(data.get("elapsed_s", 0.0))
            runner.steps = int(data.get("steps", 0))
            runner.usage.add(_usage_from(data.get("usage", {})))
            runner.state = task_state_from_json(data["task_state"])
            runner.state.gate_on = runner.verifier is not None
            if runner.verifier is not None:
                from keel.trace.resume import restore_verifier
                restore_verifier(runner.verifier, data.get("baseline"), self.store)
            if self.interrupted:  # files the interrupted step changed count as changes: old evidence is stale
                from keel.trace.checkpoints import read_manifest
                for change in read_manifest(self.store.dir):
                    if change.step == runner.steps and change.kind in ("before", "change"):
                        runner.state.record_file_change(change.path)
            self.store.step, self.step_base = runner.steps, 0
            self.emit("resume", from_step=runner.steps, interrupted_calls=self.interrupted,
                                previous_status=saved.status)
        self.save()

    def on_step(self, runner: Runner, messages: list[dict[str, Any]], decision: Decision | None) -> None:
        """After the model's reply is in the history (decision None), and after the step's decision."""
        self.store.step = self.step_base + runner.steps
        self.messages = messages
        self.pushback = decision.pushback if decision is not None else None
        self.save()

    def on_event(self, event: Event) -> None:
        if event["type"] == "stop":
            self.status = str(event.get("status") or "incomplete")
            self.stop_reason = str(event.get("reason") or "") or None
            if event.get("reason") == "interrupted":
                self.status = "interrupted"
            self.save()

    def save(self) -> None:
        """Write the state; a failure (disk full, data dir gone) is reported once and the run goes on:
        losing the ability to resume must not also lose the work in progress."""
        try:
            self._save()
        except OSError as exc:
            if not self.save_failed:
                self.save_failed = True
                self.emit("session_save_failed", error=f"{exc.strerror or exc}: the session cannot be "
                                    "resumed past this point", path=str(self.dir))

    def _save(self) -> None:
        runner = self.runner
        if runner is None:
            return
        state = {
            "version": STATE_VERSION, "session_id": self.session_id, "pid": os.getpid(),
            "workspace": str(self.workspace), "task": runner.state.task, "model": self.model,
            "log": str(self.log_path), "status": self.status, "stop_reason": self.stop_reason,
            "started": self.started,
            "updated": time.time(), "elapsed_s": self.elapsed_before + (time.time() - self.run_t0),
            "steps": runner.steps, "usage": runner.usage.to_json(), "pushback": self.pushback,
            "task_state": task_state_to_json(runner.state),
            "baseline": baseline_to_json(getattr(runner.verifier, "baseline", None)),
            "messages": self.messages,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.meta_written:
            meta = {key: state[key] for key in ("version", "session_id", "workspace", "task", "model", "log",
                                                "started")}
            write_atomic(self.dir / "session.json", json.dumps(meta, ensure_ascii=False).encode("utf-8"))
            self.meta_written = True
        write_atomic(self.dir / "state.json", json.dumps(state, ensure_ascii=False, default=str).encode("utf-8"))

    def recording(self, approver: Any) -> Any:
        """``approver`` with every decision it makes recorded as an event at the current step."""
        from keel.trace.approvals import RecordingApprover

        return RecordingApprover(approver, self.emit, lambda: self.store.step)


def _usage_from(data: dict[str, Any]) -> Any:
    from keel.engine.types import Usage

    return Usage.from_json(data)


def attach_session(log_path: Path | None, *, session_id: str, workspace: Path, model: str, registry: ToolRegistry,
                   files: Any, emit: Callable[..., Any], config: Config) -> SessionRecorder | None:
    """A checkpoint store and a recorder under the session directory of ``log_path`` (None: no log, none).
    The tools that change files tell the store (``registry``), the file session ``files`` (read
    snapshots, backups) writes into it; the caller subscribes ``recorder.on_event`` to its events."""
    if log_path is None:
        return None
    from keel.trace.resume import watch_tools
    from keel.trace.snapshot import snapshot_caps

    directory = session_dir_for(log_path)
    store = CheckpointStore(directory / "checkpoints", workspace)
    if files is not None:
        files.store = store
    watch_tools(registry, store, emit, snapshot_caps(config))
    return SessionRecorder(directory, store, session_id=session_id, workspace=workspace, model=model,
                           log_path=log_path, emit=emit)


def resume_history(saved: SavedSession, message: str | None = None, *,
                   join: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The saved history, repaired (keel.trace.sessions.repair_history), with the message that carries
    it on: ``message`` (an answer, an approved plan, the person's words; ``join``: joined to a last
    user message, as two in a row break some chat templates), else the saved pushback, else a note
    that keel was resumed when a call was interrupted or the model spoke last. Also the interrupted ids."""
    messages, interrupted = repair_history(saved.data["messages"])
    if message is None:
        pushback = saved.data.get("pushback")
        if pushback:
            messages.append({"role": "user", "content": pushback})
        elif interrupted or (messages and messages[-1].get("role") == "assistant"):
            messages.append({"role": "user", "content": RESUME_NOTE})
        return messages, interrupted
    last = messages[-1] if messages else None
    if join and last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        last["content"] += "\n\n" + message
    else:
        messages.append({"role": "user", "content": message})
    return messages, interrupted


def resume_target(ref: str | None, latest: bool, cwd: str, task_given: object) -> tuple[SavedSession | None, str | None]:
    """For `keel run`: the session --resume/--continue names (None when neither is given), or the problem."""
    if ref is None and not latest:
        return None, None
    if ref is not None and latest:
        return None, "--resume and --continue exclude each other"
    if task_given:
        return None, "--resume and --continue take no task: the session's own task goes on"
    return resumable(ref, Path(cwd).resolve())
