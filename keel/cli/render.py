"""Front ends for the event stream: human text, and JSON lines. Both only read events."""

from __future__ import annotations

import json
import re
import sys
from typing import IO, TYPE_CHECKING, Any

from keel.cli.textcalls import CallTextFilter, recovered_from_text
from keel.core.events import Event

if TYPE_CHECKING:
    from keel.loop.result import RunResult

_TARGET_KEYS = ("path", "command", "pattern", "question", "summary")
_PATH = re.compile(r'"path"\s*:\s*"((?:[^"\\]|\\.){1,300})"')


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, with an ellipsis so a cut list or
    sentence never reads as complete."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _target(name: str, arguments: str) -> str:
    if len(arguments) > 100_000 and (m := _PATH.search(arguments[:2000])):
        # A huge write_file: parsing megabytes only to show the path is wasteful, and the
        # arguments in the event may be clipped (not valid JSON), which used to lose the path.
        return shorten(m.group(1), 60)
    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        m = _PATH.search(arguments[:2000]) if isinstance(arguments, str) else None
        return shorten(m.group(1), 60) if m else ""
    if not isinstance(args, dict):
        return ""
    if name == "todo_write" and isinstance(args.get("todos"), list):
        return f"{len(args['todos'])} items"
    for key in _TARGET_KEYS:
        if isinstance(args.get(key), str):
            return shorten(" ".join(args[key].split()), 60)
    return ""


def checks_marks(checks: list[dict[str, Any]], before: frozenset[str] = frozenset()) -> str:
    """`ruff check . ✓ · python -m pytest -q ✗ exit 1`: each check and how it ended."""
    parts = []
    for c in checks:
        mark = "✓" if c["passed"] else ("refused" if c.get("refused") else
                                        "✗ timed out" if c.get("timed_out") else f"✗ exit {c['exit_code']}")
        if not c["passed"] and c["command"] in before:
            mark += " (failing before this run)"
        parts.append(f"{shorten(c['command'], 40)} {mark}")
    return " · ".join(parts) or "no checks"


def verification_line(event: Event) -> str:
    """`ruff check . ✓ · python -m pytest -q ✗ exit 1 → verification_failed (1.2 s)` for one gate run."""
    before = frozenset(event.get("preexisting_failures") or ())   # failing at the baseline too: not this run's doing
    verdict = event.get("problem") or event.get("status", "")
    if verdict == "passed" and before:   # a ✗ beside "passed" reads as a contradiction: say why it stands
        verdict = "passed: no new failures"
    return f"{checks_marks(event.get('checks', []), before)} → {verdict}{took(event)}"


def baseline_line(event: Event) -> str:
    """`baseline: python -m pytest -q ✗ exit 1 (3.2 s)`: the checks on the untouched workspace."""
    return f"baseline: {checks_marks(event.get('results') or [])}{took(event)}"


def checks_start_line(event: Event) -> str:
    """`running baseline checks: pytest -q, ruff check .` / `verifying: …` while the gate works."""
    what = "running baseline checks" if event.get("phase") == "baseline" else "verifying"
    return f"{what}: {shorten(', '.join(event.get('commands') or []), 100)}"


def resume_line(event: Event) -> str:
    """`resumed session S from step 4 (1 call cut short: answered as interrupted)`."""
    cut = len(event.get("interrupted_calls") or [])
    calls = f" ({cut} call{'s' if cut != 1 else ''} cut short, answered as interrupted)" if cut else ""
    was = f", {event['previous_status']} before" if event.get("previous_status") else ""
    return f"resumed session {event.get('session_id')} from step {event.get('from_step', 0)}{was}{calls}"


def seconds(event: Event) -> str:
    """`1.2 s` (or `420 ms`) for an event's ``elapsed_s``; "" without one."""
    s = event.get("elapsed_s")
    return "" if not isinstance(s, int | float) else f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def took(event: Event) -> str:
    """` (1.2 s)` for an event's ``elapsed_s``; "" without one."""
    return f" ({s})" if (s := seconds(event)) else ""


FOLD_LINES = 4   # a command's output shown under its row: the first lines, then how many more


def folded_output(event: Event, limit: int = FOLD_LINES) -> list[str]:
    """What a run_shell call printed, folded: its first lines (the exit status only when it failed)
    and `… +N lines`. keel's reduced output (failures and the summary line) is what is shown, as
    the model saw it."""
    if event.get("name") != "run_shell" or event.get("repeat") or event.get("not_run"):
        return []
    preview = str(event.get("result_preview") or "")   # the first 300 characters of what the model saw
    lines = preview.splitlines()
    unseen = max(int(event.get("output_lines") or 0) - len(lines), 0)   # lines past the preview
    if lines and lines[0].startswith("exit code: 0"):
        lines = lines[1:]
    lines = [line for line in lines if line.strip() and line.strip() != "(no output)"]
    shown, more = lines[:limit], len(lines) - min(len(lines), limit) + unseen
    return [shorten(line.rstrip(), 160) for line in shown] + ([f"… +{more} lines"] if more else [])


def finish_summary(event: Event) -> str:
    """A finish call's summary, whole: it is the run's answer, not a row's target."""
    if event.get("name") != "finish" or not event.get("ok"):
        return ""
    try:
        args = json.loads(event.get("arguments") or "{}")
    except (json.JSONDecodeError, TypeError):
        return ""
    summary = args.get("summary") if isinstance(args, dict) else None
    return summary.strip() if isinstance(summary, str) else ""


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


class TextRenderer:
    """Streams the answer and prints one line per tool call: `[step 3] edit_file src/calc.py → ok (4 ms)`."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None, *,
                 prices_known: bool = True, verbose: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.prices_known = prices_known
        self.verbose = verbose   # the start line's details (the sandbox in full) on lines of their own
        self._calls = CallTextFilter()  # calls written as text are shown as their step line only
        self._mid_line = False
        self._printed_this_attempt = False  # answer text shown since the last model call began
        self._status = False     # a progress line is on the terminal (stderr), to be wiped before output
        self._written = 0        # pieces of the reply in flight that are not shown (a call being written)

    def _line(self, text: str, stream: IO[str] | None = None) -> None:
        stream = stream or self.out
        self._clear_status()
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        stream.write(text + "\n")
        stream.flush()

    def _progress(self, text: str) -> None:
        """One line on a terminal's stderr, rewritten in place while the model reads and writes
        (a cold prompt takes minutes on a CPU); never in a pipe or a log."""
        if self.err.isatty() and not self._mid_line:
            self.err.write(f"\r\x1b[K{text}")
            self.err.flush()
            self._status = True

    def _clear_status(self) -> None:
        if self._status:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._status = False

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        if kind == "assistant_delta" and event["kind"] == "prompt":
            read, _, total = str(event["text"]).partition("/")
            if read.isdigit() and total.isdigit():
                self._progress(f"[step {event.get('step')}] model: reading the prompt, {int(read):,} of {int(total):,} "
                               "tokens")
        elif kind == "assistant_delta" and event["kind"] in ("content", "tool_call"):
            shown = self._calls.feed(event["text"]) if event["kind"] == "content" else ""
            self._answer(shown)
            if not shown:
                self._written += 1
                self._progress(f"[step {event.get('step')}] model: writing a tool call, {self._written} tokens")
        elif kind == "assistant_delta" and event["kind"] == "reasoning":
            # shown apart from the answer (stderr, dimmed) so stdout carries only the answer
            self._clear_status()
            self.err.write(f"\x1b[2m{event['text']}\x1b[0m" if self.err.isatty() else event["text"])
            self.err.flush()
        elif kind == "assistant_delta" and event["kind"] == "waiting":   # no byte of the reply yet
            waited = int(event["text"] or 0)
            if waited <= 5 or waited % 30 < 5:    # said at once, then every half minute
                self._line(f"waiting for the engine ({waited} s)", self.err)
        elif kind == "assistant_delta" and event["kind"] == "retry":
            note = " (text above this line was from the dropped attempt)" if self._printed_this_attempt else ""
            self._printed_this_attempt = False
            self._calls.reset()
            self._line(f"[retry] {event['text']}{note}", self.err)
        elif kind == "session_start":
            self._line(start_line(event), self.err)
            if self.verbose:
                self._line(f"  sandbox: {event['protection']}", self.err)
        elif kind == "tool_call":
            self._tool_line(event)
        elif kind == "model_call":
            self._written = 0
            self._clear_status()
            self._answer(self._calls.end(recovered_from_text(event), str(event.get("content") or "")))
            self._printed_this_attempt = False
        elif kind == "resume":
            self._line(resume_line(event), self.err)
        elif kind == "checks_start":   # the gate's own time, said as it starts: no tool is slow
            self._line(f"[step {event['step']}] {checks_start_line(event)}")
        elif kind == "checks_before":
            self._line(f"[step {event.get('step', 0)}] {baseline_line(event)}")
        elif kind == "verification":
            self._line(f"[step {event['step']}] verify: {verification_line(event)}")
        elif kind == "changes" and event.get("diffstat"):
            flags = [f"{len(event[k])} {k.replace('_', ' ')}" for k in ("debug_leftovers", "stray_files", "unrelated")
                     if event.get(k)]
            flags += [f"run-later config {e['path']} ({'kept: approved' if e.get('kept') else 'put back'})"
                      for e in event.get("runs_later") or []]
            self._line(f"changes: {event['diffstat']}" + (f" · flagged: {', '.join(flags)}" if flags else ""))
            for line in (event.get("summary") or "").splitlines()[:20]:
                self._line(f"  {line}")
        elif kind == "compaction":  # the history was folded to fit the window: the user should know
            how = "summary by the model" if event.get("summarizer") == "model" else "keel's own record"
            done = (f"{event['tokens_before']:,} → {event['tokens_after']:,} tokens, "
                    f"{(event.get('folded') or {}).get('messages', 0)} messages folded, {how}") if event["ok"] \
                else f"did not free enough room ({event.get('error') or 'still over the trigger'})"
            self._line(f"[step {event['step']}] context compacted ({event['trigger']}): {done}", self.err)
        elif kind == "decision" and event.get("pushback_kind"):
            self._line(f"[step {event['step']}] pushback: {event['pushback_kind']}")
        elif kind == "workspace_snapshot":   # what a command deletes may not be undoable: the person must know
            self._line(f"[step {event['step']}] {_snapshot_line(event)}", self.err)
        elif kind == "stop":
            self._calls.reset()
            self._stop_line(event)

    def _tool_line(self, event: Event) -> None:
        """`[step 3] edit_file src/calc.py → ok (4 ms)`; a finish's summary whole on the lines below it;
        with --verbose also an edit's diff and a command's first lines of output."""
        summary = finish_summary(event)
        target = "" if summary else _target(event["name"], event["arguments"])
        status = "ok" if event["ok"] else "error"
        if event["repeat"]:   # what the repetition guard did, truthfully: the call ran, or it did not
            status = "not run (repeat)" if event.get("not_run") else "ran again (same result)"
        detail = ""
        if not event["ok"] and not event["repeat"]:
            # the first lines up to the reason: "Invalid arguments for x:" alone says nothing
            detail = ": " + shorten(" ".join(event["result_preview"].split()), 160)
        who = f"[{event['subagent']}] " if event.get("subagent") else ""  # a delegate's sub-agent
        self._line(f"{who}[step {event['step']}] {event['name']} {target} → {status}{detail} "
                   f"({_ms(event['elapsed_ms'])})".replace("  ", " "))
        if self.verbose:
            for line in folded_output(event):
                self._line(f"    {line}")
            for line in str(event.get("diff") or "").splitlines():
                self._line(f"    {self._coloured(line)}")
        if summary:
            self._line(summary)

    def _coloured(self, line: str) -> str:
        """A diff line, green/red on a terminal, as it is elsewhere."""
        if not self.out.isatty() or line.startswith(("+++", "---")):
            return line
        colour = "32" if line.startswith("+") else "31" if line.startswith("-") else "36" if line.startswith("@@") else ""
        return f"\x1b[{colour}m{line}\x1b[0m" if colour else line

    def _answer(self, text: str) -> None:
        if not text:
            return
        self._clear_status()
        self.out.write(text)
        self.out.flush()
        self._mid_line = not text.endswith("\n")
        self._printed_this_attempt = True

    def _stop_line(self, event: Event) -> None:
        u = event["usage"]
        tokens = u["prompt_tokens"] + u["completion_tokens"]
        est = " est." if u.get("estimated") else ""
        reason = "" if event["reason"] == event["status"] else f" ({event['reason']})"
        self._line(f"■ {event['status']}{reason} · {event['step']} steps · {tokens:,} tokens{est} "
                   f"({u['cached_tokens']:,} cached) · {self._cost(event)}")
        if event.get("error"):
            self._line(f"keel: {event['error']}", self.err)


    def _cost(self, event: Event) -> str:
        if not self.prices_known:
            return "cost unknown (no prices configured)"
        return f"${event['cost_usd']:.4f}"


class JsonLinesRenderer:
    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        self.out.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self.out.flush()


def result_object(result: RunResult, output_format: str) -> dict[str, Any]:
    """The result as printed: stream-json tags it ``"type": "result"`` so it reads like the events."""
    body = result.to_json()
    return {"type": "result", **body} if output_format == "stream-json" else body


def print_json(obj: dict[str, Any], out: IO[str] | None = None) -> None:
    stream = out or sys.stdout
    stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
    stream.flush()


def _snapshot_line(event: Event) -> str:
    if not event.get("enabled"):
        return f"undo: no workspace snapshot before commands from now on: {event.get('reason')}"
    large = event.get("too_large") or []
    return (f"undo: {len(large)} file(s) over 8 MiB are not in the snapshot, so commands that delete or change "
            f"them cannot be undone: {', '.join(large[:5])}" + (" …" if len(large) > 5 else ""))


START_LINE_WIDTH = 120   # one row of a common terminal; the details are in `keel doctor` and --verbose


def start_line(event: Event, width: int = START_LINE_WIDTH) -> str:
    """`keel · MODEL · WORKSPACE · sandbox: TIER` in at most ``width`` characters: a long model name
    or path is cut in the middle of the line's budget, never the sandbox tier; an unconfined run
    says so."""
    tier = str(event.get("sandbox") or str(event.get("protection") or "?").split(" ", 1)[0])
    confined = event.get("confining", True) is not False
    sandbox = f"sandbox: {tier}" + ("" if confined else " (commands NOT confined: keel doctor)")
    model = shorten_middle(str(event.get("model") or "?"), 40)
    room = width - len(f"keel · {model} ·  · {sandbox}")
    workspace = shorten_middle(str(event.get("workspace") or ""), max(room, 12))
    return shorten(f"keel · {model} · {workspace} · {sandbox}", width)


def shorten_middle(text: str, limit: int) -> str:
    """``text`` in ``limit`` characters, its start and end kept (a path's project name is at its end)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]
