"""Slash commands: each one a small function of the session and its argument text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console

    from keel.agent import Agent
    from keel.cli.repl.render import ReplRenderer, Tally
    from keel.config import Config
    from keel.loop.result import RunResult


class ReplSession(Protocol):
    """What a slash command may use of the REPL session (keel.cli.repl.session.ReplSession is one).

    Declared here so the session can import the commands without the commands importing it back."""

    workspace: Path
    config: Config
    console: Console
    agent: Agent
    renderer: ReplRenderer
    tally: Tally
    messages: list[dict[str, Any]]
    last: RunResult | None
    note: str | None
    plan_next: bool

    def replace_agent(self, session_id: str | None = None, log_path: Path | None = None) -> None: ...

    def plan_task(self, text: str) -> RunResult | None: ...


@dataclass(frozen=True)
class Command:
    help: str
    run: Callable[[ReplSession, str], str | None]   # "exit" ends the REPL


def _help(s: ReplSession, _arg: str) -> None:
    table = Table(show_header=False, box=None)
    for name, c in COMMANDS.items():
        table.add_row(Text(f"/{name}", style="bold"), Text(c.help))
    s.console.print(table)
    s.console.print(Text("Type a task to send it; each task continues the same conversation. Enter sends; a "
                         "trailing \\ or Esc-Enter starts a new line. Ctrl-C interrupts the model or the tool "
                         "running (twice at the prompt: exit); Ctrl-D exits.", style="dim"))


def _log_path(s: ReplSession) -> Path | None:
    path = s.agent.log_path
    if path is None or not path.exists():
        s.console.print("nothing has run in this session yet")
        return None
    return path


def _log(s: ReplSession, arg: str) -> None:
    from keel.cli.log import event_line
    from keel.core.schema import read_log

    if (path := _log_path(s)) is None:
        return
    events = [e for e in read_log(path).events if e.get("type") != "assistant_delta"]
    count = int(arg) if arg.strip().isdigit() else 40
    t0 = float(events[0].get("ts", 0)) if events else 0.0
    for e in events[-count:]:
        s.console.print(Text(event_line(e, t0)))
    s.console.print(Text(f"log: {path}", style="dim"))


def _stats(s: ReplSession, _arg: str) -> None:
    from keel.cli.stats import render
    from keel.core.schema import read_log
    from keel.trace.stats import session_stats

    if (path := _log_path(s)) is None:
        return
    stats = session_stats(read_log(path).events, s.tally.prices if s.tally.prices_known else None)
    stats["session_id"] = stats["session_id"] or path.stem
    render(stats, s.console)


def _cost(s: ReplSession, _arg: str) -> None:
    t = s.tally
    s.console.print(Text(f"{t.tokens:,} tokens ({t.cached:,} cached) in {t.calls} model calls · {t.cost}"
                         + ("" if t.prices_known else " (no [prices] configured)")))


def _todos(s: ReplSession, _arg: str) -> None:
    runner = s.agent.runner
    todos = runner.state.todos if runner is not None else []
    if not todos:
        s.console.print("no todos")
        return
    marks = {"done": ("✓", "green"), "in_progress": ("▸", "yellow"), "pending": ("·", "")}
    for todo in todos:
        mark, style = marks.get(todo.status, ("?", ""))
        s.console.print(Text(f"  {mark} {todo.content}", style=style))


def _undo(s: ReplSession, arg: str) -> None:
    """Restore the files this session changed (``/undo N``: keep steps 1..N)."""
    from keel.trace.undo import undo

    arg = arg.strip()
    if arg and not arg.isdigit():
        s.console.print(Text("usage: /undo [STEP]  (keep what steps 1..STEP did; default: undo everything)"))
        return
    try:
        report = undo(s.workspace, session=s.agent.session_id, to_step=int(arg or 0))
    except ValueError as e:
        s.console.print(Text(f"keel: {e}", style="red"))
        return
    lines = report.lines()
    for line in lines or ["nothing to undo"]:
        s.console.print(Text(f"  {line}"))
    if lines and s.messages:  # the history still shows the edits: tell the model with the next task
        s.note = ("Note: the user undid your file changes" + (f" after step {arg}" if arg else "")
                  + " with /undo; the files are back as they were. Re-read a file before editing it.")


def _compact(s: ReplSession, _arg: str) -> None:
    if len(s.messages) < 3:
        s.console.print("nothing to compact yet")
        return
    event = s.agent.compact(s.messages)
    if event.get("ok"):
        s.console.print(Text(f"compacted: {event['tokens_before']:,} → {event['tokens_after']:,} tokens"))
    else:
        s.console.print(Text(f"compaction did not free room: {event.get('error') or 'nothing to fold'}",
                             style="yellow"))


def _verify(s: ReplSession, _arg: str) -> None:
    """Run the project's checks now, as the verification gate would (keel checks --run)."""
    from keel.cli.checks import _result_line, run_plan
    from keel.verify.detect import build_plan

    v = s.config.verify
    pinned = [(c.category, c.command) for c in v.plan] if v.plan is not None else None
    plan = build_plan(s.workspace, "", accept=v.accept, pinned=pinned, enabled=v.enabled())
    if not plan.ordered():
        s.console.print("no checks found (add one with [verify] accept in .keel/config.toml)")
        return
    for result in run_plan(plan, s.workspace, s.config, echo=False):
        s.console.print(Text(_result_line(result), style="green" if result.passed else "red"))
        if not result.passed and result.output:
            s.console.print(Text("\n".join(f"    {x}" for x in result.output.splitlines()[:20]), style="dim"))


def _model(s: ReplSession, arg: str) -> None:
    name = arg.strip()
    if not name:
        s.console.print(Text(f"model: {s.agent.engine.model}"))
        return
    if not hasattr(s.agent.engine, "model"):
        s.console.print("this engine's model cannot be changed")
        return
    s.agent.engine.model = name  # the next model call asks for it; the history is kept
    s.config.engine.model = name
    s.console.print(Text(f"model: {name} (from the next task)"))


def _clear(s: ReplSession, _arg: str) -> None:
    s.messages, s.last, s.note = [], None, None
    s.console.print("conversation cleared: the next task starts a fresh history (same session log)")


def _resume(s: ReplSession, arg: str) -> None:
    """Load a saved session's history (default: the latest other one in this workspace that is a
    conversation: a plan-mode session waiting for approval is not, and the REPL's own /plan leaves
    one behind each time) and carry on."""
    from keel.trace.sessions import load_session, repair_history, resumable, saved_sessions

    ref = arg.strip() or None
    try:
        if ref is None:
            here = [x for x in saved_sessions() if Path(x.workspace) == s.workspace and x.id != s.agent.session_id
                    and x.data.get("stop_reason") != "awaiting_plan_approval"]
            if not here:
                s.console.print("no earlier session in this workspace")
                return
            saved = here[0]
        else:
            saved = load_session(ref)
    except ValueError as e:
        s.console.print(Text(f"keel: {e}", style="red"))
        return
    finished = saved.status in ("complete", "incomplete", "error")
    if not finished:  # cut short (crash, kill, Ctrl-C): the same checks as `keel run --resume`
        _, problem = resumable(saved.id, s.workspace)
        if problem:
            s.console.print(Text(f"keel: {problem}", style="red"))
            return
    s.replace_agent(saved.id, saved.log_path)
    s.console.print(Text(f"resumed session {saved.id} ({saved.status}): {saved.task}", style="bold"))
    if finished:  # its history is the conversation now; the next task continues it
        s.messages, _ = repair_history(saved.data["messages"])
        return
    try:
        result = s.agent.resume(saved)   # carry the unfinished task on from its last saved step
    except KeyboardInterrupt:
        s.renderer.pause()
        return
    s.messages, s.last = result.messages, result


def _plan(s: ReplSession, arg: str) -> None:
    """/plan TASK plans TASK now; /plan alone plans the next task typed."""
    if arg.strip():
        s.plan_task(arg.strip())
        return
    s.plan_next = True
    s.console.print("plan mode for the next task: keel explores read-only and shows a plan for you to approve")


def _exit(_s: ReplSession, _arg: str) -> str:
    return "exit"


COMMANDS: dict[str, Command] = {
    "help": Command("this list", _help),
    "log": Command("this session's events as lines (/log N: the last N)", _log),
    "stats": Command("tokens, cache, tools, cost and hotspots of this session", _stats),
    "cost": Command("tokens and cost so far", _cost),
    "todos": Command("the task's todo list", _todos),
    "undo": Command("restore the files this session changed (/undo N: keep steps 1..N)", _undo),
    "compact": Command("fold the history now to free context", _compact),
    "verify": Command("run the project's checks now", _verify),
    "model": Command("show the model, or /model NAME to switch", _model),
    "clear": Command("start a fresh conversation", _clear),
    "resume": Command("continue a saved session (/resume [SESSION]; default: the latest here)", _resume),
    "plan": Command("plan the next task (or /plan TASK) read-only, then approve the plan", _plan),
    "exit": Command("leave (also Ctrl-D)", _exit),
}


def dispatch(s: ReplSession, line: str) -> str | None:
    name, _, arg = line[1:].partition(" ")
    name = name.strip()
    unique = [n for n in COMMANDS if n.startswith(name)] if name else []
    if name not in COMMANDS and len(unique) == 1:   # a unique prefix is enough: /st → /stats
        name = unique[0]
    command = COMMANDS.get(name)
    if command is None:
        close = [n for n in COMMANDS if n.startswith(name[:2])] if name else []
        hint = f"; did you mean /{close[0]}?" if close else ""
        s.console.print(Text(f"unknown command /{name}{hint} (/help lists them)", style="red"))
        return None
    try:
        return command.run(s, arg)
    except KeyboardInterrupt:
        s.renderer.pause()
        s.console.print(Text(f"/{name} interrupted", style="yellow"))
        return None
