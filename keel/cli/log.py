"""`keel log [SESSION]`: the sessions, newest first; with SESSION, its events as readable lines."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.cli.render import baseline_line, checks_start_line, verification_line
from keel.core.schema import read_log
from keel.trace.stats import summarize

EXIT_USAGE = 2


def quiet_broken_pipe(main: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
    """`keel log | head`: the reader went away; say nothing more (exit 141, as a shell would)."""
    def run(argv: list[str]) -> int:
        try:
            return main(argv)
        except BrokenPipeError:
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
    return run


def session_logs() -> list[Path]:
    """Every session's log, newest first by when it started (its first event), the order `keel run
    --continue`, `keel stats` and the REPL's /resume pick by; not by its id's text (an id a program
    chose need not be a time)."""
    from keel.trace.sessions import sessions_root

    root = sessions_root()
    return sorted(root.glob("*.jsonl"), key=_first_ts, reverse=True) if root.is_dir() else []


def output_console() -> Any:
    """The console `keel log` and `keel stats` print with: the terminal's width on a terminal, or the
    width COLUMNS names; piped without it, nothing is wrapped (a reader such as grep wants whole lines)."""
    import os

    from rich.console import Console

    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console(soft_wrap=False)
    return Console(soft_wrap=True, width=100_000)


def _first_ts(log: Path) -> float:
    import json

    try:
        with log.open("rb") as fh:
            ts = json.loads(fh.readline(65536) or b"{}").get("ts", 0.0)
        return float(ts) if isinstance(ts, int | float) else 0.0
    except (OSError, ValueError, AttributeError):
        return 0.0


def resolve_log(ref: str | None, cwd: Path | None = None) -> Path:
    """A session's log by id, unique id prefix or path; without ``ref`` the newest one (of ``cwd``'s
    workspace when it has one). Raises ValueError with what to do instead."""
    from keel.trace.sessions import sessions_root

    if ref is None:
        logs = session_logs()
        if not logs:
            raise ValueError(f"no sessions yet in {sessions_root()}")
        if cwd is None:
            return logs[0]
        from keel.trace.sessions import latest_session
        latest = latest_session(cwd)
        if latest is not None and latest.log_path.is_file():
            return latest.log_path
        raise ValueError(f"no session ran in {cwd} (the latest anywhere is {logs[0].stem}: name it, or run "
                         "from its workspace; `keel log` lists them all)")
    path = Path(ref)
    if path.is_file():
        return path
    if path.is_dir() and path.with_suffix(".jsonl").is_file():
        return path.with_suffix(".jsonl")
    exact = sessions_root() / f"{ref}.jsonl"
    if exact.is_file():
        return exact
    matches = [p for p in session_logs() if p.stem.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ValueError(f"{ref!r} matches {len(matches)} sessions: {', '.join(p.stem for p in matches[:5])}")
    raise ValueError(f"no session {ref!r} (`keel log` lists them)")


def load_prices(cwd: Path) -> Any:
    from keel.config import load_config
    from keel.loop.limits import Prices

    config, _ = load_config(cwd)
    p = config.prices
    return Prices(p.input_per_m, p.cached_input_per_m, p.output_per_m)


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if isinstance(ts, int | float) else "?"


def _cost(value: Any) -> str:
    return "—" if value is None else f"${value:.4f}"


def list_sessions(limit: int, prices: Any) -> list[dict[str, Any]]:
    rows = []
    for path in session_logs()[:limit]:
        read = read_log(path)
        row = summarize(read.events, prices)
        row["session_id"] = row["session_id"] or path.stem
        row["log"] = str(path)
        if row["status"].startswith("no stop"):
            row["status"] = _unfinished_status(path)
        rows.append(row)
    return rows


def _unfinished_status(log: Path) -> str:
    from keel.trace.sessions import load_session

    try:
        return load_session(str(log)).status   # running / crashed
    except ValueError:
        return "no stop event"


def event_line(e: dict[str, Any], t0: float) -> str:
    """One readable line for one event."""
    kind = str(e.get("type"))
    at = f"+{float(e.get('ts', t0)) - t0:7.1f}s"
    step = f"#{e['step']:<3}" if isinstance(e.get("step"), int) else "    "
    if kind == "session_start":
        body = f"start    model={e.get('model')} task: {_short(e.get('task'), 80)} · sandbox={e.get('sandbox')}"
    elif kind == "model_call":
        u = e.get("usage") or {}
        est = " (estimated)" if u.get("estimated") else ""
        reuse = f", prefix reuse {e['prefix_reuse']:.0%}" if isinstance(e.get("prefix_reuse"), int | float) else ""
        body = (f"model    {u.get('prompt_tokens', 0):,} in ({u.get('cached_tokens', 0):,} cached) / "
                f"{u.get('completion_tokens', 0):,} out{est}, {e.get('latency_s', 0):.2f}s, "
                f"finish={e.get('finish_reason')}, {e.get('tool_calls', 0)} call(s){reuse}")
        if e.get("retries"):
            body += f", {e['retries']} retries"
        if isinstance(v := e.get("variant"), dict):   # sampled anew: the model repeated a turned-down reply
            body += f", variant {v.get('n')} (temperature {v.get('temperature')}, seed {v.get('seed')}" + \
                (f", without {', '.join(v['avoid'])})" if v.get("avoid") else ")")
    elif kind == "tool_call":
        mark = "ok" if e.get("ok") else "FAILED"
        size = e.get("output_bytes")
        body = (f"tool     {e.get('name')} {_target(e)} {mark} {float(e.get('elapsed_ms') or 0):.0f}ms"
                + (f" {size:,} B" if isinstance(size, int) else ""))
    elif kind == "decision":
        reason = f" ({e['reason']})" if e.get("reason") else ""
        body = f"decide   {e.get('verdict')}{reason}" + (f" + pushback: {e.get('pushback_kind')}" if e.get("pushback") else "")
    elif kind == "verification":   # the checks and the verdict, as keel run says them
        body = f"verify   {verification_line(e)}"
    elif kind in ("checks_start", "checks_before"):
        body = f"checks   {checks_start_line(e) if kind == 'checks_start' else baseline_line(e)}"
    elif kind == "workspace_change":
        body = "shell changed " + ", ".join(f"{c['status'][0].upper()} {c['path']}" for c in e.get("changes", []))
    elif kind == "workspace_snapshot":
        body = ("snapshot off: " + str(e.get("reason")) if not e.get("enabled")
                else "snapshot skips (over 8 MiB) " + ", ".join(e.get("too_large") or []))
    elif kind == "stop":
        body = f"stop     {e.get('status')} ({e.get('reason')})" + (f": {_short(e.get('error'), 80)}"
                                                                     if e.get("error") else "")
    elif kind == "approval":
        verdict = "CANCELLED" if e.get("cancelled") else "allowed" if e.get("allowed") else "REFUSED"
        body = f"approval {e.get('action')} {_short(e.get('target'), 60)}: {verdict} ({_short(e.get('how'), 60)})"
    elif kind == "resume":
        body = f"resume   from step {e.get('from_step')}, {len(e.get('interrupted_calls') or [])} call(s) interrupted"
    elif kind in _CONTEXT_LINES:
        body = _CONTEXT_LINES[kind](e)
    else:
        rest = {k: v for k, v in e.items() if k not in ("type", "ts", "session_id", "schema", "step")}
        body = f"{kind:<8} {_short(json.dumps(rest, ensure_ascii=False, default=str), 110)}"
    return f"{at} {step} {body}"


def _compaction_line(e: dict[str, Any]) -> str:
    if not e.get("ok"):
        return f"compact  FAILED ({e.get('trigger')}): {_short(e.get('error'), 80)}"
    folded = (e.get("folded") or {}).get("messages", 0)
    return (f"compact  {e.get('trigger')}: {e.get('tokens_before', 0):,} → {e.get('tokens_after', 0):,} tokens, "
            f"{folded} message(s) folded, " + ("summary by the model" if e.get("summarizer") == "model"
                                                  else "keel's own record"))


# The context events as sentences (docs/events.md): their raw JSON holds the whole record.
_CONTEXT_LINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "compaction": _compaction_line,
    "cache_break": lambda e: (f"cache    prefix broken at message {e.get('index')} by {e.get('cause')}, "
                              f"{float(e.get('prefix_reuse') or 0):.0%} reused"),
    "context_window": lambda e: (f"window   {e.get('tokens', 0):,} tokens ({e.get('source')}), replies ≤ "
                                 f"{e.get('reply_cap', 0):,}, prompts ≤ {e.get('prompt_limit', 0):,}"),
}


def _target(e: dict[str, Any]) -> str:
    try:
        args = json.loads(e.get("arguments") or "{}")
    except (json.JSONDecodeError, TypeError):
        return ""
    if not isinstance(args, dict):
        return ""
    for key in ("path", "command", "pattern", "summary"):
        if args.get(key):
            return _short(str(args[key]), 60)
    return ""


def _short(text: Any, limit: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _sessions_table(rows: list[dict[str, Any]], width: int) -> Any:
    """The session list. An id is what `keel log ID` and `keel run --resume ID` take, so it is never
    cut (a cut one may match several sessions); narrower than 110 columns the "when" column goes
    (a default id starts with its date and time) and the task wraps."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    wide = width >= 110
    table = Table(title="keel sessions (newest first)", box=box.SIMPLE_HEAD if not wide else box.HEAVY_HEAD)
    table.add_column("session", no_wrap=True, min_width=max(len(r["session_id"]) for r in rows),
                     overflow="ignore")
    for col in ("when", "status", "steps", "tokens", "cost", "task") if wide else (
            "status", "steps", "tokens", "cost", "task"):
        table.add_column(col, justify="right" if col in ("steps", "tokens", "cost") else "left",
                         min_width=12 if col == "status" else None)
    for r in rows:
        cells = [r["session_id"], _when(r["started"])] if wide else [r["session_id"]]
        table.add_row(*cells, Text(r["status"]), str(r["steps"]), f"{r['tokens']:,}", _cost(r["cost_usd"]),
                      Text(_short(r["task"], 50)))
    return table


@quiet_broken_pipe
def log_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="keel log", description="Sessions newest first; with SESSION, its events.")
    p.add_argument("session", nargs="?", help="session id (or a unique prefix, or a log path)")
    p.add_argument("--limit", type=int, default=20, help="how many sessions to list (default 20)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    from keel.config import ConfigError

    console = output_console()
    try:
        prices = load_prices(Path.cwd())
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.session is None:
        rows = list_sessions(args.limit, prices)
        if args.json:
            print(json.dumps(rows, ensure_ascii=False, default=str))
            return 0
        if not rows:
            print("no sessions yet")
            return 0
        console.print(_sessions_table(rows, console.width if sys.stdout.isatty() else 200))
        return 0
    try:
        path = resolve_log(args.session)
    except ValueError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    read = read_log(path)
    for note in read.skipped:
        print(f"keel: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(read.events, ensure_ascii=False, default=str))
        return 0
    t0 = float(read.events[0].get("ts", 0)) if read.events else 0.0
    for event in read.events:
        console.print(event_line(event, t0), markup=False, highlight=False)
    return 0
