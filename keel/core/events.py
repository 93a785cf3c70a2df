"""The event stream: the one channel between the loop and every front end and log.

Events are plain dicts with a ``type`` (session_start, model_call, assistant_delta, tool_call,
decision, stop, …). A sink is any callable taking an event. The JSONL writer appends one line
per event and flushes it, so a crash loses nothing and logging costs the same at step 500 as at
step 1 (no rewriting of the whole trajectory).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from keel.core.schema import SCHEMA_VERSION, read_log

Event = dict[str, Any]
EventSink = Callable[[Event], None]

# Events that are UI-only (high frequency, no audit value) are not written to the log.
NOT_LOGGED = frozenset({"assistant_delta"})


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def data_dir() -> Path:
    """keel's own data directory (sessions, logs). Nothing is created until something is written."""
    if os.environ.get("KEEL_HOME"):
        return Path(os.environ["KEEL_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "keel"


class EventBus:
    def __init__(self, session_id: str, sinks: list[EventSink] | None = None) -> None:
        self.session_id = session_id
        self.sinks: list[EventSink] = list(sinks or [])

    def subscribe(self, sink: EventSink) -> None:
        self.sinks.append(sink)

    def emit(self, type_: str, **data: Any) -> Event:
        event: Event = {"type": type_, "schema": SCHEMA_VERSION, "ts": round(time.time(), 3),
                        "session_id": self.session_id, **data}
        for sink in self.sinks:
            sink(event)
        return event


class JsonlWriter:
    """Appends events as JSON lines, flushed per event."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = path.open("a", encoding="utf-8")
        if self._fh.tell() and _torn(path):  # a resumed log whose writer was killed mid-line
            self._fh.write("\n")

    def __call__(self, event: Event) -> None:
        if event["type"] in NOT_LOGGED:
            return
        if self._fh.closed:   # an event after close (an agent closed, then resumed): appended, not lost
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def _torn(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def read_events(path: Path) -> list[Event]:
    """The log's events; a line torn by a crash is skipped (keel.core.schema.read_log says which)."""
    return read_log(path).events
