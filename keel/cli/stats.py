"""`keel stats [SESSION]`: tokens, cache, tools, verification, cost and hotspots of one session."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from keel.cli.log import EXIT_USAGE, load_prices, output_console, quiet_broken_pipe, resolve_log
from keel.core.schema import read_log
from keel.trace.stats import session_stats


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value:.0%}"


def render(stats: dict[str, Any], console: Any = None) -> None:
    """Print ``keel.trace.stats.session_stats(...)`` as rich tables (the REPL's /stats passes its console)."""
    from rich.table import Table
    from rich.text import Text

    from keel.engine.provenance import serving_line

    console = console or output_console()
    t = stats["totals"]
    est = " (some estimated)" if t["estimated"] else ""
    cost = "— (no [prices] configured)" if stats["cost_usd"] is None else f"${stats['cost_usd']:.4f}"
    head = Table(title=f"session {stats['session_id']}", show_header=False)
    head.add_column("what")
    head.add_column("value")
    for label, value in [("task", stats["task"]), ("workspace", stats.get("workspace") or "?"),
                         ("status", stats["status"]), ("model", stats["model"]),
                         ("steps", stats["steps"]), ("tool calls", stats["tool_calls"]),
                         ("verification rounds", stats["verification_rounds"]),
                         ("compactions", stats["compactions"]), ("resumed", stats["resumed"]),
                         ("duration", f"{stats['duration_s']:.1f}s"),
                         ("tokens in / out / cached", f"{t['prompt_tokens']:,} / {t['completion_tokens']:,} / "
                                                      f"{t['cached_tokens']:,}{est}"),
                         ("cache hit", _pct(t["cache_hit"])), ("prefix reuse", _pct(t["prefix_reuse"])),
                         ("cost", cost), ("serving", serving_line(stats.get("serving")))]:
        head.add_row(label, Text(str(value)))  # Text: a task's "[...]" is not rich markup
    console.print(head)
    calls = Table(title="model calls")
    for col in ("step", "in", "out", "cached", "hit", "reuse", "latency", "retries", "finish"):
        calls.add_column(col, justify="left" if col == "finish" else "right")
    for c in stats["calls"]:
        calls.add_row(str(c["step"]), f"{c['prompt_tokens']:,}" + ("~" if c["estimated"] else ""),
                      f"{c['completion_tokens']:,}", f"{c['cached_tokens']:,}", _pct(c["cache_hit"]),
                      _pct(c["prefix_reuse"]), f"{c['latency_s'] or 0:.2f}s", str(c["retries"] or 0),
                      str(c["finish_reason"]))
    calls.add_row("total", f"{t['prompt_tokens']:,}", f"{t['completion_tokens']:,}", f"{t['cached_tokens']:,}",
                  _pct(t["cache_hit"]), _pct(t["prefix_reuse"]), "", "", "")
    console.print(calls)
    tools = Table(title="tool calls by name")
    for col in ("tool", "count", "failed", "median", "max", "output"):
        tools.add_column(col, justify="left" if col == "tool" else "right")
    for r in stats["tools"]:
        tools.add_row(r["name"], str(r["count"]), str(r["failed"]), f"{r['median_ms']:.0f}ms",
                      f"{r['max_ms']:.0f}ms", f"{r['output_bytes']:,} B")
    console.print(tools)
    if stats["hotspots"]:
        console.print("[bold]hotspots[/bold]")
        for hint in stats["hotspots"]:
            console.print(f"  • {hint}", markup=False, highlight=False)
    else:
        console.print("no hotspots")


@quiet_broken_pipe
def stats_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="keel stats", description="Numbers of one session (default: the latest).")
    p.add_argument("session", nargs="?", help="session id (or a unique prefix, or a log path)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    from keel.config import ConfigError

    try:
        prices = load_prices(Path.cwd())
        path = resolve_log(args.session, Path.cwd())
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:
        print(f"keel: {e}", file=sys.stderr)
        return EXIT_USAGE
    read = read_log(path)
    for note in read.skipped:
        print(f"keel: note: {note}", file=sys.stderr)
    stats = session_stats(read.events, prices)
    stats["session_id"] = stats["session_id"] or path.stem
    if args.json:
        print(json.dumps(stats, ensure_ascii=False, default=str))
    else:
        render(stats)
    return 0
