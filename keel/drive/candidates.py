"""Candidates judged by the gate: when change_file's rewrites leave the project's checks failing, the
editor is asked for up to N more, each sampled differently, and the first that passes the checks stays.

Why: the gate knows whether a rewrite passes; a small model that writes the right file one time in three
is right most of the time when three rewrites are checked and the passing one kept (issue 37). Peers
judge "done" with a second reading of the transcript or retry once with the test output; none searches.

How: a candidate is change_file's second request (the task and the failing checks alone, no note,
and the file as the run found it: shown the run's own rewrite, 8 of 12 samples on py-stub-ledger gave
it back unchanged, ~25 s each) sampled as a variant (``variant`` n: at least VARIANT_TEMPERATURE and a seed of its own,
keel.engine.types.variant_sampling). Each is tried on a scratch copy of the workspace inside the
sandbox (``Verifier.trials``): the real workspace never holds a losing candidate, so there is nothing
to undo. The search stops at the first that passes, at N, or when the run's token or time budget would
not cover one more; change_file then writes the winner into the workspace and runs the checks there
again, so the evidence the gate and the model see is the real files'. Tests stay evidence, never clay:
a candidate that rewrites a protected test the task does not ask to change is never tried.

Pure: ``choose`` (which candidate stays) and ``stop_reason`` (whether to ask for one more), table-tested
in tests/test_candidates.py; ``search`` is the shell. Every candidate is a ``candidate`` event.
"""

from __future__ import annotations

import difflib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from keel.drive.check_text import against, each_failure, failing_words, failure_score
from keel.engine.types import Usage, variant_sampling
from keel.tools.base import BudgetLeft, ToolContext, assist_acted

if TYPE_CHECKING:
    from keel.verify.gate import CheckOutcome


class Rewrite(Protocol):
    """An editor's reply as change_file judged it (keel.drive.change.Reply)."""

    @property
    def text(self) -> str | None: ...   # None: no usable rewrite
    @property
    def problem(self) -> str: ...       # why there is none


Ask = Callable[[int], tuple[Rewrite, list[str]]]   # variant -> the reply and the definitions put back


@dataclass(frozen=True)
class Candidate:
    n: int                        # 1-based: its place in the search
    text: str | None              # None: no usable rewrite came back (``why``)
    failing: int | None = None    # the checks' failure score on the scratch copy; None: not tried
    diff: int = 0                 # lines added or removed against the file before the call
    protected: bool = False       # it rewrites a protected test the task does not ask to change
    why: str = ""
    restored: tuple[str, ...] = ()
    variant: int = 0              # the variant it was sampled with (keel.engine.types.variant_sampling)


# -- pure core ---------------------------------------------------------------------------------------
def choose(candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate that stays: of those whose checks all pass and that rewrite no protected test,
    the smallest diff, the first among equals; None when none passes."""
    passing = [c for c in candidates if c.text is not None and c.failing == 0 and not c.protected]
    return min(passing, key=lambda c: c.diff, default=None)   # min keeps the first of equals


def stop_reason(tried: Sequence[Candidate], limit: int, left: BudgetLeft, tokens: int, seconds: float) -> str | None:
    """Why no further candidate is asked for, or None to ask one more: one passed ("passed"); one
    rewrote a protected test ("protected": every candidate rewrites the same file); ``limit`` were
    asked ("limit"); what the run has ``left`` (net of this call's spending) is less than one more
    costs, ``tokens`` and ``seconds`` (the dearest so far): "tokens", "time"."""
    if choose(tried) is not None:
        return "passed"
    if any(c.protected for c in tried):
        return "protected"
    if len(tried) >= limit:
        return "limit"
    if left.tokens is not None and left.tokens < tokens:
        return "tokens"
    if left.seconds is not None and left.seconds < seconds:
        return "time"
    return None


def diff_size(before: str | None, after: str) -> int:
    """Lines added or removed from ``before`` (None: a new file, every line added) to ``after``."""
    old = (before or "").splitlines()
    return sum(1 for line in difflib.ndiff(old, after.splitlines()) if line[:1] in "+-")


# Fresh rounds one change (path, note) may have when the model sends it again. Each round samples new
# rewrites, so a repeat is one more try, not a loop; the run's step and time limits bound them. Measured
# on Exercism with the 1.5B at 2 (0bfd080): book-store's fourth round was refused as a repeat with 100 s
# of its 420 left (its third had gone from 19 failing tests to 14), triangle and crypto-square with 70-95 s.
AGAIN = 4
# A candidate's checks get TRIAL_FACTOR times as long as the checks took before the call, and at least
# TRIAL_FLOOR_S: one whose checks run past that is dropped, not scored. Measured on Exercism dominoes
# (1.5B): a candidate's brute-force search kept the tests running 132 s of the run's 420, where the
# stub's run had taken under a second; the checks' own limit is 300 s. change_file's own two rewrites
# get the same, with a floor of REWRITE_FLOOR_S: on run-length-encoding one of them looped and held the
# tests 300 s of the run's 420, where the stub's tests had run in 1.4 s.
TRIAL_FACTOR, TRIAL_FLOOR_S, REWRITE_FLOOR_S = 10, 20.0, 60.0


def trial_limit(before: Sequence[CheckOutcome] | None, floor: float = TRIAL_FLOOR_S) -> float | None:
    """How long a rewrite's checks may run (pure): see TRIAL_FACTOR. None (the checks' own limit) when no
    run before is known, or one stopped early: a test file that could not load ran none of its tests,
    so how long that took says nothing of how long they take once the code loads."""
    if not before or any(o.unloaded or o.timed_out for o in before):
        return None
    return max(floor, TRIAL_FACTOR * max(o.duration_s for o in before))


@dataclass
class Rounds:
    """The ``again`` assist: how often the model has sent one change (path, note). Sent again after its
    rewrites left the checks failing, it is another round, sampled with variants no earlier round used,
    from the file as the last round left it and its failing checks (as Aider's second try shows the
    test output). Measured on the 1.5B (py-spec-instructions): after a round whose best rewrite passed
    4 of 6 tests, the model sent the same change twice and was refused as repeating itself."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    last: tuple[str, str] | None = None   # the change the last round was of (a redirect's, when redirected)
    searches: dict[str, int] = field(default_factory=dict)   # candidate searches per file

    def start(self, path: str, note: str) -> int:
        """This call's round (0: the first time this change is asked)."""
        self.last = (path, note)
        n = self.seen.get(self.last, 0)
        self.seen[self.last] = n + 1
        return n

    def more(self) -> bool:
        """Whether sending the last change again may start one more round."""
        return self.last is not None and self.seen.get(self.last, 0) <= AGAIN

    def searched(self, path: str, round_: int) -> int:
        """The block of variants a candidate search of ``path`` in round ``round_`` samples with: the round's,
        or past every earlier search of that file. Its candidates are asked without the note, from the file
        as the run found it, so a new note's search would draw the last one's samples again (measured on the
        1.5B, py-discount-cent: the same two checkout.py candidates, seeds 1235 and 1236, at steps 2, 3 and 5)."""
        block = max(round_, self.searches.get(path, 0))
        self.searches[path] = block + 1
        return block

    @staticmethod
    def variant(round_: int, n: int, width: int) -> int:
        """The variant request ``n`` of a round samples with: round 0 as configured (n as given);
        a later round's own block of ``width`` variants, none used before."""
        return n if round_ == 0 else round_ * width + n


# -- the shell ---------------------------------------------------------------------------------------
@dataclass
class Search:
    """What a search asked and what it cost; ``kept``: the candidate that passed, if one did."""

    tried: list[Candidate] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0
    stopped: str = ""
    before: int = 0   # the failure score the search had to beat

    @property
    def kept(self) -> Candidate | None:
        return choose(self.tried)

    @property
    def better(self) -> Candidate | None:
        """When none passes: the one that fails least, if it fails less than ``before`` (the smallest diff
        among equals), so a later round starts from it, as change_file keeps its rewrite that fails least."""
        fewer = [c for c in self.tried if c.text is not None and c.failing is not None and c.failing < self.before
                 and not c.protected]
        return min(fewer, key=lambda c: (c.failing, c.diff), default=None)

    def report(self) -> str:
        """One line for the tool's result: how many, what they cost, which stayed."""
        if not self.tried:
            return ""
        cost = f"{len(self.tried)} more rewrite(s) sampled differently, tried on a copy of the workspace " \
               f"({self.tokens} tokens, {self.seconds:.0f} s)"
        if (kept := self.kept) is not None:
            return f"{cost}: candidate {kept.n} passes the project's checks and is what was written."
        if (better := self.better) is not None:
            return (f"{cost}: none passed the checks; candidate {better.n} fails less "
                    f"({against(better.failing or 0, self.before)}) and is what was written.")
        why = {"protected": "each would rewrite a protected test", "limit": "the limit of candidates",
               "tokens": "the run's token budget", "time": "the run's time limit"}.get(self.stopped, self.stopped)
        return f"{cost}: none passed the checks (stopped: {why}); none was kept."


def focused(ctx: ToolContext, path: str, known: Sequence[CheckOutcome] | None) -> Iterator[str]:
    """What each candidate is asked to make pass first (the ``focus`` assist): with two or more tests
    failing, one of them each, in turn; else nothing. Why, from the 1.5B's medium runs: asked for the
    whole file against every failure at once, its candidates came back failing the same two tests 8
    times of 8 (py-spec-instructions, test_empty and test_decode); one failure is a smaller task, and a
    candidate that fixes it fails less and is kept (``Search.better``), so the next round starts there."""
    failures = each_failure(known or ())
    if len(failures) >= 2:
        assist_acted(ctx, "focus", f"{path}: {len(failures)} failing tests, one per candidate")
        yield from itertools.cycle(failures)
    yield from itertools.repeat("")


def search(ctx: ToolContext, ask: Ask, checks: Any, path: str, current: str | None, *, protected: bool,
           limit: int, before: int, spent: Usage, unit: tuple[int, float], block: tuple[int, int] = (0, 0),
           limit_s: float | None = TRIAL_FLOOR_S) -> Search:
    """Ask for candidates one at a time and try each on a scratch copy (``checks.trials()``, the
    project's checks: keel.verify.verifier.Verifier) until ``stop_reason`` says stop. ``before``: the
    failure score to beat (the best rewrite so far); ``spent``: this call's usage, which each request
    adds to; ``unit``: tokens and seconds one request has cost so far, the first estimate of one more;
    ``block``: the block of variants (Rounds.searched) and its width; ``limit_s``: how long a candidate's
    checks may run (trial_limit; None: their own limit)."""
    run = ctx.run
    assert run is not None
    engine, found = run.engine, Search(before=before)
    tokens, seconds = unit
    with checks.trials(limit_s) as trial:
        while (stopped := stop_reason(found.tried, limit, _left(run.budget_left(), spent), tokens, seconds)) is None:
            n, started, used = len(found.tried) + 1, time.monotonic(), spent.total
            variant = Rounds.variant(block[0], n, block[1]) if block[1] else n
            reply, restored = ask(variant)
            text, why = reply.text, reply.problem
            if protected:   # never tried: a pass would be the test's, not the code's
                candidate = Candidate(n, text, protected=True, why="rewrites a protected test", variant=variant)
            elif text is None:
                candidate = Candidate(n, None, why=why, variant=variant)
            elif (ran := _timed_out(outcomes := trial(path, text))) is not None:   # a loop, or far too slow
                candidate = Candidate(n, None, why=f"its checks ran past {ran:.0f} s, so it was dropped", variant=variant)
            else:
                failing = failure_score(outcomes)
                candidate = Candidate(n, text, failing, diff_size(current, text), restored=tuple(restored),
                                      why="" if failing == 0 else failing_words(failing), variant=variant)
            found.tried.append(candidate)
            took, cost = time.monotonic() - started, spent.total - used
            found.tokens, found.seconds = found.tokens + cost, found.seconds + took
            tokens, seconds = max(tokens, cost), max(seconds, took)
            _emit(run, engine, path, candidate, before, candidate is found.kept, cost, took)
    found.stopped = stopped
    if found.tried:
        assist_acted(ctx, "candidates", f"{path}: {len(found.tried)} tried, stopped: {found.stopped}")
    return found


def _timed_out(outcomes: Sequence[CheckOutcome]) -> float | None:
    """How long a check that ran out of time had run (its limit), or None when none did."""
    return max((o.duration_s for o in outcomes if o.timed_out), default=None)


def _left(left: BudgetLeft, spent: Usage) -> BudgetLeft:
    """What the run has left once this call's own requests count (the run adds them after the call)."""
    tokens = left.tokens - spent.total if left.tokens is not None else None
    return BudgetLeft(tokens=tokens, cost_usd=left.cost_usd, seconds=left.seconds)


def _emit(run: Any, engine: Any, path: str, c: Candidate, before: int, kept: bool, tokens: int,
          seconds: float) -> None:
    temperature, seed = getattr(engine, "temperature", None), getattr(engine, "seed", None)
    if isinstance(temperature, (int, float)):
        temperature, seed = variant_sampling(float(temperature), seed if isinstance(seed, int) else None, c.variant)
    run.bus.emit("candidate", step=run.step, path=path, n=c.n, temperature=temperature, seed=seed,
                 failing_before=before, failing=c.failing, diff_lines=c.diff if c.failing is not None else None,
                 kept=kept, why=c.why[:300], tokens=tokens, seconds=round(seconds, 3))
