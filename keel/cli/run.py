"""`keel run`: read the task and flags, build the configuration and the agent, run, print the result.

Each step is its own function; a usage or configuration problem is a string that ``run_task`` turns
into exit 2 (with a result object in the JSON output formats).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from keel.config import Config
    from keel.core.events import EventSink
    from keel.loop.result import RunResult
    from keel.trace.sessions import SavedSession

EXIT_USAGE = 2


class _Problem(Exception):
    """A usage or configuration error, said once by ``run_task``."""


@dataclass
class _Inputs:
    saved: SavedSession | None
    plan: Any
    answer: Any
    task: str
    workspace: Path


def run_task(args: argparse.Namespace) -> int:
    try:
        inputs = _read_inputs(args)
        config, prices_known = _load_config(args, inputs.workspace)
        result = _run(args, inputs, config, _sinks(args, prices_known))
    except _Problem as problem:
        return _fail(args, str(problem))
    result.cost_known = prices_known
    return _report(args, result)


def _fail(args: argparse.Namespace, message: str) -> int:
    """A usage or configuration error: say it; json front ends still get a result object."""
    from keel.cli.render import print_json, result_object
    from keel.loop.result import RunResult

    print(f"keel: {message}", file=sys.stderr)
    if args.output_format != "text":
        error = RunResult(status="error", stop_reason="config_error", error=message)
        print_json(result_object(error, args.output_format))
    return EXIT_USAGE


def _check(problem: str | None) -> None:
    if problem:
        raise _Problem(problem)


def _read_inputs(args: argparse.Namespace) -> _Inputs:
    """The session to resume (if any), the approved plan, the answer, the task and the workspace."""
    from keel.cli.answer import prepare_answer
    from keel.cli.guard import check_workspace, log_path_problem, read_task
    from keel.cli.plan import plan_problem, read_plan
    from keel.trace.sessions import resume_target

    saved, problem = resume_target(args.resume, args.continue_session, args.cwd, args.task or args.task_file)
    _check(problem)
    plan, problem = read_plan(args, saved.dir if saved else None)
    _check(plan_problem(args, saved, plan) or problem)
    answer, problem = prepare_answer(args, saved, sys.stdin)  # --answer: the reply to a needs_user stop
    _check(problem)
    if saved is not None and answer is None:   # a plain resume keeps the stopped run's limits and policy
        from keel.cli.carry_on import inherit_for_resume
        _check(inherit_for_resume(args, saved))
    task, problem = (saved.task, None) if saved else read_task(args.task, args.task_file, sys.stdin)
    _check(problem)
    if saved:  # the session's own workspace, log and model
        args.cwd, args.log, args.model = saved.workspace, saved.log_path, args.model or saved.data.get("model")
    workspace, problem = check_workspace(args.cwd, args.allow_any_cwd)
    _check(problem)
    if args.log is not None:
        _check(log_path_problem(args.log))
    if args.accept and not all(a.strip() for a in args.accept):
        raise _Problem("--accept needs a command; one was empty (an unset shell variable?)")
    assert task is not None and workspace is not None
    return _Inputs(saved, plan, answer, task, workspace)


def _load_config(args: argparse.Namespace, workspace: Path) -> tuple[Config, bool]:
    """The configuration with the flags on top, and whether prices are known; warnings printed."""
    from keel.cli.local_default import choose_default_engine
    from keel.config import ConfigError, load_config
    from keel.policy.tier import approval_problem, unconfined_warning

    flags = {
        "engine": {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                   "local_model": local_flag(args.local), "context_window": args.context_window},
        "limits": {"max_steps": args.max_steps, "max_seconds": args.max_seconds,
                   "max_tokens": args.max_tokens, "budget_usd": args.budget_usd},
        "permissions": {"approval": args.approval},
        "verify": {"mode": args.verify},
    }
    if getattr(args, "assists", None):   # --assists: the [assists] switches for this run
        from keel.core.assists import parse_switches
        try:
            flags["assists"] = parse_switches(args.assists)
        except ValueError as e:
            raise _Problem(f"--assists: {e}") from None
    try:
        config, warnings = load_config(workspace, flags=flags)
    except ConfigError as e:
        raise _Problem(f"configuration error: {e}") from None
    if note := choose_default_engine(config):   # nothing names an engine: the embedded default, said first
        print(note, file=sys.stderr, flush=True)
    if args.accept:
        config.verify.add_accept(args.accept)
    prices_known = config.prices.known
    if config.limits.budget_usd is not None and not prices_known:
        warnings.append("the cost budget cannot be enforced: no prices are configured ([prices] "
                        "input_per_m / output_per_m in ~/.config/keel/config.toml), so cost is unknown")
    _check(approval_problem(config))
    if args.output_format != "text" and (tier_warning := unconfined_warning(config)):
        warnings.append(tier_warning)  # no start line is shown: say once if nothing confines commands
    for w in warnings:
        print(f"keel: warning: {w}", file=sys.stderr)
    return config, prices_known


def _sinks(args: argparse.Namespace, prices_known: bool) -> list[EventSink]:
    from keel.cli.render import JsonLinesRenderer, TextRenderer

    if args.output_format == "text":
        return [TextRenderer(prices_known=prices_known, verbose=args.verbose)]
    if args.output_format == "stream-json":
        return [JsonLinesRenderer()]
    return []


def _run(args: argparse.Namespace, inputs: _Inputs, config: Config, sinks: list[EventSink]) -> RunResult:
    """Build the agent and carry the task (or the resumed session) to a stop."""
    from keel.agent import Agent
    from keel.cli.local_default import loading
    from keel.engine.types import EngineError
    from keel.loop.result import RunResult
    from keel.policy.rules import RuleError

    if config.permissions.approval == "interactive" and not sys.stdin.isatty():
        raise _Problem("--approval interactive needs a terminal on stdin")
    prompt, ask_user = terminal_prompts(config.permissions.approval)
    if args.step and not sys.stdin.isatty():
        raise _Problem("--step needs a terminal on stdin")
    agent = None
    try:
        with loading(config, show=args.output_format == "text"):
            agent = Agent(workspace=inputs.workspace, config=config, sinks=sinks, log_path=args.log, prompt=prompt,
                          ask_user=ask_user, session_id=inputs.saved.id if inputs.saved else None,
                          plan_mode=args.plan, attended=args.attended)
        if args.step:  # keel.cli.repl.stepping: the runner asks it after each step
            from keel.cli.prompt import terminal_prompt
            from keel.cli.repl.stepping import StepPauser
            agent.after_step = StepPauser(terminal_prompt)
        for w in agent.ext.warnings:  # untrusted project hooks / MCP servers, skills or plugins left out
            print(f"keel: warning: {w}", file=sys.stderr)
        from keel.cli.keys import watching
        with watching(sys.stdin.fileno()) if sys.stdin.isatty() else contextlib.nullcontext():
            result = _carry(agent, inputs)   # in a terminal: keys typed are not echoed, Esc stops the run
        agent.close()
    except KeyboardInterrupt:  # a stop signal outside the loop (start hooks, first checks): still a result
        from keel.cli.signals import interrupted_outside_loop
        result = interrupted_outside_loop(agent)
    except EngineError as e:  # configuration problems found before the first call
        result = RunResult(status="error", stop_reason="config_error", error=e.message)
        if args.output_format == "text":
            print(f"keel: {e.message}", file=sys.stderr)
    except RuleError as e:
        raise _Problem(f"configuration error: {e}") from None
    except OSError as e:  # the default log location ($KEEL_HOME) cannot be written
        raise _Problem(f"cannot write the event log: {e}") from None
    return result


def _carry(agent: Any, inputs: _Inputs) -> RunResult:
    """A new run, or a saved session continued: with its approved plan, its answer, or as it was."""
    saved, plan, answer = inputs.saved, inputs.plan, inputs.answer
    if saved and plan is not None:
        from keel.cli.plan import approve_and_continue
        return approve_and_continue(agent, saved, plan)
    if saved and answer is not None:
        from keel.cli.answer import answer_and_continue
        return answer_and_continue(agent, saved, answer)
    if saved:
        return agent.resume(saved)   # carried on from its last saved step
    result: RunResult = agent.run(inputs.task, approved_plan=plan)
    return result


def _report(args: argparse.Namespace, result: RunResult) -> int:
    from keel.cli.answer import answer_hint
    from keel.cli.plan import approval_hint
    from keel.cli.render import print_json, result_object

    if args.output_format == "text" and (hint := approval_hint(result) or answer_hint(result)):
        print(f"keel: {hint}", file=sys.stderr)
    if args.output_format == "text" and result.stop_reason == "resume_failed":
        print(f"keel: {result.summary}", file=sys.stderr)  # the engine's error was shown with the stop line
    if args.output_format == "text" and result.handoff:  # a limit stop: where to pick the task up
        print(f"handoff note: {result.handoff}", flush=True)
    if args.output_format == "text":
        from keel.cli.carry_on import carry_on_hint
        if hint := carry_on_hint(result, vars(args)):   # an interrupt or a limit: how to go on
            print(f"keel: {hint}", file=sys.stderr)
    if args.output_format != "text":
        print_json(result_object(result, args.output_format))
        args.result_printed = True  # a signal from here on must not print a second result
    return result.exit_code


def terminal_prompts(approval: str | None) -> tuple[Any, Any]:
    """(the approver's prompt, the ask_user answerer): interactive puts both to the terminal;
    auto-edit puts only ask-class commands to it, when there is one (else they are refused)."""
    from keel.cli.prompt import terminal_prompt

    if approval == "interactive":
        return terminal_prompt, terminal_prompt
    if approval == "auto-edit" and sys.stdin.isatty():
        return terminal_prompt, None
    return None, None


def local_flag(value: str | None) -> str | None:
    """--local without MODEL means the documented default model."""
    if value is None:
        return None
    from keel.engine.local_model import DEFAULT_LOCAL_MODEL

    return value or DEFAULT_LOCAL_MODEL
