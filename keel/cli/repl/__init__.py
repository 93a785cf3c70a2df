"""`keel` with no command: the interactive terminal (docs/repl.md).

input.py reads what the person types, render.py shows the event stream, commands.py holds the
slash commands, session.py carries the conversation, stepping.py is --step mode's pause.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from keel.cli.usage import add_engine_flags

if TYPE_CHECKING:
    from keel.cli.repl.session import ReplSession

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    from keel.cli.guard import positive_float, positive_int

    p = argparse.ArgumentParser(prog="keel [repl]", description="keel's interactive terminal: type a task, watch it "
                                "run, answer its questions and approvals. /help inside lists the slash commands. "
                                "`keel run TASK` runs one task headless; `keel --help` lists every command.")
    p.add_argument("--cwd", default=".", help="the workspace (default: current directory)")
    p.add_argument("--allow-any-cwd", action="store_true",
                   help="accept a system directory, $HOME or one of its ancestors as the workspace")
    add_engine_flags(p)
    p.add_argument("--context-window", type=positive_int, metavar="N", help="the model's context window in tokens")
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="model calls per task (default 50)")
    p.add_argument("--max-seconds", type=positive_float, metavar="S", help="wall clock per task")
    p.add_argument("--budget-usd", type=positive_float, metavar="X", help="cost per task (needs [prices])")
    p.add_argument("--approval", choices=["interactive", "auto-edit", "full-auto", "unattended"],
                   help="interactive (default here): edits and ask-class commands are put to you; auto-edit: "
                        "edits proceed, ask-class commands are still put to you (before, auto-edit ran them: "
                        "that is now full-auto); full-auto: they run unasked, allowed only under a confining OS "
                        "sandbox (bubblewrap or Landlock); unattended: ask-class commands are refused")
    p.add_argument("--verify", choices=["auto", "off"], help="auto (default): completion claims run the checks")
    p.add_argument("--step", action="store_true",
                   help="pause after each step: continue / abort / stop stepping")
    return p


def start_line(session: ReplSession, workspace: Path) -> str:
    """`keel · MODEL · WORKSPACE · sandbox: TIER · /help …`: the tier named as `keel run` names it."""
    from keel.policy.tier import sandbox_tier

    agent = session.agent
    tier, confining = sandbox_tier(agent.config)
    sandbox = f"sandbox: {tier}" + ("" if confining else " (commands NOT confined: keel doctor)")
    return f"keel · {agent.engine.model} · {workspace} · {sandbox} · /help for commands, Ctrl-D to exit"


def repl_main(argv: list[str]) -> int:
    from rich.console import Console

    from keel.cli.guard import check_workspace
    from keel.config import ConfigError, load_config
    from keel.engine.types import EngineError
    from keel.policy.rules import RuleError

    args = _parser().parse_args(argv)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("keel: the interactive terminal needs a terminal on stdin and stdout; "
              "use `keel run TASK` for a headless run", file=sys.stderr)
        return EXIT_USAGE
    workspace, problem = check_workspace(args.cwd, args.allow_any_cwd)
    if problem:
        print(f"keel: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from keel.cli.run import local_flag

    flags = {"engine": {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                        "local_model": local_flag(args.local), "context_window": args.context_window},
             "limits": {"max_steps": args.max_steps, "max_seconds": args.max_seconds, "budget_usd": args.budget_usd},
             "permissions": {"approval": args.approval}, "verify": {"mode": args.verify}}
    try:
        config, warnings = load_config(workspace, flags=flags)
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from keel.policy.tier import approval_problem
    if problem := approval_problem(config):
        print(f"keel: {problem}", file=sys.stderr)
        return EXIT_USAGE
    console = Console(highlight=False)
    for w in warnings:
        console.print(f"keel: warning: {w}", style="yellow", markup=False)
    from keel.cli.repl.session import ReplSession

    try:
        session = ReplSession(workspace, config, console, step=args.step)
    except (EngineError, RuleError) as e:
        print(f"keel: {getattr(e, 'message', e)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"keel: cannot write the event log: {e}", file=sys.stderr)
        return EXIT_USAGE
    console.print(start_line(session, workspace), style="bold", markup=False)
    contact = getattr(session.agent.engine, "first_contact", None)   # an engine that cannot answer: say so now,
    if contact is not None and (problem := contact()):                # not after the first task is typed
        console.print(f"keel: warning: {problem}", style="yellow", markup=False)
    try:
        return session.loop()
    except KeyboardInterrupt:  # between two prompts, outside any run
        return 130
    finally:
        session.close()
