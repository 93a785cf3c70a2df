"""Put back what did not help (the put_back assist): when change_file leaves the project's checks
failing and the run has changed two or more code files, each of them is tried as the run found it, on a
scratch copy of the workspace; one the checks do better without goes back in the real workspace, and the
model is told which and why.

Why: a small model's first change is often a guess at the symptom that does no visible harm (the same
tests fail before and after), so change_file keeps it; the cause is then fixed elsewhere, and the guess is
what still fails. Measured on the 1.5B (js-due-date, ce260cd): the model set invoice.js's `now: 0` to 4
(3 tests failing before and after); callee_change then fixed parseDate in dates.js (1 failing: the one
`now: 4` broke), and the run spent its last 300 s changing that constant to 3 and back, ending on the
wall clock. Without the first change every test passed.

Only the run's own changes are put back, and only to the text the run found (the user's): never a test
or a file the checks protect, never a file the run created, deleted or cannot read as text. A file goes
back only when the checks fail less without it and no test fails then that passes now (a guess that
broke one test while a feature is half-built is still pulled back: a regression, named to the model).
The trials run in the sandbox on a copy (``Verifier.trials``), within the candidates' time limit.

``worth_trying`` and ``better_without`` are pure; ``put_back`` is the shell change_file calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from keel.drive.callee import put_back_file
from keel.drive.candidates import trial_limit
from keel.drive.check_text import failing_tests, failing_words, failure_score, render_checks_after
from keel.tools.base import ToolContext, ToolResult, assist_acted
from keel.verify.selfcheck import is_code_file
from keel.verify.snapshot import diff_snapshots, take_snapshot

if TYPE_CHECKING:
    from keel.verify.gate import CheckOutcome

MAX_TRIED = 3   # files tried per call: each trial is a copy of the workspace and a run of the checks


def worth_trying(modified: Sequence[str], protected: Collection[str]) -> list[str]:
    """The code files of ``modified`` (the run's changes to files it found) that may go back: never a
    test or a protected file; none when fewer than two remain (one file put back is the start again,
    whose checks the run already has)."""
    files = [p for p in modified if is_code_file(p) and p not in protected]
    return files if len(files) >= 2 else []


def failing(outcomes: Sequence[CheckOutcome]) -> tuple[int, frozenset[str]]:
    """(failure score, the failing tests' names) of a run of the checks."""
    return failure_score(outcomes), frozenset(failing_tests(outcomes))


def better_without(now: tuple[int, frozenset[str]], without: tuple[int, frozenset[str]]) -> bool:
    """Whether the checks without a change (``without``) beat the checks with it (``now``): a lower score
    and no failing test that passes now."""
    return without[0] < now[0] and without[1] <= now[1]


def put_back(result: ToolResult, ctx: ToolContext, saw: Callable[[tuple[CheckOutcome, ...]], object]) -> ToolResult:
    """After change_file's ``result`` left the checks failing: each code file the run changed, tried as the
    run found it; one the checks do better without is written back, ``result`` told so with the checks'
    new outcome (and its ``failing`` meta the new count); ``saw`` gets that outcome (change_file's latest)."""
    run = ctx.run
    verifier = run.verifier if run is not None else None
    before, after = result.meta.get("failing") or (0, 0)
    if not after or verifier is None or verifier.plan.empty:
        return result
    start = verifier.start
    changes = diff_snapshots(start, take_snapshot(ctx.workspace))
    paths = worth_trying([c.path for c in changes if c.status == "modified" and start.text(c.path) is not None],
                         verifier.protected)
    now = (after, frozenset(result.meta.get("failing_tests") or ()))
    told: list[str] = []
    outcomes: tuple[CheckOutcome, ...] = ()
    for path in paths[:MAX_TRIED]:
        original = start.text(path)
        if original is None:
            continue
        with verifier.trials(trial_limit(None)) as trial:
            without = failing(trial(path, original))
        if not better_without(now, without):
            continue
        put_back_file(ctx, path, original.encode("utf-8"))
        outcomes = verifier.run_plan()   # the evidence is the real files', run again here
        then, now = now, failing(outcomes)
        words = f"{failing_words(then[0])} with the change, {failing_words(now[0]) if now[0] else 'none'} without it"
        assist_acted(ctx, "put_back", f"{path}: {words}")
        told.append(f"keel put {path} back as the run found it: the checks do better without the change to it "
                    f"({words}).")
        result.meta["failing"] = (before, now[0])
        result.meta["failing_tests"] = tuple(sorted(now[1]))
        result.files_changed = list(dict.fromkeys([*result.files_changed, path]))
        if not now[0]:
            break
    if not told:
        return result
    saw(outcomes)
    news = "\n".join([*told, render_checks_after(outcomes)])
    # all pass: the news leads (callee_change measured it: behind the old failures the pass went unseen)
    result.output = f"{result.output.splitlines()[0]}\n\n{news}" if not now[0] else f"{result.output}\n\n{news}"
    return result
