"""One REPL session: the agent, the conversation carried across tasks, and the prompt loop.

Every task typed continues the same history (``Agent.continue_run`` on the same messages). The
REPL is attended: a question the model asks stops the run (``needs_user``) and the next thing the
person types is the answer, on the same task.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from keel.agent import Agent
from keel.cli.keys import paused, watching
from keel.cli.repl.input import TaskInput
from keel.cli.repl.render import MAX_PREVIEW_LINES, ReplRenderer, Tally, diff_text
from keel.cli.repl.stepping import StepPauser
from keel.config import Config
from keel.core.events import data_dir
from keel.core.state import TaskState
from keel.loop.limits import Prices
from keel.loop.result import RunResult
from keel.policy.approval import question_parts

EXIT_HINT = "(Ctrl-C again or Ctrl-D to exit)"


class ReplSession:
    def __init__(self, workspace: Path, config: Config, console: Console, *, step: bool = False,
                 history_path: Path | None = None) -> None:
        from keel.cli.repl.commands import COMMANDS

        self.workspace, self.config, self.console = workspace, config, console
        p = config.prices
        prices = Prices(p.input_per_m, p.cached_input_per_m, p.output_per_m)
        self.tally = Tally(prices, any(v > 0 for v in p.model_dump().values()))
        self.renderer = ReplRenderer(console, self.tally)
        self.input = TaskInput({name: c.help for name, c in COMMANDS.items()},
                               history_path if history_path is not None else data_dir() / "repl_history",
                               toolbar=self.toolbar)
        self.stepper = StepPauser(lambda q: self.choose(q, "cas", default="c") or "a", enabled=step)
        self.messages: list[dict[str, Any]] = []
        self.last: RunResult | None = None
        self.note: str | None = None   # told to the model with the next task (e.g. files were undone)
        self.plan_next = False         # /plan: the next task is planned first (plan mode), then approved
        self.agent = self._build_agent()

    # -- the agent ------------------------------------------------------------------------------
    def _build_agent(self, session_id: str | None = None, log_path: Path | None = None) -> Agent:
        agent = Agent(workspace=self.workspace, config=self.config, attended=True, prompt=self.approve,
                      sinks=[self.renderer], log_path=log_path, session_id=session_id)
        agent.after_step = self.stepper
        for w in agent.ext.warnings:
            self.console.print(Text(f"keel: warning: {w}", style="yellow"))
        return agent

    def replace_agent(self, session_id: str | None = None, log_path: Path | None = None) -> None:
        self.agent.close()
        self.agent = self._build_agent(session_id, log_path)
        self.messages, self.last = [], None

    def close(self) -> None:
        self.renderer.pause()
        self.agent.close()

    # -- asking the person ------------------------------------------------------------------------
    def ask(self, question: str) -> str:
        self.renderer.pause()
        with paused():   # the run's key watch stands aside; keys typed before the question do not answer it
            self.console.print(Text(question, style="bold yellow"))
            return self.input.ask("> ")

    def choose(self, question: str, keys: str, default: str | None = None) -> str:
        """One key of ``keys`` (Ctrl-C, Esc or Ctrl-D: "")."""
        self.renderer.pause()
        try:
            with paused():
                self.console.print(Text(question, style="bold yellow"))
                return self.input.choose("> ", keys, default)
        except (EOFError, KeyboardInterrupt):
            return ""

    def approve(self, question: str) -> str:
        """The Approver's prompt: what keel wants to do and why, the change it would make (a coloured
        diff), then once / always / no as one key, before anything runs."""
        head, preview, options = question_parts(question)
        self.renderer.pause()
        keys = "".join(re.findall(r"\[(\w)\]", options))
        if not keys:
            return self.ask(question)
        # keys typed before the question is on screen are dropped (keel.cli.keys); Esc or Ctrl-C
        # propagates: the run stops as interrupted, the question recorded as cancelled
        with paused():
            self.console.print(Text(head, style="bold yellow"))
            if preview:
                self.console.print(diff_text(preview, limit=MAX_PREVIEW_LINES))
                self.renderer.previewed.add(preview)   # the same diff is not printed again under the edit
            self.console.print(Text(options + "   (Esc or Ctrl-C: stop the run)", style="bold yellow"))
            try:
                return self.input.choose("> ", keys)
            except EOFError:
                return "n"

    def toolbar(self) -> str:
        return (f" {self.agent.engine.model} · {self.tally.line()} · Esc-Enter or \\ for a new line · "
                "/help") if hasattr(self, "agent") else ""

    # -- tasks ----------------------------------------------------------------------------------
    def plan_task(self, text: str) -> RunResult | None:
        """/plan: a plan-mode agent (read-only tools, its own session log) plans ``text``; once the person
        approves the plan, this conversation's agent carries it out with its steps as todos."""
        from keel.core.state import Todo
        from keel.ext.plan import approved_plan_message, plan_todos

        planner = Agent(workspace=self.workspace, config=self.config, attended=True, prompt=self.approve,
                        sinks=[self.renderer], plan_mode=True)
        try:
            planned = planner.run(text)
        except KeyboardInterrupt:
            self.renderer.pause()
            return None
        finally:
            planner.close()
        if planned.stop_reason != "awaiting_plan_approval" or not planned.plan:
            return planned
        if self.choose("approve this plan?  [y] carry it out   [n] discard it", "yn") != "y":
            self.console.print(Text("plan discarded", style="dim"))
            return planned
        plan = planned.plan
        if not self.messages:
            return self._finish(lambda: self.agent.run(text, approved_plan=plan))
        self._add_user(text + approved_plan_message(plan))
        state = TaskState(task=text, todos=[Todo(t["content"], "pending") for t in plan_todos(plan)])
        return self._finish(lambda: self.agent.continue_run(self.messages, task=text, state=state))

    def _finish(self, run: Callable[[], RunResult]) -> RunResult:
        """Run, keeping the conversation; a Ctrl-C outside the loop's own handling (before the first
        call, after the stop) still leaves a usable history."""
        try:   # until the run starts (hooks, the small profile's first checks), a spinner says so
            self.renderer.starting()
            result = run()
        except KeyboardInterrupt:
            self.renderer.pause()
            self.console.print(Text("■ interrupted", style="yellow"))
            self.last = RunResult(status="incomplete", stop_reason="interrupted", messages=self.messages)
            return self.last
        self.messages = result.messages or self.messages
        self.last = result
        return result

    def run_task(self, text: str) -> RunResult | None:
        if self.plan_next:
            self.plan_next = False
            return self.plan_task(text)
        if self.note:
            text, self.note = f"{self.note}\n\n{text}", None
        if not self.messages:
            return self._finish(lambda: self.agent.run(text))
        waiting = self.last is not None and self.last.stop_reason == "needs_user"
        runner = self.agent.runner
        state = runner.state if waiting and runner is not None else TaskState(task=text)  # an answer: same task
        if self.last is not None and self.last.stop_reason == "interrupted":
            from keel.trace.sessions import repair_history  # an interrupt may leave a call unanswered
            self.messages, _ = repair_history(self.messages)
        self._add_user(text)
        return self._finish(lambda: self.agent.continue_run(self.messages, task=state.task, state=state))

    def _add_user(self, text: str) -> None:
        """Append the person's words; after an interrupted call the last message may already be theirs,
        and two user messages in a row break some chat templates, so they are joined."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
            last["content"] += "\n\n" + text
        else:
            self.messages.append({"role": "user", "content": text})

    # -- the prompt loop ------------------------------------------------------------------------
    def loop(self) -> int:
        from keel.cli.repl.commands import dispatch

        armed = False   # a Ctrl-C at the prompt arms; a second one exits
        while True:
            try:
                line = self.input.read()
            except KeyboardInterrupt:
                if armed:
                    return 0
                armed = True
                try:
                    self.console.print(Text(EXIT_HINT, style="dim"))
                except KeyboardInterrupt:  # the second Ctrl-C came before the prompt was back
                    return 0
                continue
            except EOFError:
                return 0
            armed = False
            text = line.strip()
            if not text:
                continue
            with watching():   # while it works: typed keys are not echoed, Esc stops it as Ctrl-C does
                if text.startswith("/"):
                    if dispatch(self, text) == "exit":
                        return 0
                    continue
                self.run_task(text)
