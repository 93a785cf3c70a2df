"""The verification gate's pure core: from check results, decide what blocks a completion claim.

The runner hands the decider a ``GateFacts`` built here; the decider never runs anything. What counts
as evidence depends on what the request asks for (keel.core.request: change, answer or verify;
docs/verification.md). The rules, in the order they apply:

- A claim whose change edits an existing test or the acceptance command's own script is not
  accepted (``tampered``) unless the task asks for test changes: tests are evidence, not clay.
- A request that asks only for an answer is finished by the answer with the workspace as it was: no
  check runs, and a changed workspace is refused (``changed_answer_only``), the more so when the user
  said not to change anything.
- A task that asks for a change, with the workspace byte-identical to its start, is not done
  (``unchanged``), whatever the checks say.
- Acceptance checks (named by the task or ``--accept``) always block when they fail.
- An inferred check that failed before the agent changed anything (the baseline) and fails the
  same way now is a pre-existing failure: reported apart, not blocking — unless the task
  concerns it ("fix the failing test" is about that very failure; a bug report that names the
  module counts too once the agent has changed something, even without a "fix" in it), the agent
  changed nothing and the task asked for a change, or new tests fail that passed at baseline.
- Any other failing check blocks.
- A change (or a "make sure") needs fresh passing evidence: a check that passed on the final files, or
  tests that passed inside a run that fails as it did before. Failures filed as pre-existing never
  make it pass by themselves (status ``failing_before``; the decider then wants a passing run of the
  agent's own that exercises the change, else pushes back ``no_evidence``): the false done of keel
  issue 32 was a run whose only check failed before and after, with nothing changed.

With nothing blocking, a task that says the code must do what a comment or docstring says carries
those comments (``contract``): the decider asks the model once to check its code against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from keel.core.request import Request
from keel.outputs.summarize import failing_ids_new
from keel.verify.contract import Promise
from keel.verify.plan import CATEGORY_ORDER, PlannedCheck


@dataclass(frozen=True)
class CheckOutcome:
    """One planned check, run once, on one workspace state."""

    check: PlannedCheck
    exit_code: int | None
    duration_s: float
    digest: str                        # the workspace state it ran on
    timed_out: bool = False
    output_ok: bool = True             # the task's expected output (e.g. "prints OK") was seen
    refused: str | None = None         # the policy would not run it: not evidence either way
    failing_tests: tuple[str, ...] = ()
    summary: str = ""                  # a short failure summary (empty when it passed)
    output_path: str | None = None     # where the full output was saved
    tests_passed: int | None = None    # tests its output says passed (keel.outputs.counts); None: unknown
    unloaded: tuple[str, ...] = ()     # test files that could not be loaded (FailureSummary.unloaded)
    details: tuple[tuple[str, str], ...] = ()   # (test id, what the runner printed for it): FailureSummary.details

    @property
    def passed(self) -> bool:
        return self.refused is None and self.exit_code == 0 and not self.timed_out and self.output_ok

    @property
    def ran(self) -> bool:
        return self.refused is None

    def to_json(self) -> dict[str, Any]:
        return {"category": self.check.category, "command": self.check.command, "source": self.check.source,
                "exit_code": self.exit_code, "passed": self.passed, "timed_out": self.timed_out,
                "output_ok": self.output_ok, "refused": self.refused, "duration_s": round(self.duration_s, 3),
                "failing_tests": list(self.failing_tests), "output_path": self.output_path,
                "tests_passed": self.tests_passed, **({"unloaded": list(self.unloaded)} if self.unloaded else {})}


@dataclass(frozen=True)
class GateFacts:
    """What the decider needs to judge a completion claim, computed by the runner's verifier."""

    digest: str
    results: tuple[CheckOutcome, ...] = ()
    blocking: tuple[CheckOutcome, ...] = ()
    preexisting: tuple[CheckOutcome, ...] = ()
    tampered: tuple[str, ...] = ()
    unchanged: bool = False            # the workspace is byte-identical to its state at the start
    kind: str = "change"               # what the request asks for: change, answer or verify (keel.core.request)
    plan_empty: bool = False           # nothing to run: the project declares no check keel can find
    feedback: str = ""                 # failure summaries for the pushback, already rendered
    contract: tuple[Promise, ...] = ()  # the comments the task makes part of "done" (keel.verify.contract)
    changed: tuple[str, ...] = ()      # an answer-only request: the files that changed anyway
    forbidden: bool = False            # …and the user said not to change anything
    contradicted: bool = False         # …and the answer clears the code while its checks fail (``results``)
    unfounded: bool = False            # …or clears it while the request says there is a flaw to name
    answer_gap: str = ""               # …or does not rest on the project (keel.verify.grounding.answer_gap;
                                       # "wrong_error": blames an exception the failing checks never show)

    @property
    def change_requested(self) -> bool:
        return self.kind == "change"

    @property
    def blocking_categories(self) -> tuple[str, ...]:
        seen = {o.check.category for o in self.blocking}
        return tuple(c for c in CATEGORY_ORDER if c in seen)

    @property
    def evidence(self) -> bool:
        """A check passed on these files, or tests passed inside a run that fails as before."""
        return any(o.passed or (o.tests_passed or 0) > 0 for o in self.results if o.ran)

    @property
    def problem(self) -> str | None:
        """The first reason the claim is refused, as a pushback kind; None when it stands."""
        if self.tampered:
            return "tampered_tests"
        if self.kind == "answer":
            return ("changed_answer_only" if not self.unchanged else "answer_contradicted" if self.contradicted
                    else "answer_unfounded" if self.unfounded else f"answer_{self.answer_gap}" if self.answer_gap
                    else None)
        if self.unchanged and self.change_requested:
            return "no_change"
        if self.blocking:
            return "verification_failed"
        return None

    @property
    def round_keys(self) -> tuple[str, ...]:
        """What a refusal of this claim spends a repair round of: each failing category, or the problem
        (``no_evidence`` when every check fails as before and the decider found no run of the agent's own)."""
        if self.problem == "verification_failed":
            return self.blocking_categories
        if self.problem is None and self.status == "failing_before":
            return ("no_evidence",)
        return (self.problem,) if self.problem else ()

    @property
    def status(self) -> str:
        if self.problem is not None:
            return "failed"
        if self.kind == "answer":
            return "answered"       # nothing to run: the answer in words, the workspace as it was
        if self.plan_empty or not any(o.ran for o in self.results):
            return "no_checks"
        if not self.evidence:
            return "failing_before"   # every check fails as it did before the run: no check speaks for it
        return "passed"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "problem": self.problem, "digest": self.digest[:16],
                "checks": [o.to_json() for o in self.results],
                "preexisting_failures": [o.check.command for o in self.preexisting],
                "tampered": list(self.tampered), "unchanged": self.unchanged, "request": self.kind,
                **({"changed_answer_only": list(self.changed), "forbidden": self.forbidden} if self.changed else {})}


@dataclass(frozen=True)
class Baseline:
    """Which checks failed before the agent changed anything, and which tests failed in them."""

    digest: str
    failed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # command -> failing test ids
    passed: frozenset[str] = frozenset()

    @classmethod
    def from_results(cls, digest: str, results: tuple[CheckOutcome, ...]) -> Baseline:
        return cls(digest, {o.check.command: o.failing_tests for o in results if o.ran and not o.passed},
                   frozenset(o.check.command for o in results if o.passed))


def split_failures(results: tuple[CheckOutcome, ...], baseline: Baseline | None, *,
                   unchanged: bool, request: Request) -> tuple[tuple[CheckOutcome, ...], tuple[CheckOutcome, ...]]:
    """(blocking, preexisting) among the failed results."""
    blocking: list[CheckOutcome] = []
    preexisting: list[CheckOutcome] = []
    for o in results:
        if o.passed or (not o.ran and o.check.category != "acceptance"):
            continue  # an inferred check the policy would not run is no evidence either way
        if _blocks(o, baseline, unchanged=unchanged, request=request):
            blocking.append(o)
        else:
            preexisting.append(o)
    return tuple(blocking), tuple(preexisting)


def _blocks(o: CheckOutcome, baseline: Baseline | None, *, unchanged: bool, request: Request) -> bool:
    if o.check.category == "acceptance" or baseline is None:
        return True                      # the task's own check always decides; no baseline: no excuse
    before = baseline.failed.get(o.check.command)
    if before is None:
        return True                      # it passed (or was not run) at baseline: the agent broke it
    concerned = request.concerns(o.check.category, o.failing_tests)
    if request.make_sure and concerned:
        return True                      # "make sure the tests pass": that failure is what it is about
    if request.asks_change and unchanged:
        return True                      # nothing done about the change the task asked for
    if (request.asks_change or not unchanged) and concerned:
        return True                      # that failure is the task: also for a bug report with no "fix" in it
    return bool(failing_ids_new(before, o.failing_tests))   # new failures on top of the old ones


def render_feedback(blocking: tuple[CheckOutcome, ...], preexisting: tuple[CheckOutcome, ...],
                    max_chars: int = 3000) -> str:
    """The pushback body: what failed, where, and the path of the full output — never the whole log."""
    parts: list[str] = []
    for o in blocking:
        status = "timed out" if o.timed_out else f"exited {o.exit_code}"
        if not o.ran:
            status = f"could not run: {o.refused}"
        elif o.exit_code == 0 and not o.output_ok:
            status = "exited 0 but did not print what the task requires"
        head = f"- [{o.check.category}] `{o.check.shown or o.check.command}` {status}"
        if o.output_path:
            head += f" (full output: {o.output_path})"
        body = "\n".join("    " + line for line in o.summary.splitlines() if line.strip())
        parts.append(head + ("\n" + body if body else ""))
    if preexisting:
        parts.append("Failing before your change too (not blocking): "
                     + ", ".join(f"`{o.check.command}`" for o in preexisting))
    text = "\n".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 20].rstrip() + "\n    … (cut)"
