"""The event log's format: its version, and a reader that survives a crash.

Every event carries ``schema`` (an integer, :data:`SCHEMA_VERSION`): readers check it per line, so a
log that a newer keel appended to (a resumed session) still reads. The version changes only when a
field changes meaning or disappears; new fields and new event types do not bump it.

A writer killed mid-line (``kill -9``) leaves a torn last line. :func:`read_log` skips any line that
is not a JSON object and says which, instead of failing the whole log (docs/events.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

Event = dict[str, Any]


@dataclass
class LogRead:
    events: list[Event] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # one note per line that was not an event
    newer: bool = False                                 # some event was written by a newer keel

    @property
    def note(self) -> str:
        return "; ".join(self.skipped)


def read_log(path: Path) -> LogRead:
    """Every well-formed event of the JSONL log at ``path``, in order; bad lines become notes."""
    out = LogRead()
    with path.open("rb") as fh:
        raw_lines = fh.read().split(b"\n")
    last = len(raw_lines) - 1
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        try:
            event = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            where = "the last line (torn by a crash)" if number - 1 >= last - 1 else f"line {number}"
            out.skipped.append(f"{path.name}: skipped {where}: not valid JSON")
            continue
        if not isinstance(event, dict) or "type" not in event:
            out.skipped.append(f"{path.name}: skipped line {number}: not an event object")
            continue
        version = event.get("schema", SCHEMA_VERSION)
        if isinstance(version, int) and version > SCHEMA_VERSION and not out.newer:
            out.newer = True
            out.skipped.append(f"{path.name}: line {number} uses event schema {version}, newer than this "
                               f"keel's {SCHEMA_VERSION}; read as far as understood")
        out.events.append(event)
    return out


def config_summary(config: Any) -> dict[str, Any]:
    """What session_start records of a keel.config.Config: enough to know how a run was set up,
    nothing secret (no key, no credentials in the URL, no extra_body)."""
    from urllib.parse import urlsplit, urlunsplit

    e = config.engine
    url = e.base_url
    if url:
        parts = urlsplit(url)
        if parts.username or parts.password:
            url = urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))
    return {
        "engine": {"base_url": url, "model": e.model, "temperature": e.temperature, "seed": e.seed,
                   "max_tokens": e.max_tokens, "stream": e.stream, "max_attempts": e.max_attempts},
        "limits": config.limits.model_dump(),
        "prices": config.prices.model_dump(),
        "approval": config.permissions.approval,
        "shell": {"sandbox": config.shell.sandbox, "network": config.shell.network,
                  "timeout_s": config.shell.timeout_s},
        "verify": {"mode": config.verify.mode, "accept": list(config.verify.accept),
                   "candidates": config.verify.candidates},
    }
