"""The stop decider: one pure function that says whether the run goes on.

It may stop only for: ``complete``, ``needs_user`` (only when a person is present),
``awaiting_plan_approval`` (plan mode, attended or not), or a limit (``limit:*``). Everything else that looks like an end —
a question nobody can answer, "done" without evidence, open todos — becomes pushback, text
attached to the next request only. Tool failures are never a reason to stop.

With the verification gate on (``state.gate_on``), every completion claim — a ``finish`` call or a
reply without tool calls — is judged on the gate's facts: the first time the decider sees a claim
without them it answers ``verify``, the runner runs the checks and asks again with
``outcome.verification`` filled in. A refused claim is pushed back with the failure summary; after
``limits.max_repair_rounds`` refusals of the same kind (per failing check category) the run stops
with ``limit:verification`` instead of looping.

A claim the gate passed and only the contract review held (a small model's assist, asked once) stands
when the run then reaches a limit and the gate passes the files again there (``claim_stands``, which
the runner fills): the evidence is fresh, and a review cut by the clock is no reason to call a verified
change incomplete. Measured on the 1.5B (js-implement-function): the claim passed the tests
and the spec probes at 340 s, the review's change came back unchanged, and the run ended
``limit:wall_clock`` at 420 s with the task done.

No I/O, no clock, no model call: every input arrives as an argument, so the table-driven
tests in tests/test_decider.py can cover every branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from keel.core.state import TaskState
from keel.engine.prompts import answer_note
from keel.loop.limits import Consumed, Limits, exceeded_limit
from keel.loop.pushback import pushback_text
from keel.verify.answer import answer_problem, clears_the_code
from keel.verify.contract import review_text
from keel.verify.gate import GateFacts

STOP_REASONS = (
    "complete", "needs_user", "awaiting_plan_approval",
    "limit:steps", "limit:wall_clock", "limit:tokens", "limit:cost", "limit:repetition",
    "limit:no_progress", "limit:retries", "limit:context", "limit:verification",
)


@dataclass(frozen=True)
class TurnOutcome:
    """What happened in the turn that just ended, as facts the decider can judge."""

    text: str = ""
    tool_calls: int = 0              # calls the model made this turn (valid or not)
    progress: bool = False           # at least one new, valid call was executed
    finished: bool = False           # the model called finish(summary)
    summary: str = ""                # finish's summary (the answer, for a request that asks for one)
    asked_user: str | None = None    # the model called ask_user(question)
    plan_submitted: bool = False     # in plan mode, the model presented its plan
    truncated: bool = False          # cut short: the output-token cap, keel's own cut, or text ending inside a call
    cut_reason: str = ""             # "repeating", "deadline" (keel cut it) or "call" (the text stopped inside a call)
    malformed_call: bool = False     # no call was recovered, but the text carries an attempted one
    engine_failure: Literal["context", "retries"] | None = None
    verification: GateFacts | None = None  # the gate's facts for this claim, once the runner ran it
    claim_stands: bool = False       # at a limit, the gate passed the claim the review held once more


@dataclass(frozen=True)
class Decision:
    verdict: Literal["continue", "stop", "verify"]   # verify: run the gate, then decide again
    reason: str = ""                 # stop reason, or the pushback kind when continuing with pushback
    pushback: str | None = None      # text for the next request only

    @property
    def stop(self) -> bool:
        return self.verdict == "stop"

    @property
    def pushback_kind(self) -> str | None:
        return self.reason if self.pushback else None


CONTINUE = Decision("continue")

_QUESTION_PHRASES = re.compile(
    r"\b(would you like|do you want|shall i|should i|can you (?:provide|confirm|clarify|share)|"
    r"could you (?:provide|confirm|clarify|share)|please (?:confirm|clarify|provide|let me know)|"
    r"let me know (?:whether|what|which|how)|(?:want|like) me to (?:proceed|continue|go ahead|apply|make)|"
    r"before i (?:proceed|continue|make)|which (?:option|approach) (?:do|would) you|"
    r"may i|is it ok(?:ay)? (?:to|if)|do i have (?:your )?permission)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Does this reply hand the turn back to a person (a question or a request for permission)?"""
    stripped = text.strip()
    if not stripped:
        return False
    last = re.split(r"(?<=[.!?])\s+|\n+", stripped)[-1]
    return last.rstrip().endswith("?") or bool(_QUESTION_PHRASES.search(stripped[-600:]))


def decide(outcome: TurnOutcome, state: TaskState, limits: Limits, used: Consumed, *,
           attended: bool, plan_mode: bool = False) -> Decision:
    """CONTINUE (maybe with pushback) or STOP with a reason, from this turn's facts alone."""
    if outcome.engine_failure is not None:
        return _limit(f"limit:{outcome.engine_failure}", outcome)
    if state.repetition_strikes >= limits.max_repeats:
        return _limit("limit:repetition", outcome)

    verdict = _judge_turn(outcome, state, limits, attended=attended, plan_mode=plan_mode)
    if verdict.stop or verdict.verdict == "verify":
        return verdict

    limit = exceeded_limit(limits, used)
    if limit is not None:
        return _limit(limit, outcome)

    if verdict.pushback is not None:
        streak = 0 if outcome.progress else state.pushback_streak
        if streak >= limits.max_pushbacks_without_progress:
            return _limit("limit:no_progress", outcome)
    if not outcome.progress and state.idle_turns + 1 >= limits.max_idle_turns:
        return _limit("limit:no_progress", outcome)
    return verdict


def _limit(reason: str, outcome: TurnOutcome) -> Decision:
    """A stop on a limit, or ``complete`` when a claim the gate passed stands (see the module docstring)."""
    return Decision("stop", "complete" if outcome.claim_stands else reason)


def _judge_turn(outcome: TurnOutcome, state: TaskState, limits: Limits, *, attended: bool,
                plan_mode: bool) -> Decision:
    ends_turn = outcome.finished or outcome.tool_calls == 0 or outcome.asked_user is not None
    if not ends_turn:
        return CONTINUE  # the model is working; tool results go back to it

    # A cut reply often ends inside a call: that is a reply too long, not a call written as text.
    if outcome.malformed_call and outcome.tool_calls == 0 and not outcome.truncated:
        return _push("malformed_call", state)

    if plan_mode and outcome.plan_submitted and not (outcome.truncated and not outcome.finished):
        # Headless too: the plan is for a person to read before anything changes (docs/extensions.md).
        return Decision("stop", "awaiting_plan_approval")

    request = state.request
    claim = outcome.summary or outcome.text
    question = outcome.asked_user is not None or (
        not outcome.finished and outcome.tool_calls == 0 and is_question(outcome.text)
        and not (state.answers and answer_problem(claim, _said(state)) is None))   # an answer ending with an offer
    if question:
        return Decision("stop", "needs_user") if attended else _push("question_unattended", state)

    if outcome.truncated and not outcome.finished:
        return _push("truncated", state, outcome.cut_reason)
    if not outcome.finished and outcome.tool_calls == 0 and not outcome.text.strip():
        return _push("empty_reply", state)

    # Everything left is a claim of completion: a finish call, or a reply with no tool calls.
    if state.tool_calls_total == 0 and not (attended and not request.asks_change) and \
            not (state.answers and state.pushback_counts["did_nothing"]):
        # Unattended, an answer made without looking is pushed back (a question once: it may need no file).
        # A person asking a question in the REPL is answered from the conversation, in one model call.
        return _push("did_nothing", state, "answer" if state.answers else "")
    if state.unfinished_todos():
        return _push("unfinished_todos", state)
    if state.answers and (problem := answer_problem(claim, _said(state))) is not None:
        return _push("no_answer", state, problem)      # a question back or "I will look at…" answers nothing
    if state.answers and not state.pushback_counts["recheck_answer"] and clears_the_code(claim) and \
            request.asks_flaws and not (state.gate_on and request.presumes_flaw):
        return _push("recheck_answer", state)   # "any bugs?" answered "none": looked at once more, then it stands
    if state.gate_on:
        return _judge_claim(outcome.verification, state, limits)
    return _judge_without_gate(state)


def _judge_without_gate(state: TaskState) -> Decision:
    """A claim with the gate off (``--verify off``): the agent's own checks after its last change."""
    if state.answers and state.files_changed:
        return _push("changed_answer_only", state, ", ".join(state.files_changed[:12]))
    if state.request.asks_change and not state.files_changed and not state.read_only:
        return _push("no_change", state)
    if state.files_changed and not state.fresh_verification():
        return _push("unverified", state)
    return Decision("stop", "complete")


def _judge_claim(facts: GateFacts | None, state: TaskState, limits: Limits) -> Decision:
    """A completion claim under the verification gate."""
    if facts is None:
        return Decision("verify", "verify")
    problem = facts.problem
    if problem is None and facts.status == "failing_before" and not _own_evidence(state):
        problem = "no_evidence"          # every check fails as before: the failures say nothing of the change
    if problem is None:
        if facts.status == "no_checks" and facts.kind != "answer" and not _own_evidence(state):
            return _push("unverified", state, "no_plan")  # nothing keel could run: the agent's own run must do
        if facts.contract and not state.pushback_counts["contract_review"]:   # once: the tests do not run a comment
            return _push("contract_review", state, review_text(facts.contract, "change_file" in state.tools))
        return Decision("stop", "complete")
    if any(state.repair_rounds[key] >= limits.max_repair_rounds for key in facts.round_keys):
        return Decision("stop", "limit:verification")
    return _push(problem, state, facts.feedback)


def _own_evidence(state: TaskState) -> bool:
    """Where keel found nothing to run, or every check fails as before: a passing run after the last
    change of the changed code (it runs or imports a changed file), or of the project's whole test suite
    with at least one test run and none deselected (``TaskState.fresh_test_run``). Nothing changed:
    nothing to show, unless the request makes sure of something (then a passing check of the agent's)."""
    if state.fresh_test_run():
        return True
    if state.files_changed:
        return state.fresh_verification(exercising_changes=True)
    return not state.request.make_sure or state.fresh_verification()


def _said(state: TaskState) -> tuple[str, ...]:
    """The request and keel's note about it: an answer that only says them back answers nothing."""
    return (state.task, answer_note(True), answer_note(False))


def _push(kind: str, state: TaskState, detail: str = "") -> Decision:
    return Decision("continue", kind, pushback_text(kind, state.pushback_counts[kind], state, detail))
