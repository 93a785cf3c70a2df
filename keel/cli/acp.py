"""`keel acp`: keel as an Agent Client Protocol agent over stdio, for Zed, JetBrains IDEs and other
editors (docs/acp.md).

Runs happen on the main thread, one at a time, exactly as `keel run` runs them: the same limits,
policy, sandbox and verification gate, and the same interrupt path, so a `session/cancel` is a
SIGINT to the main thread (a running command's process tree is killed, every call answered, the
session saved as interrupted). The protocol lives on an asyncio loop in a second thread; events
cross to it in order through one outbox, approvals cross back as `session/request_permission`.
A second session's prompt waits for the running one: two runs never interleave in one process.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from keel.cli.usage import add_engine_flags

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    from keel.cli.guard import positive_float, positive_int

    p = argparse.ArgumentParser(prog="keel acp", description="Serve the Agent Client Protocol on stdin/stdout "
                                "for an editor (Zed, JetBrains, Neovim, Emacs); each session is a workspace. "
                                "Needs keel[acp]. See docs/acp.md.")
    add_engine_flags(p)
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="model calls per prompt (default 50)")
    p.add_argument("--max-seconds", type=positive_float, metavar="S", help="wall clock per prompt")
    p.add_argument("--max-tokens", type=positive_int, metavar="N", help="token budget per prompt")
    p.add_argument("--budget-usd", type=positive_float, metavar="X", help="cost per prompt (needs [prices])")
    p.add_argument("--approval", choices=["interactive", "auto-edit", "full-auto", "unattended"],
                   help="interactive (default here): edits and ask-class commands become permission requests "
                        "in the editor; auto-edit: edits proceed, commands still ask; full-auto: commands run "
                        "unasked, only under a confining OS sandbox; unattended: ask-class commands are refused")
    p.add_argument("--verify", choices=["auto", "off"], help="auto (default): completion claims run the checks")
    p.add_argument("--allow-any-cwd", action="store_true",
                   help="accept a system directory, $HOME or one of its ancestors as a session's workspace")
    return p


def acp_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        import acp  # noqa: F401
    except ImportError:
        print("keel: `keel acp` needs the Agent Client Protocol SDK: pip install 'keel[acp]'", file=sys.stderr)
        return EXIT_USAGE
    from keel.cli.run import local_flag

    flags = {"engine": {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                        "local_model": local_flag(args.local)},
             "limits": {"max_steps": args.max_steps, "max_seconds": args.max_seconds,
                        "max_tokens": args.max_tokens, "budget_usd": args.budget_usd},
             "permissions": {"approval": args.approval}, "verify": {"mode": args.verify}}
    from keel.cli.acp_io import quiet_logging, take_stdio
    from keel.cli.signals import stop_on_signals

    quiet_logging()
    fds = take_stdio()
    # Cancels arrive as SIGINT to the main thread; a parent that ignored SIGINT must not make them a no-op.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from keel.cli.acp_protocol import Handlers
    from keel.cli.acp_server import Server

    server = Server(flags, args.allow_any_cwd, Handlers)
    thread = threading.Thread(target=server.serve_protocol, args=fds, name="keel-acp-protocol", daemon=True)
    with stop_on_signals() as stop:
        thread.start()
        try:
            server.work()
        except KeyboardInterrupt:
            pass
        finally:
            server.close_sessions()
    return stop.exit_code(1 if server.failed else 0)
