"""The context manager: the runner's collaborator that keeps every request inside the window.

Before each request ``fit`` estimates its tokens; past the trigger (``[context] compact_at`` of the
window, never above the window minus the reply cap) it compacts the history in place, and a request
still estimated over the window minus the reply cap is never sent (the run stops with
``limit:context``). After each reply ``observe`` measures prefix reuse against the previous request,
calibrates the token count with the engine's ``prompt_tokens`` and reports a ``cache_break`` with its
cause. ``recover`` handles an engine's context-length error: the window it implies is learnt, the
history is compacted, and the request is retried once. ``compact`` is also the library's explicit call.

Planning and the record are pure (keel.context.compaction, keel.context.record); this module does the
I/O around them: one summarising model call (falling back to keel's own record when it fails),
reading modified files for their current content, and the events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.config import ContextSettings
from keel.context import budget as bud
from keel.context.compaction import (
    Fold,
    apply_fold,
    choose_fold,
    pairing_problems,
    shrink_for_summary,
    stable_prefix_len,
)
from keel.context.prefix import RequestShape, compare
from keel.context.record import SUMMARY_INSTRUCTION, Facts, build_record, edited_paths
from keel.context.tokens import MessageTexts, TokenCounter, serialize
from keel.context.window import Window
from keel.core.events import EventBus
from keel.engine.types import Engine, EngineError, Usage

if TYPE_CHECKING:
    from keel.core.state import TaskState

RECORD_SHARE = 0.15        # of the window: the most the record may take
MIN_ROOM = 256             # tokens kept for the newest messages however full the prefix is
FILE_CONTENT_BYTES = 64_000
LEARNT_WINDOW_MARGIN = 0.9  # after a context-length error: the failed request's size, less this margin


class ContextManager:
    def __init__(self, bus: EventBus, window: Window, *, reply_cap: int, settings: ContextSettings | None = None,
                 summarizer: Engine | None = None, workspace: Path | None = None,
                 acceptance: Sequence[str] = ()) -> None:
        self.bus, self.window, self.reply_cap = bus, window, reply_cap
        self.settings = settings or ContextSettings()
        self.summarizer, self.workspace, self.acceptance = summarizer, workspace, tuple(acceptance)
        self.prompt_limit = window.tokens - reply_cap   # no request estimated above this is sent
        self.counter, self.texts = TokenCounter(), MessageTexts()
        self.compactions = self.failures = 0
        self.shared_chars = self.base_chars = 0          # prefix reuse over the session
        self.summary_usage = Usage()                      # tokens the summarising calls used
        self._prev: RequestShape | None = None
        self._compacted = self._retried = self._announced = False
        self._ephemeral = 0
        self._last_estimate = 0
        # the one read decision (keel.policy.reads.shows): a file it keeps back is named, never quoted
        self.may_read: Callable[[Path], bool] | None = None

    @property
    def trigger(self) -> int:
        return min(int(self.settings.compact_at * self.window.tokens), self.prompt_limit)

    @property
    def target(self) -> int:
        return min(int(self.settings.compact_to * self.window.tokens), self.prompt_limit)

    def estimate(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> int:
        return self.counter.count(self.texts.texts(messages), serialize(tools))

    # -- the runner's calls --------------------------------------------------------------------
    def overflow_message(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> str:
        """Why the next request cannot be sent, with the numbers a user needs to choose a bigger window."""
        return (f"the request does not fit the context window, even after compaction: about "
                f"{self.estimate(messages, tools)} tokens against {self.prompt_limit} usable "
                f"({self.window.tokens}-token window from {self.window.source}, {self.reply_cap} kept for the "
                "reply); give the model's real window with --context-window N or [engine] context_window")

    def fit(self, messages: list[dict[str, Any]], extra: list[dict[str, Any]], tools: list[dict[str, Any]],
            state: TaskState | None = None, step: int = 0) -> bool:
        """Make ``messages + extra`` fit before it is sent (compacting ``messages`` in place if needed).
        False: it cannot be sent (over the window, or compaction keeps failing)."""
        if not self._announced:
            self._announced = True
            self.bus.emit("context_window", tokens=self.window.tokens, source=self.window.source,
                          reply_cap=self.reply_cap, trigger=self.trigger, prompt_limit=self.prompt_limit)
        self._ephemeral = len(extra)
        estimate = self.estimate(messages + extra, tools)
        if estimate > self.trigger:
            if self.failures >= self.settings.max_failed_compactions:
                self.bus.emit("compaction", step=step, trigger="circuit_breaker", ok=False, tokens_before=estimate,
                              tokens_after=estimate, error=f"{self.failures} compactions in a row did not get "
                                                           "the history under the trigger; stopping")
                return False
            self.compact(messages, tools, state, trigger="threshold" if estimate <= self.prompt_limit
                         else "over_window", step=step, extra=extra)
            estimate = self.estimate(messages + extra, tools)
        self._last_estimate = estimate
        return estimate <= self.prompt_limit

    def observe(self, request: Sequence[dict[str, Any]], tools: list[dict[str, Any]], usage: Usage,
                step: int = 0) -> float | None:
        """After a reply: prefix reuse of ``request`` (0..1; None for the first), calibration, and a
        cache_break event when the previous request was not repeated whole for a reason keel controls."""
        shape = RequestShape(serialize(tools), tuple(self.texts.texts(request)), self._ephemeral)
        report = compare(self._prev, shape, compacted=self._compacted)
        if not usage.estimated:
            self.counter.calibrate(shape.total_chars, usage.prompt_tokens)
        if report.cache_break:
            self.bus.emit("cache_break", step=step, index=report.diverged_at, cause=report.cause,
                          prefix_reuse=round(report.reuse or 0.0, 4), shared_chars=report.shared_chars,
                          previous_chars=report.base_chars)
        self.shared_chars += report.shared_chars
        self.base_chars += report.base_chars
        self._prev, self._compacted, self._retried = shape, False, False
        return report.reuse

    def recover(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: TaskState | None = None,
                step: int = 0) -> bool:
        """The engine said the last request did not fit: learn the smaller window, compact, retry once."""
        if self._retried:
            return False
        self._retried = True
        if self._last_estimate > 0:
            self.prompt_limit = min(self.prompt_limit, int(self._last_estimate * LEARNT_WINDOW_MARGIN))
        self.compact(messages, tools, state, trigger="context_error", step=step)
        return True

    # -- compaction ----------------------------------------------------------------------------
    def compact(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: TaskState | None = None,
                *, trigger: str = "requested", step: int = 0, extra: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """Fold the history in place; returns the ``compaction`` event."""
        texts = self.texts.texts(messages)
        tools_text = serialize(tools)
        sizes = [self.counter.count_chars(len(t)) for t in texts]
        before = self.counter.count(texts, tools_text) + sum(self.counter.count_chars(len(serialize(m))) for m in extra)
        prefix = stable_prefix_len(messages)
        tools_tokens = self.counter.count_chars(len(tools_text))
        record_tokens = int(RECORD_SHARE * self.window.tokens)
        fixed = tools_tokens + sum(sizes[:prefix]) + sum(self.counter.count_chars(len(serialize(m))) for m in extra)
        room = max(MIN_ROOM, self.target - fixed - record_tokens)
        usage = bud.account(messages, sizes, prefix, tools_tokens)
        over = bud.over_share(usage, self.settings.budget, self.window.tokens)
        hard_room = max(MIN_ROOM, self.trigger - fixed - record_tokens)
        plan = choose_fold(messages, sizes, keep_last=self.settings.keep_last, room=room, over_share=over,
                               hard_room=hard_room)
        summary, summary_error, spent = None, None, self.summary_usage.total  # this compaction's share
        if self.settings.summarizer == "model" and self.summarizer is not None and plan.fold_end > plan.prefix_len:
            summary, summary_error = self._summarize(messages, sizes, tools, tools_tokens)
        chars_per_token = 4 / self.counter.ratio
        record_chars = int(record_tokens * chars_per_token)
        file_chars = min(record_chars // 2, int(self.settings.budget.file_reads * self.window.tokens * chars_per_token))
        facts = self._facts(messages, state)

        def record_for(p: Fold) -> str:
            return build_record(messages, p, facts, summary, number=self.compactions + 1, max_chars=record_chars,
                                file_chars=file_chars)

        record = record_for(plan)
        spare = record_tokens - self.counter.count_chars(len(serialize({"role": "user", "content": record})))
        if spare > 0 and (plan.cut or plan.fold_end > plan.prefix_len + 1):  # the record came out smaller
            better = choose_fold(messages, sizes, keep_last=self.settings.keep_last, room=room + spare,
                                     over_share=over, hard_room=hard_room + spare)
            if better != plan:
                plan, record = better, record_for(better)
        new = apply_fold(messages, plan, record)
        problems = pairing_problems(new)
        folded = [messages[i] for i in plan.folded]
        changed = bool(folded) or bool(plan.stubbed) or bool(plan.cut) or bool(plan.args_cut)
        if not problems and changed:  # a record that folds nothing would only add to the history
            messages[:] = new
        after = self.estimate(messages, tools) + (before - self.counter.count(texts, tools_text))
        ok = not problems and changed and after <= self.trigger
        self.failures = 0 if ok else self.failures + 1
        self.compactions += 1
        self._compacted = True
        return self.bus.emit(
            "compaction", step=step, trigger=trigger, ok=ok, tokens_before=before, tokens_after=after,
            folded={"messages": len(folded), "tool_outputs": sum(1 for m in folded if m.get("role") == "tool"),
                    "stubbed": len(plan.stubbed), "cut": len(plan.cut) + len(plan.args_cut)},
            components=usage, summarizer="model" if summary else "deterministic", summary_error=summary_error,
            summary_tokens=self.summary_usage.total - spent,
            error="; ".join(problems) or (None if changed else "nothing left to fold"), record=record)

    def _summarize(self, messages: list[dict[str, Any]], sizes: list[int], tools: list[dict[str, Any]],
                   tools_tokens: int) -> tuple[str | None, str | None]:
        """One request: the history as it stands (its prefix is in the engine's cache) plus an instruction.
        Returns (summary, None) or (None, why it failed)."""
        instruction = {"role": "user", "content": SUMMARY_INSTRUCTION}
        room = self.prompt_limit - tools_tokens - self.counter.count_chars(len(serialize(instruction)))
        request = [*shrink_for_summary(messages, sizes, room), instruction]
        if self.estimate(request, tools) > self.prompt_limit:  # this request, too, must fit the window
            return None, "the history does not fit a summary request even with its outputs folded"
        assert self.summarizer is not None
        try:
            turn = self.summarizer.complete(request, tools)
        except EngineError as e:
            return None, f"{e.kind}: {e.message}"
        self.summary_usage.add(turn.usage)
        if not turn.content.strip():
            return None, "the model called a tool instead of writing the summary" if turn.tool_calls else \
                "the model's summary was empty"
        return turn.content.strip(), None

    def _facts(self, messages: Sequence[dict[str, Any]], state: TaskState | None) -> Facts:
        task = state.task if state is not None and state.task else ""
        if not task:
            first_user = next((m for m in messages if m.get("role") == "user"), None)
            task = str(first_user.get("content") or "") if first_user else ""
        changed = list(state.files_changed) if state is not None else []
        paths = list(dict.fromkeys([*changed, *edited_paths(messages)]))
        return Facts(task=task, acceptance=self.acceptance, files_changed=tuple(changed),
                     todos=tuple((t.content, t.status) for t in state.todos) if state is not None else (),
                     checks=tuple((c.command, c.exit_code, c.kind) for c in state.checks) if state is not None else (),
                     contents=self._contents(paths))

    def _contents(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Current text of modified files (None: the file is gone). Secret-looking, large, binary or
        unreadable files are left out, so the record points at them instead of quoting them."""
        out: dict[str, str | None] = {}
        if self.workspace is None:
            return out
        from keel.policy.beneath import anchor, read_beneath_stat
        from keel.policy.paths import PathJailError, resolve_in_workspace
        from keel.policy.reads import shows

        may_read = self.may_read or shows(None)
        for path in paths:
            try:
                real = resolve_in_workspace(self.workspace, path)
                if not real.exists():
                    out[path] = None
                elif may_read(real) and real.is_file():
                    data, st = read_beneath_stat(*anchor(real), limit=FILE_CONTENT_BYTES + 1)   # no link followed
                    if st.st_size <= FILE_CONTENT_BYTES:
                        out[path] = data.decode("utf-8")
            except (PathJailError, OSError, UnicodeDecodeError):
                continue
        return out

    def take_summary_usage(self) -> Usage:
        """Tokens the summarising calls used since the last take: the runner adds them to the run's usage,
        so token limits and cost count them."""
        spent, self.summary_usage = self.summary_usage, Usage()
        return spent

    @property
    def prefix_reuse(self) -> float:
        """Over the session so far: characters repeated from each previous request / their characters."""
        return self.shared_chars / self.base_chars if self.base_chars else 0.0


def build_context_manager(config: Any, engine: Any, bus: EventBus, workspace: Path | None = None) -> ContextManager:
    """From a keel Config and an engine: the window (config, the engine's own, the server's word, the
    default) and the reply cap, which is ``[engine] max_tokens`` but at most a quarter of the window
    (a 4096-token reply cap would leave an 8k model half its window); a lowered cap is set on the
    engine too, so the server is never asked for more than keel planned room for."""
    from keel.context.window import resolve_window
    from keel.engine.keys import resolve_api_key

    inner = getattr(engine, "inner", engine)  # a GuardedEngine's wrapped engine holds the settings
    own = getattr(inner, "context_window", None)
    if config.engine.context_window is None and isinstance(own, int) and own > 0:
        window = Window(own, "engine")
    else:
        key = resolve_api_key(config)
        window = resolve_window(config.engine.context_window, getattr(inner, "base_url", None), config.engine.model,
                                {"Authorization": f"Bearer {key}"} if key else None)
    cap = getattr(inner, "max_tokens", None)
    reply_cap = min(cap if isinstance(cap, int) and cap > 0 else window.tokens // 4, window.tokens // 4)
    if isinstance(cap, int) and cap > reply_cap:
        inner.max_tokens = reply_cap
    return ContextManager(bus, window, reply_cap=reply_cap, settings=config.context, summarizer=engine,
                          workspace=workspace, acceptance=config.verify.accept)
