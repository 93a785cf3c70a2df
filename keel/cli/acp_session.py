"""One ACP session of ``keel acp``: a keel Agent on one workspace and the conversation it carries.

Like the REPL (keel.cli.repl.session), every prompt continues the same history: the first runs the
task, later ones continue it, an answer to the model's question continues the same task. A session
loaded from disk that was cut short (cancelled, killed) is resumed from its last saved step with
the saved task state, limits already spent and the gate's baseline, as `keel run --resume` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.agent import Agent
from keel.cli.acp_map import UpdateSink
from keel.config import Config
from keel.core.state import TaskState
from keel.engine.types import Usage
from keel.loop.result import RunResult
from keel.trace.sessions import RESUME_NOTE, SavedSession, repair_history

FINISHED = ("complete", "incomplete", "error")   # a new prompt starts a new task in the same conversation


class AcpSession:
    def __init__(self, workspace: Path, config: Config, post: Callable[[Any], None],
                 prompt: Callable[[str], str], saved: SavedSession | None = None) -> None:
        self.workspace, self.config = workspace, config
        self.sink = UpdateSink(workspace, post)
        self.messages: list[dict[str, Any]] = []
        self.last: RunResult | None = None
        self.cancelled = False
        self.busy = False
        self.resume_from: SavedSession | None = None
        self.agent = Agent(workspace=workspace, config=config, attended=True, prompt=prompt, sinks=[self.sink],
                           session_id=saved.id if saved else None, log_path=saved.log_path if saved else None)
        # a cancel that lands where the loop swallows the interrupt (an approval being answered)
        # still stops the run after the step in flight
        self.agent.after_step = lambda _step: not self.cancelled
        self.warnings = list(self.agent.ext.warnings)
        if saved is not None:
            if saved.status in FINISHED:
                self.messages, _ = repair_history(saved.data["messages"])
            else:
                self.resume_from = saved

    @property
    def id(self) -> str:
        return self.agent.session_id

    def run(self, text: str) -> RunResult:
        """Carry ``text`` out; an interrupt outside the loop's own handling still gives a saved result."""
        try:
            result = self._run(text)
        except KeyboardInterrupt:
            result = self._interrupted()
        self.messages = result.messages or self.messages
        self.last = result
        return result

    def _run(self, text: str) -> RunResult:
        if self.resume_from is not None:
            saved, self.resume_from = self.resume_from, None
            return self._resume(saved, text)
        if not self.messages:
            return self.agent.run(text)
        waiting = self.last is not None and self.last.stop_reason == "needs_user"
        runner = self.agent.runner
        state = runner.state if waiting and runner is not None else TaskState(task=text)  # an answer: same task
        if self.last is None or self.last.stop_reason == "interrupted":
            self.messages, _ = repair_history(self.messages)   # an interrupt may leave a call unanswered
        add_user(self.messages, text)
        return self.agent.continue_run(self.messages, task=state.task, state=state)

    def _resume(self, saved: SavedSession, text: str) -> RunResult:
        """Agent.resume, with the person's new words after the resume note."""
        return self.agent.resume(saved, f"{saved.data.get('pushback') or RESUME_NOTE}\n\n{text}", join=True)

    def _interrupted(self) -> RunResult:
        """A cancel that came before the loop began or after it ended: the session still gets its stop."""
        result = RunResult(status="incomplete", stop_reason="interrupted", session_id=self.id,
                           summary="interrupted outside a step", messages=self.messages)
        recorder = self.agent.recorder
        if recorder is not None and recorder.runner is not None and recorder.status == "running":
            runner = recorder.runner
            self.agent.bus.emit("stop", step=runner.steps, status="incomplete", reason="interrupted",
                                summary=result.summary, cost_usd=runner.cost_usd() if runner.prices.known else None,
                                usage=Usage().to_json())
        return result

    def close(self) -> None:
        self.agent.close()


def add_user(messages: list[dict[str, Any]], text: str) -> None:
    """Append the person's words; two user messages in a row break some chat templates, so they join."""
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        last["content"] += "\n\n" + text
    else:
        messages.append({"role": "user", "content": text})
