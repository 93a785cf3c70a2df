"""The runner: model call → tool calls → results appended → decide, until the decider stops.

A small state machine (initial → thinking → tool_use → tool_result → thinking … → end_turn).
It owns no stop logic of its own: every "should we go on?" goes through ``decide``. The
assistant message is written back exactly as received, and every tool call gets exactly one
tool message with its id, also when a tool raises or the user interrupts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from keel.core.assists import Assists
from keel.core.events import EventBus
from keel.core.state import TaskState, Todo
from keel.engine.recovery import looks_like_tool_call
from keel.engine.types import AssistantTurn, Engine, EngineError, StreamDelta, ToolCall, Usage
from keel.loop import limits as lim
from keel.loop.decider import Decision, TurnOutcome, decide
from keel.loop.handle import RunView
from keel.loop.repair import repair
from keel.loop.repetition import UNGUARDED, RepetitionGuard, Skip, canonical_call, ran_again_text
from keel.loop.result import RunResult
from keel.loop.variety import NORMAL, Variant, Variety, called_tools, fingerprint, turned_down, variant_json
from keel.tools.base import ToolContext, ToolResult
from keel.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from keel.context.manager import ContextManager
    from keel.verify.gate import GateFacts
    from keel.verify.verifier import Verifier

# keel's own tools that report every file they change (run_shell through the workspace watch)
_REPORTS_CHANGES = frozenset({"run_shell", "edit_file", "write_file", "change_file", "todo_write", "remember",
                              "finish", "ask_user"})
INTERRUPTED = "Interrupted by the user before this call finished; it may not have run."
# A reply cut short (the output-token limit, keel's own cut, text that stops inside a call) may
# carry a call whose arguments are cut too: half a file for write_file. Its calls never run.
CUT_CALL = ("This call was cut off before it ended ({why}), so it did not run. Send it again, complete, "
            "as one call; write a long file in parts (write_file with the first part, then edit_file).")


def cut_short(turn: AssistantTurn) -> str | None:
    """Why the reply stopped before it ended, or None: the engine's output limit, keel's own cut
    (repeating, the deadline), or text that stops inside a call."""
    if turn.cut_reason == "call":
        return "the reply stopped inside the call"
    if turn.cut_reason:
        return f"keel cut the reply short: {turn.cut_reason}"
    return "the reply hit the output-token limit" if turn.finish_reason == "length" else None


# keel's own tools that call ctx.before_change once approved, just before their first change: the
# gate's baseline waits for the person's answer instead of making them wait for it
_ASK_FIRST = frozenset({"edit_file", "write_file", "run_shell", "remember", "change_file"})
# keel's own file writers, not run for a request that asks only for an answer: on the 1.5B, "just explain,
# do not change anything" (py-question-project) got two change_file calls that rewrote the project's files
_WRITERS = frozenset({"edit_file", "write_file", "change_file"})
ANSWER_ONLY = ("Not run: this request asks for an answer in words, not a change (“{why}”). Read what you need "
               "(read_file, grep, list_dir), then reply with the answer.")


class Runner:
    def __init__(self, engine: Engine, registry: ToolRegistry, ctx: ToolContext, bus: EventBus, *,
                 limits: lim.Limits | None = None, prices: lim.Prices | None = None,
                 attended: bool = False, plan_mode: bool = False, state: TaskState | None = None,
                 task: str = "", verifier: Verifier | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_stop: Callable[[str], str | None] | None = None, context: ContextManager | None = None,
                 assists: Assists | None = None) -> None:
        self.engine, self.registry, self.ctx, self.bus = engine, registry, ctx, bus
        self.assists = assists if assists is not None else ctx.assists   # keel.core.assists
        self.limits, self.prices = limits or lim.Limits(), prices or lim.Prices()
        self.attended, self.plan_mode, self.clock = attended, plan_mode, clock
        self.state = state or TaskState(task=task)
        self.verifier = verifier
        self.context = context  # keeps every request inside the window (keel.context.manager); None: unmanaged
        self.on_stop = on_stop  # Stop hooks (keel.ext.hooks): text that vetoes a completion, or None
        self.state.gate_on = verifier is not None
        self.repeats = RepetitionGuard()
        self.usage = Usage()
        self.steps = 0
        self._stood = False   # the last decision: a claim the review held, standing at a limit (the gate passed it)
        self._refused: str | None = None   # the workspace digest of the last claim the gate refused
        # called with (runner, messages, decision) after each reply (decision None) and each decision:
        # the session recorder saves the run there (keel.trace.sessions)
        self.on_step: Callable[[Runner, list[dict[str, Any]], Decision | None], None] | None = None
        self.tools = registry.schemas()  # computed once: byte-stable request prefix
        # called with the step number after each step that goes on; False stops the run as an
        # interrupt would (--step mode's "abort": keel.cli.repl.stepping). None: never pause
        self.after_step: Callable[[int], bool] | None = None

    def run(self, messages: list[dict[str, Any]]) -> RunResult:
        """Drive ``messages`` (appended to in place) until the decider says stop."""
        started, pushback, summary = self.clock(), None, ""
        self.state.tools = frozenset(self.registry.names)   # also after a resume restored the state
        self.ctx.run = RunView(self)   # the run, for tools that drive a model or the gate (keel.drive)
        self.ctx.before_change = self._baseline
        if self.limits.max_seconds is not None:  # a tool's own timeout (run_shell) never outlasts the run
            self.ctx.deadline = time.monotonic() + self.limits.max_seconds
        decision: Decision | None = None
        engine_error: str | None = None
        question: str | None = None
        # a reply turned down, sent again: sample the next one anew
        variety, variant = Variety(offered=self.state.tools), NORMAL
        try:
            while decision is None or not decision.stop:
                extra: list[dict[str, Any]] = [{"role": "user", "content": pushback}] if pushback else []
                if not self._make_room(messages, extra):
                    engine_error = self.context.overflow_message(messages + extra, self.tools) if self.context \
                        else "the request does not fit the context window"
                    decision = self._decide(TurnOutcome(engine_failure="context"), started)
                    break
                request = messages + extra if extra else messages
                try:
                    turn = self._complete(request, variant)
                except EngineError as e:
                    if e.kind == "context" and self._make_room(messages, extra, refused=True):
                        continue  # compacted: the same turn once more
                    if e.kind in ("config", "protocol"):
                        return self._result(messages, started, "error", f"{e.kind}_error", summary, e.message)
                    engine_error = e.message  # the server's own words go into the stop event
                    decision = self._decide(TurnOutcome(engine_failure=e.kind), started)  # type: ignore[arg-type]
                    break
                self.steps += 1
                self.usage.add(turn.usage)
                reuse = self.context.observe(request, self.tools, turn.usage, self.steps) if self.context else None
                self._emit_model_call(turn, reuse, variant)
                if turn.cut_reason == "repeating":
                    self._assisted("reply_watch", "a reply cut as repeating itself")
                messages.append(turn.to_message())
                self._saved(messages, None)
                outcome, finish_summary, (struck, invalid) = self._run_tools(turn, messages)
                summary = finish_summary or turn.content.strip() or summary
                decision = self._decide(outcome, started)
                if decision.reason == "needs_user":   # what a headless caller relays (--resume ID --answer)
                    question = (outcome.asked_user or turn.content).strip()
                    summary = question or summary
                pushback = decision.pushback
                why = turned_down(cut=outcome.truncated or bool(outcome.cut_reason), pushed_back=pushback is not None,
                                  struck=struck, invalid=invalid, progress=outcome.progress)
                if "variety" in self.assists:
                    called = called_tools((c.name for c in turn.tool_calls), turn.content, why, self.state.tools)
                    variant = variety.after_reply(fingerprint(turn.content, ((c.name, c.arguments)
                                                                             for c in turn.tool_calls)), why, called)
                    if variant.n:
                        self._assisted("variety", variant.why)
                self._saved(messages, decision)
                if self.after_step is not None and not decision.stop and not self.after_step(self.steps):
                    return self._result(messages, started, "incomplete", "interrupted", summary)
        except KeyboardInterrupt:
            return self._result(messages, started, "incomplete", "interrupted", summary)
        status = "complete" if decision.reason == "complete" else "incomplete"
        if status == "complete" and self._stood:   # the claim the review held is what was done
            summary = self.state.reviewed or summary
        result = self._result(messages, started, status, decision.reason, summary, engine_error)
        result.question = question
        return result

    def compact(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Fold ``messages`` now (the REPL's /compact): the compaction event, or None when unmanaged."""
        self.repeats = RepetitionGuard()
        if self.context is None:
            return None
        event = self.context.compact(messages, self.tools, self.state, step=self.steps)
        self.usage.add(self.context.take_summary_usage())
        return event

    def _complete(self, request: list[dict[str, Any]], variant: Variant) -> AssistantTurn:
        if variant.avoid:  # only then: an engine written without the keywords still serves normal runs
            return self.engine.complete(request, self.tools, self._on_delta, variant=variant.n, avoid=variant.avoid)
        if variant.n:
            return self.engine.complete(request, self.tools, self._on_delta, variant=variant.n)
        return self.engine.complete(request, self.tools, self._on_delta)

    def _make_room(self, messages: list[dict[str, Any]], extra: list[dict[str, Any]], refused: bool = False) -> bool:
        """Whether the next request may be sent, compacting first when needed (``refused``: the engine said
        the last one did not fit; compact and retry once). After a compaction repeats are forgotten: the
        model may rightly ask again for a result it can no longer see."""
        if self.context is None:
            return not refused
        folds = self.context.compactions
        if refused:
            ok = self.context.recover(messages, self.tools, self.state, self.steps)
        else:
            ok = self.context.fit(messages, extra, self.tools, self.state, self.steps)
        if self.context.compactions != folds:
            self.repeats = RepetitionGuard()
            self.usage.add(self.context.take_summary_usage())  # the summarising call is the run's cost too
        return ok

    # -- one turn's tools ----------------------------------------------------------------------
    def _run_tools(self, turn: AssistantTurn, messages: list[dict[str, Any]]
                   ) -> tuple[TurnOutcome, str | None, tuple[bool, bool]]:
        """Execute the turn's calls; returns what the decider needs, the finish summary, if any, and
        whether any call was struck as a repeat / was invalid (keel.loop.variety)."""
        calls = turn.tool_calls
        finished = asked = None
        progress = struck = invalid = False
        answered = 0
        try:  # an interrupt from here on (the baseline's checks too) answers every call: history stays valid
            cut = cut_short(turn)   # a cut call never runs: no baseline for it
            if cut is None and any(not self.registry.is_read_only(c) and c.name not in _ASK_FIRST for c in calls):
                self._baseline()   # a tool that may write without asking first: the baseline before it runs
            for call, result, skip in self._execute(calls, cut):
                self.state.record_tool_call()
                if isinstance(spent := result.meta.get("usage"), Usage):  # spent also when it repeated
                    self.usage.add(spent)   # a sub-agent's or change_file's model tokens are the run's
                repeat = skip.strikes if skip is not None else self._observe(call, result)
                struck, invalid = struck or bool(repeat), invalid or bool(result.meta.get("invalid"))
                if repeat:
                    self.state.repetition_strikes = max(self.state.repetition_strikes, repeat)
                elif call.name in UNGUARDED:   # finish: an identical one with nothing done between is no progress
                    new = self.repeats.finish_is_new(call.arguments, self.state.tool_calls_total - 1)
                    progress = progress or (new and not result.meta.get("invalid"))
                else:
                    progress = progress or not result.meta.get("invalid")
                if skip is None:
                    finished = result.finished if result.finished is not None else finished
                    asked = result.question if result.question is not None else asked
                text = result.output if not repeat or skip is not None else ran_again_text(call.name)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
                answered += 1
                self._emit_tool_call(call, result, repeat)
        except KeyboardInterrupt as interrupt:
            for i, call in enumerate(calls[answered:]):
                text = INTERRUPTED
                if i == 0:  # the call that was running: logged, with any output it had produced
                    partial = getattr(interrupt, "partial_output", None)
                    text += f"\nOutput before the interrupt:\n{partial}" if partial else ""
                    ran = float(getattr(interrupt, "elapsed_ms", 0.0))   # how long it ran (keel.tools.registry)
                    self._emit_tool_call(call, ToolResult(ok=False, output=text,
                                                          meta={"interrupted": True, "elapsed_ms": ran}), 0)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            raise
        malformed = not calls and looks_like_tool_call(turn.content, set(self.registry.names))
        planned = finished is not None or (not calls and bool(turn.content.strip()))  # plan mode: the plan
        outcome = TurnOutcome(text=turn.content, tool_calls=len(calls), progress=progress,
                              malformed_call=malformed, finished=finished is not None, summary=finished or "",
                              asked_user=asked,
                              plan_submitted=self.plan_mode and planned,
                              truncated=cut_short(turn) is not None, cut_reason=turn.cut_reason or "")
        return outcome, finished, (struck, invalid)

    def _execute(self, calls: list[ToolCall], cut: str | None = None
                 ) -> Iterator[tuple[ToolCall, ToolResult, Skip | None]]:
        """Run the calls the repetition guard lets through, in order, answering the others without
        running them. Decided call by call, after the calls before it ran, so a second
        `echo x >> f` in one reply or the next sees the first one's change."""
        if cut is not None:       # answered, never run: the model is told to send it again
            for call in calls:
                text = CUT_CALL.format(why=cut)
                yield call, ToolResult(ok=False, output=text, meta={"not_run": True, "invalid": True, "cut": True}), \
                    Skip(text, 0)
            return
        first_at: dict[str, int] = {}
        i = 0
        while i < len(calls):
            call = calls[i]
            if call.name in _WRITERS and self.state.request.answer_only:
                text = ANSWER_ONLY.format(why=self.state.request.why)
                yield call, ToolResult(ok=False, output=text, meta={"not_run": True, "invalid": True}), Skip(text, 0)
                i += 1
                continue
            key = canonical_call(call.name, call.arguments)
            skip = self.repeats.before(call.name, call.arguments, first_at.get(key))
            if skip is not None:
                yield call, ToolResult(ok=False, output=skip.text, meta={"not_run": True}), skip
                i += 1
                continue
            first_at.setdefault(key, i + 1)   # only a call that ran: a later copy is told it ran once
            # consecutive read-only calls with no duplicate among them still run together, in parallel
            j = i + 1
            while j < len(calls) and self.registry.is_read_only(calls[i]) and self.registry.is_read_only(calls[j]) \
                    and canonical_call(calls[j].name, calls[j].arguments) not in first_at \
                    and self.repeats.before(calls[j].name, calls[j].arguments, strike=False) is None:
                first_at[canonical_call(calls[j].name, calls[j].arguments)] = j + 1
                j += 1
            for ran, result in zip(calls[i:j], self.registry.run_calls(calls[i:j], self.ctx), strict=True):
                yield ran, result, None
            i = j

    def _observe(self, call: ToolCall, result: ToolResult) -> int:
        """Absorb a result that ran (it ran: its facts count) and tell the guard; the repeat count."""
        self._absorb(result)
        # run_shell's changes come from the workspace watch (keel.trace.shellwatch); keel's file tools
        # report their own; any other tool that may write (MCP, sub-agents) may have changed anything.
        shell = [c["path"] for c in result.meta.get("workspace_changes") or () if isinstance(c, dict) and "path" in c]
        changed = list(dict.fromkeys([*result.files_changed, *shell]))
        unknown = not self.registry.is_read_only(call) and call.name not in _REPORTS_CHANGES
        return self.repeats.observe(call.name, call.arguments, result.output, changed,
                                    maybe_changed=unknown and not result.meta.get("invalid"),
                                    again=bool(result.meta.get("again")))

    def _absorb(self, result: ToolResult) -> None:
        """Move the facts a tool reported into the task state the decider reads."""
        for path in result.files_changed:
            self.state.record_file_change(path)
        if (check := result.check) is not None and check.kind:
            self.state.record_check(check.command, check.exit_code, check.kind, tests_ran=check.tests_ran,
                                    deselected=check.deselected, whole_suite=check.whole_suite)
        if result.todos is not None:
            self.state.set_todos([Todo(t["content"], t["status"]) for t in result.todos])  # type: ignore[arg-type]

    # -- decisions -----------------------------------------------------------------------------
    def _decide(self, outcome: TurnOutcome, started: float) -> Decision:
        used = lim.Consumed(steps=self.steps, elapsed_s=self.clock() - started, tokens=self.usage.total,
                         cost_usd=self.cost_usd())
        decision = decide(outcome, self.state, self.limits, used, attended=self.attended,
                          plan_mode=self.plan_mode)
        if decision.verdict == "verify" and self.verifier is not None:
            facts = self._verify(self.verifier, outcome.summary or outcome.text)
            outcome = dataclasses.replace(outcome, verification=facts)
            decision = decide(outcome, self.state, self.limits, used, attended=self.attended,
                              plan_mode=self.plan_mode)
            if decision.pushback is not None:
                self.state.repair_rounds.update(facts.round_keys)
        limit, self._stood = decision, False
        # at a limit, the claim the review held: the gate judges the files once more (unchanged since, its
        # checks come from the verifier's cache by digest)
        if decision.stop and decision.reason.startswith("limit:") and self.state.reviewed is not None and \
                self.verifier is not None and self._verify(self.verifier, self.state.reviewed).status == "passed":
            decision = decide(dataclasses.replace(outcome, claim_stands=True), self.state, self.limits, used,
                              attended=self.attended, plan_mode=self.plan_mode)
            self._stood = decision.reason == "complete"
        if decision.reason == "complete" and self.on_stop is not None and \
                (objection := self.on_stop(outcome.text)) is not None:  # a Stop hook may only say "not yet"
            # a claim standing at a limit: not yet, and no time left, so the limit stands
            decision = limit if self._stood else Decision("continue", "stop_hook", objection)
            self._stood = False
        if decision.pushback_kind == "verification_failed" and outcome.verification is not None:
            decision = self._repaired(decision, outcome.verification.digest)
        self.state.idle_turns = 0 if outcome.progress else self.state.idle_turns + 1
        if decision.pushback is not None:
            self.state.pushback_counts[decision.reason] += 1
            self.state.pushback_streak = 0 if outcome.progress else self.state.pushback_streak + 1
        elif outcome.progress:
            self.state.pushback_streak = 0
        self.bus.emit("decision", step=self.steps, verdict=decision.verdict, reason=decision.reason,
                      pushback_kind=decision.pushback_kind, pushback=decision.pushback)
        if decision.pushback_kind == "contract_review" and outcome.verification is not None:
            self._assisted("contract_review", "the comments the task points at, asked to be checked")
            self.state.reviewed = outcome.summary or outcome.text   # the claim stands if a limit comes first
        return decision

    def _verify(self, verifier: Verifier, claim: str) -> GateFacts:
        """The gate on ``claim`` and the files as they are, with its events."""
        self.bus.emit("checks_start", step=self.steps, phase="verify",
                      commands=[c.command for c in verifier.plan.ordered()])
        began = time.monotonic()
        facts = verifier.verify(claim)
        self.bus.emit("verification", step=self.steps, **facts.to_json(),
                      elapsed_s=round(time.monotonic() - began, 3))
        return facts

    def _repaired(self, decision: Decision, digest: str) -> Decision:
        """A claim refused again with nothing changed since the last refused one: keel asks for the change
        itself (keel.loop.repair, the claim_repair assist) and the pushback carries what came of it."""
        again, self._refused = digest == self._refused, digest
        if not again or "claim_repair" not in self.assists or (done := repair(
                self.registry, self.ctx, self.state.files_changed, self.state.task, self.steps)) is None:
            return decision
        result, words = done
        self._absorb(result)
        if isinstance(spent := result.meta.get("usage"), Usage):
            self.usage.add(spent)
        return dataclasses.replace(decision, pushback=f"{decision.pushback}\n\n{words}")

    def _baseline(self) -> bool:
        """Which checks fail before anything changes, run once, just before the first change (after
        the person approved it), with events of its own: its time is no tool's. True when checks ran
        (they may have written to the workspace: caches, reports)."""
        v = self.verifier
        if v is None or v.baseline is not None or v.plan.empty or v.request.answer_only:
            return False   # an answer-only request runs no check (docs/verification.md)
        self.bus.emit("checks_start", step=self.steps, phase="baseline", commands=v.baseline_commands())
        began = time.monotonic()
        try:
            results = v.ensure_baseline()
        finally:
            self.ctx.waited_s += time.monotonic() - began
        self.bus.emit("checks_before", step=self.steps, results=[o.to_json() for o in results],
                      elapsed_s=round(time.monotonic() - began, 3))
        return True

    def _assisted(self, name: str, detail: str) -> None:
        self.bus.emit("assist", step=self.steps, name=name, detail=detail[:300])

    def _saved(self, messages: list[dict[str, Any]], decision: Decision | None) -> None:
        if self.on_step is not None:
            self.on_step(self, messages, decision)

    def cost_usd(self) -> float:
        """What the run's usage has cost so far, at its prices."""
        u = self.usage
        return self.prices.cost(u.prompt_tokens, u.cached_tokens, u.completion_tokens)

    # -- events --------------------------------------------------------------------------------
    def _on_delta(self, delta: StreamDelta) -> None:   # "prompt": how far the engine has read, "read/total"
        self.bus.emit("assistant_delta", step=self.steps + 1, kind=delta.kind, text=delta.text)

    def _emit_model_call(self, turn: AssistantTurn, prefix_reuse: float | None = None,
                         variant: Variant = NORMAL) -> None:
        u = turn.usage
        temperature = getattr(self.engine, "temperature", None)   # None: an engine without sampling settings
        varied = variant_json(variant, float(temperature) if isinstance(temperature, int | float) else None,
                              getattr(self.engine, "seed", None))
        self.bus.emit("model_call", step=self.steps, model=self.engine.model, latency_s=round(turn.latency_s, 4),
                      prefix_reuse=None if prefix_reuse is None else round(prefix_reuse, 4),
                      usage=u.to_json(),
                      finish_reason=turn.finish_reason, cut_reason=turn.cut_reason, tool_calls=len(turn.tool_calls),
                      tool_call_format=turn.tool_call_format, retries=turn.retries,
                      content=turn.content[:2000], reasoning=turn.reasoning[:2000],
                      # whole, so `keel replay` can re-serve this turn exactly (content past 2000 too)
                      replay={"content": turn.content if len(turn.content) > 2000 else None,
                              "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                        for c in turn.tool_calls]},
                      **({"variant": varied} if varied else {}))   # a variant request only (keel.loop.variety)

    def _emit_tool_call(self, call: ToolCall, result: ToolResult, repeat: int) -> None:
        self.bus.emit("tool_call", step=self.steps, call_id=call.id, name=call.name,
                      arguments=call.arguments[:4000], ok=result.ok and not repeat, repeat=repeat,
                      not_run=bool(result.meta.get("not_run")),
                      invalid=bool(result.meta.get("invalid")),
                      result_preview=result.output[:300], output_lines=result.output.count("\n") + 1,
                      output_bytes=len(result.output.encode("utf-8", "replace")), files_changed=result.files_changed,
                      elapsed_ms=round(result.meta.get("elapsed_ms", 0.0), 2),
                      **({"diff": result.meta["diff"]} if result.meta.get("diff") else {}))  # keel.tools.diffs

    def _result(self, messages: list[dict[str, Any]], started: float, status: str, reason: str,
                summary: str, error: str | None = None) -> RunResult:
        result = RunResult(status=status, stop_reason=reason, summary=summary, steps=self.steps,  # type: ignore[arg-type]
                           usage=self.usage, cost_usd=self.cost_usd(), duration_s=self.clock() - started,
                           files_changed=list(self.state.files_changed), session_id=self.bus.session_id,
                           error=error, messages=messages, cost_known=self.prices.known,
                           request=self.state.request.to_json() if self.state.task.strip() else None)
        if self.verifier is not None and status != "error":  # a configuration error changed nothing
            last = self.verifier.last
            result.verification = last.to_json() if last is not None else {"status": "not_run"}
            result.changes = self.verifier.change_report()
            self.bus.emit("changes", step=self.steps, **result.changes)
        self.bus.emit("stop", step=self.steps, status=status, reason=reason, error=error,
                      summary=summary[:2000], usage=result.to_json()["usage"], cost_usd=result.to_json()["cost_usd"])
        return result
