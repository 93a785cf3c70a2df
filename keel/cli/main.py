"""The `keel` command: parse → build → run. No logic lives here beyond wiring."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


def _run_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="carry one task to a stop, headless")
    p.add_argument("task")
    p.add_argument("--cwd", default=".", help="the workspace (default: current directory)")
    p.add_argument("--base-url")
    p.add_argument("--model")
    p.add_argument("--api-key-env", help="name of the environment variable that holds the API key")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--max-seconds", type=float)
    p.add_argument("--max-tokens", type=int, help="token budget for the whole run")
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--approval", choices=["unattended", "auto-edit", "interactive"],
                   help="unattended (default): ask-class commands are refused; auto-edit: they run; "
                        "interactive: you are asked (needs a terminal)")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text")
    p.add_argument("--log", type=Path, help="write the JSONL event log here (default: keel's data dir)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="keel", description="A coding agent that finishes verified.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    t = sub.add_parser("tool", help="run one tool exactly as the model would and print what it sees")
    t.add_argument("name")
    t.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    t.add_argument("--cwd", default=".")
    d = sub.add_parser("doctor", help="check an engine the way users get it wrong")
    d.add_argument("--base-url")
    d.add_argument("--model")
    d.add_argument("--api-key-env")
    sub.add_parser("policy", help="judge a shell command: allow / ask / deny", add_help=False)
    sub.add_parser("checks", help="show (and --run) the checks that verify work here", add_help=False)
    sub.add_parser("scripted-engine", help="serve a scripted OpenAI-compatible engine", add_help=False)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from keel.agent import Agent
    from keel.cli.render import JsonLinesRenderer, TextRenderer, print_json
    from keel.config import ConfigError, load_config
    from keel.engine.types import EngineError
    from keel.loop.result import RunResult
    from keel.trace.events import EventSink

    workspace = Path(args.cwd).resolve()
    if not workspace.is_dir():
        print(f"keel: --cwd {args.cwd}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    flags = {
        "engine": {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env},
        "limits": {"max_steps": args.max_steps, "max_seconds": args.max_seconds,
                   "max_tokens": args.max_tokens, "budget_usd": args.budget_usd},
        "permissions": {"approval": args.approval},
    }
    try:
        config, warnings = load_config(workspace, flags=flags)
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.output_format != "text":  # no start line is shown: say once if nothing confines commands
        from keel.agent import unconfined_warning
        if tier_warning := unconfined_warning(config):
            warnings.append(tier_warning)
    for w in warnings:
        print(f"keel: warning: {w}", file=sys.stderr)
    sinks: list[EventSink] = []
    if args.output_format == "text":
        sinks.append(TextRenderer())
    elif args.output_format == "stream-json":
        sinks.append(JsonLinesRenderer())
    prompt = None
    if config.permissions.approval == "interactive":
        if not sys.stdin.isatty():
            print("keel: --approval interactive needs a terminal on stdin", file=sys.stderr)
            return EXIT_USAGE
        from keel.cli.prompt import terminal_prompt
        prompt = terminal_prompt
    try:
        agent = Agent(workspace=workspace, config=config, sinks=sinks, log_path=args.log, prompt=prompt,
                      ask_user=prompt)
        result = agent.run(args.task)
    except EngineError as e:  # configuration problems found before the first call
        result = RunResult(status="error", stop_reason="config_error", error=e.message)
        if args.output_format == "text":
            print(f"keel: {e.message}", file=sys.stderr)
    if args.output_format != "text":
        print_json(result.to_json())
    return result.exit_code


def _cmd_tool(args: argparse.Namespace) -> int:
    from keel.agent import build_context
    from keel.config import ConfigError, load_config
    from keel.engine.types import ToolCall
    from keel.tools.catalog import default_tools
    from keel.tools.registry import ToolRegistry

    workspace = Path(args.cwd).resolve()
    try:
        config, _ = load_config(workspace)
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    registry = ToolRegistry(default_tools())
    if registry.get(args.name) is None:
        print(f"keel: unknown tool {args.name!r}; tools: {', '.join(registry.names)}", file=sys.stderr)
        return EXIT_USAGE
    ctx = build_context(workspace, config, attended=False)
    result = registry.execute(ToolCall("cli", args.name, args.arguments), ctx)
    print(result.output)
    return 0 if result.ok else 1


def _cmd_doctor(args: argparse.Namespace) -> int:
    import os

    from keel.config import ConfigError, load_config, resolve_api_key
    from keel.engine.doctor import format_doctor, run_doctor

    try:
        config, _ = load_config(Path.cwd(), flags={"engine": {"base_url": args.base_url, "model": args.model,
                                                              "api_key_env": args.api_key_env}})
    except ConfigError as e:
        print(f"keel: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    checks = run_doctor(config.engine.base_url, config.engine.model, resolve_api_key(config, dict(os.environ)))
    print(format_doctor(checks))
    return 0 if all(c.ok is not False for c in checks) else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "policy":
        from keel.policy.cli import policy_main
        return policy_main(argv[1:])
    if argv and argv[0] == "checks":
        from keel.cli.checks import checks_main
        return checks_main(argv[1:])
    if argv and argv[0] == "scripted-engine":
        from keel.testing.server import serve_main
        return serve_main(argv[1:])
    args = build_parser().parse_args(argv)
    handlers = {"run": _cmd_run, "tool": _cmd_tool, "doctor": _cmd_doctor}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
