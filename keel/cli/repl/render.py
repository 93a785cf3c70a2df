"""The REPL's view of the event stream: one more EventBus subscriber, beside TextRenderer and the
stream-json printer, so every front end shows the same run (docs/repl.md).

Streamed answer text is shown as markdown while it arrives, a spinner while the model thinks, one
line per tool step, a coloured diff under each edit, and the running token / cost count.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from keel.cli.render import (
    _target,
    baseline_line,
    checks_start_line,
    finish_summary,
    folded_output,
    resume_line,
    shorten,
    verification_line,
)
from keel.cli.repl.stream import AnswerStream
from keel.cli.textcalls import CallTextFilter, recovered_from_text
from keel.core.events import Event
from keel.loop.limits import Prices

MAX_DIFF_LINES = 60
MAX_PREVIEW_LINES = 120   # an approval's diff: the person decides on it, so more of it is shown


def diff_text(diff: str, limit: int = MAX_DIFF_LINES) -> Text:
    """A unified diff coloured line by line: additions green, removals red, hunks cyan."""
    out = Text()
    lines = diff.splitlines()
    for i, line in enumerate(lines[:limit]):
        style = ("bold" if line.startswith(("+++", "---")) else "green" if line.startswith("+")
                 else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "dim")
        out.append(("\n" if i else "") + "    " + line, style=style)
    if len(lines) > limit:
        out.append(f"\n    … {len(lines) - limit} more diff lines", style="dim")
    return out


class Tally:
    """Tokens and cost of the whole REPL session: finished runs plus the one in flight."""

    def __init__(self, prices: Prices, prices_known: bool) -> None:
        self.prices, self.prices_known = prices, prices_known
        self.done_tokens = self.run_tokens = 0
        self.done_cost = self.run_cost = 0.0
        self.cached = self.calls = 0

    def model_call(self, usage: dict[str, Any]) -> None:
        p, c, k = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), usage.get("cached_tokens", 0)
        self.run_tokens += p + c
        self.run_cost += self.prices.cost(p, k, c)
        self.cached += k
        self.calls += 1

    def stop(self, event: Event) -> None:
        u = event.get("usage") or {}  # the run's own total: includes summarising calls of compaction
        self.done_tokens += int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) or self.run_tokens
        self.done_cost += float(event.get("cost_usd") or self.run_cost)
        self.run_tokens, self.run_cost = 0, 0.0

    @property
    def tokens(self) -> int:
        return self.done_tokens + self.run_tokens

    @property
    def cost(self) -> str:
        return f"${self.done_cost + self.run_cost:.4f}" if self.prices_known else "cost unknown"

    def line(self) -> str:
        return f"{self.tokens:,} tokens · {self.cost}"


class ReplRenderer:
    def __init__(self, console: Console, tally: Tally) -> None:
        self.console, self.tally = console, tally
        self.live: Live | None = None
        self.answer = AnswerStream(console)   # this model call's answer: settled blocks printed once
        self.calls = CallTextFilter()         # calls written as text are not shown as answer text
        self.reasoning = ""
        self.question: str | None = None   # the last ask_user question (needs_user: the person answers)
        self.previewed: set[str] = set()   # diffs an approval question showed: not shown again under the edit
        self.running = ""                  # what the spinner says while the turn's tools run

    # -- the live region (spinner or streaming markdown) ----------------------------------------
    def _show(self, renderable: RenderableType) -> None:
        if self.live is None:
            self.live = Live(renderable, console=self.console, transient=True, refresh_per_second=8,
                             vertical_overflow="crop")
            self.live.start()
        else:
            self.live.update(renderable)

    def _thinking(self) -> RenderableType:
        label = Text(f"thinking · {self.tally.line()}", style="dim")
        if self.reasoning:
            label.append("  " + shorten(" ".join(self.reasoning.split())[-80:], 80), style="dim italic")
        return Spinner("dots", text=label)

    def starting(self) -> None:
        """Before the run's first event: what keel does first may take a while (start hooks, the small
        profile's checks on the untouched workspace), so say it is at work."""
        self._show(Spinner("dots", text=Text("starting · the project's checks may run first", style="dim")))

    def pause(self) -> None:
        """Take the live region down (before a prompt, or when the turn is over)."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _flush_answer(self, recovered: bool = False, content: str = "") -> None:
        """The reply is over: the rest of its answer into the scrollback (``recovered``: its calls were
        written as text and ``content`` is the reply without them)."""
        self.pause()
        self.answer.feed(self.calls.end(recovered, content))
        if (rest := self.answer.finish()) is not None:
            self.console.print(rest)
        self.answer, self.reasoning = AnswerStream(self.console), ""

    # -- events ---------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        kind = event["type"]
        if kind == "assistant_delta":
            self._delta(event)
        elif kind == "session_start":
            self.question = None
            self._show(self._thinking())
        elif kind == "model_call":
            self.tally.model_call(event.get("usage") or {})
            # calls written as text: kept are the words, not the call text
            self._flush_answer(recovered_from_text(event), str(event.get("content") or ""))
            calls = (event.get("replay") or {}).get("calls") or []
            if calls:  # the tools run now: say which (Ctrl-C interrupts them)
                names = ", ".join(f"{c['name']} {_target(c['name'], c['arguments'])}".strip() for c in calls)
                self.running = f"running {shorten(names, 100)}"
                self._show(Spinner("dots", text=Text(self.running, style="dim")))
        elif kind == "tool_call":
            self._tool(event)
        elif kind == "decision":
            if event.get("pushback_kind"):
                self._print(Text(f"  ↺ pushback: {event['pushback_kind']}", style="yellow"))
            if event.get("verdict") != "stop":
                self._show(self._thinking())
        elif kind == "resume":
            self._print(Text(resume_line(event), style="bold"))
        elif kind == "checks_start":   # the gate's checks, timed apart from any tool
            self._show(Spinner("dots", text=Text(checks_start_line(event), style="dim")))
        elif kind == "checks_before":
            self._print(Text(f"  ◦ {baseline_line(event)}", style="dim"))
            if self.running and self.live is not None:   # the tool that waited for them goes on
                self._show(Spinner("dots", text=Text(self.running, style="dim")))
        elif kind == "verification":
            ok = event.get("status") == "passed"
            self._print(Text(f"  {'✓' if ok else '✗'} verify: {verification_line(event)}",
                             style="green" if ok else "yellow"))
        elif kind == "compaction":
            done = (f"{event['tokens_before']:,} → {event['tokens_after']:,} tokens" if event.get("ok")
                    else f"did not free enough room ({event.get('error') or 'still over the trigger'})")
            self._print(Text(f"  ⇣ context compacted ({event.get('trigger')}): {done}", style="magenta"))
        elif kind == "workspace_change":
            paths = ", ".join(c["path"] for c in event.get("changes", [])[:6])
            self._print(Text(f"    shell changed {paths}", style="dim"))
        elif kind == "stop":
            self._stop(event)

    def _delta(self, event: Event) -> None:
        if event["kind"] == "content":
            if (settled := self.answer.feed(self.calls.feed(event["text"]))) is not None:
                self._print(settled)   # whole blocks go into the scrollback once; the one being written stays live
            room = self.console.height - 3   # the live region never outgrows the screen
            self._show(Group(self.answer.live(room), Spinner("dots", text=Text(self.tally.line(), style="dim"))))
        elif event["kind"] == "reasoning":
            self.reasoning += event["text"]
            if not self.answer.text:
                self._show(self._thinking())
        elif event["kind"] == "retry":   # what was printed of the dropped attempt cannot be unprinted: say so
            shown = self.answer.upto > 0
            self.answer, self.calls = AnswerStream(self.console), CallTextFilter()
            note = " (the text above is from the dropped attempt)" if shown else ""
            self._print(Text(f"  [retry] {event['text']}{note}", style="yellow"))
        elif event["kind"] == "waiting" and not self.answer.upto:   # no line of the reply shown yet
            self._show(Spinner("dots", text=Text(f"waiting for the engine ({event['text']} s)", style="dim")))

    def _print(self, renderable: RenderableType) -> None:
        if self.live is not None:
            self.live.console.print(renderable)   # above the live region
        else:
            self.console.print(renderable)

    def _tool(self, event: Event) -> None:
        if event["name"] == "ask_user":
            self.question = _question(event["arguments"])
        ok = event["ok"]
        mark, style = ("✓", "green") if ok else ("↻", "yellow") if event.get("repeat") else ("✗", "red")
        line = Text(f"  {mark} ", style=style)
        who = f"[{event['subagent']}] " if event.get("subagent") else ""
        summary = finish_summary(event)   # the run's answer: shown whole below, not cut into the row
        target = "" if summary else _target(event["name"], event["arguments"])
        line.append(f"{who}{event['name']} {target}".rstrip())
        ms = float(event.get("elapsed_ms") or 0)
        line.append(f"  ({ms:.0f} ms)" if ms < 10_000 else f"  ({ms / 1000:.1f} s)", style="dim")
        fold = folded_output(event)   # a command's first lines of output, then how many more
        if fold:
            line.append("".join(f"\n    {x}" for x in fold), style="dim")
        elif not ok:
            first = (str(event.get("result_preview") or "").strip().splitlines() or [""])[0]
            line.append(f"\n    {shorten(first, 160)}", style="dim")
        self._print(line)
        if event.get("diff") and event["diff"].rstrip("\n") not in self.previewed:
            self._print(diff_text(event["diff"]))
        self.previewed.clear()
        if summary:
            self._print(Markdown(summary))

    def _stop(self, event: Event) -> None:
        self._flush_answer()
        self.tally.stop(event)
        status, reason = event.get("status"), event.get("reason")
        style = "green" if status == "complete" else "yellow"
        label = {"needs_user": "waiting for your answer", "interrupted": "interrupted"}.get(str(reason))
        label = label or (str(status) if reason == status else f"{status} ({reason})")
        if reason == "needs_user" and self.question:
            self.console.print(Text(f"? {self.question}", style="bold cyan"))
        self.console.print(Text(f"■ {label} · {event.get('step', 0)} steps · {self.tally.line()}", style=style))
        if event.get("error"):
            self.console.print(Text(f"keel: {event['error']}", style="red"))


def _question(arguments: str) -> str | None:
    import json

    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return None
    q = args.get("question") if isinstance(args, dict) else None
    return q if isinstance(q, str) else None
