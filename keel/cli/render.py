"""Front ends for the event stream: human text, and JSON lines. Both only read events."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from keel.trace.events import Event

_TARGET_KEYS = ("path", "command", "pattern", "question", "summary")


def _target(name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return ""
    if not isinstance(args, dict):
        return ""
    if name == "todo_write" and isinstance(args.get("todos"), list):
        return f"{len(args['todos'])} items"
    for key in _TARGET_KEYS:
        if isinstance(args.get(key), str):
            text = " ".join(args[key].split())
            return text if len(text) <= 60 else text[:57] + "..."
    return ""


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


class TextRenderer:
    """Streams the answer and prints one line per tool call: `[step 3] edit_file src/calc.py → ok (4 ms)`."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._mid_line = False

    def _line(self, text: str, stream: IO[str] | None = None) -> None:
        stream = stream or self.out
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        stream.write(text + "\n")
        stream.flush()

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        if kind == "assistant_delta" and event["kind"] == "content":
            self.out.write(event["text"])
            self.out.flush()
            self._mid_line = not event["text"].endswith("\n")
        elif kind == "assistant_delta" and event["kind"] == "reasoning":
            # shown apart from the answer (stderr, dimmed) so stdout carries only the answer
            self.err.write(f"\x1b[2m{event['text']}\x1b[0m" if self.err.isatty() else event["text"])
            self.err.flush()
        elif kind == "assistant_delta" and event["kind"] == "retry":
            self._line(f"[retry] {event['text']} (text above this line was from the dropped attempt)", self.err)
        elif kind == "session_start":
            self._line(f"keel · {event['model']} · {event['workspace']} · sandbox: {event['protection']}",
                       self.err)
        elif kind == "tool_call":
            target = _target(event["name"], event["arguments"])
            status = "ok" if event["ok"] else ("refused (repeat)" if event["repeat"] else "error")
            detail = ""
            if not event["ok"] and not event["repeat"]:
                detail = ": " + (event["result_preview"].strip().splitlines() or [""])[0][:100]
            self._line(f"[step {event['step']}] {event['name']} {target} → {status}{detail} "
                       f"({_ms(event['elapsed_ms'])})".replace("  ", " "))
        elif kind == "decision" and event.get("pushback_kind"):
            self._line(f"[step {event['step']}] pushback: {event['pushback_kind']}")
        elif kind == "stop":
            self._stop_line(event)

    def _stop_line(self, event: Event) -> None:
        u = event["usage"]
        tokens = u["prompt_tokens"] + u["completion_tokens"]
        est = " est." if u.get("estimated") else ""
        reason = "" if event["reason"] == event["status"] else f" ({event['reason']})"
        self._line(f"■ {event['status']}{reason} · {event['step']} steps · {tokens:,} tokens{est} "
                   f"({u['cached_tokens']:,} cached) · ${event['cost_usd']:.4f}")
        if event.get("error"):
            self._line(f"keel: {event['error']}", self.err)


class JsonLinesRenderer:
    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        self.out.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self.out.flush()


def print_json(obj: dict[str, Any], out: IO[str] | None = None) -> None:
    stream = out or sys.stdout
    stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
    stream.flush()
