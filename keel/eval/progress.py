"""The eval's progress bar (rich, on stderr) and one line per finished run above it."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from keel.eval.execute import JobOutput

STYLE = {"success": "green", "done_unclaimed": "cyan", "false_done": "bold red", "failed": "yellow",
         "error": "magenta"}
WORD = {"success": "pass", "done_unclaimed": "unclaimed", "false_done": "FALSE DONE", "failed": "fail",
        "error": "error"}


class EvalProgress:
    def __init__(self, total: int, console: Console | None = None) -> None:
        self.console = console or Console(file=sys.stderr)
        self.progress = Progress(TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console,
                                 transient=False)
        self.task = self.progress.add_task("", total=total)
        self.counts: dict[str, int] = {}

    def __enter__(self) -> EvalProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def landed(self, output: JobOutput) -> None:
        r = output.record
        word = str(r.get("outcome"))
        self.counts[word] = self.counts.get(word, 0) + 1
        m = r.get("metrics") or {}
        lines = [line for line in str(r.get("error") or "").splitlines() if line.strip()]
        extra = f" · {lines[-1][:200]}" if lines else ""  # the whole error is in the record
        self.progress.console.print(
            f"[{STYLE.get(word, 'white')}]{WORD.get(word, word):>10}[/] {r['case']['id']} "
            f"({r.get('agent')} r{r.get('repeat')}) · {r.get('stop_reason')} · {m.get('steps', 0)} steps · "
            f"{m.get('wall_s', 0):.1f} s{extra}", markup=True, highlight=False)
        self.progress.update(self.task, advance=1, description=self._tally())

    def skip(self, n: int) -> None:
        if n:
            self.counts["resumed"] = self.counts.get("resumed", 0) + n
            self.progress.update(self.task, advance=n, description=self._tally())

    def _tally(self) -> str:
        return " ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
