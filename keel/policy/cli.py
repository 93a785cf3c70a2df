"""``keel policy "COMMAND" [--json] [--cwd DIR]``: show how the shell policy judges a command.

Prints ``deny: recursive delete of '/' (part: rm -rf /)`` or, with ``--json``,
``{"decision": ..., "reason": ..., "part": ...}``. Exit status: 0 whenever a verdict was printed
(whatever it is — read the decision from the output), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from keel.policy.shell.risk import classify_command


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="keel policy", description="Show how keel's shell policy judges a command.")
    parser.add_argument("command", help="the shell command to judge (quote it)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--cwd", default=None, help="the workspace to judge paths against (default: .)")
    return parser


def policy_main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except _UsageError as exc:
        print(f"keel policy: {exc}\n{parser.format_usage().strip()}", file=sys.stderr)
        return 2
    except SystemExit as exc:          # --help
        return exc.code if isinstance(exc.code, int) else 0
    workspace = Path(args.cwd) if args.cwd is not None else Path.cwd()
    if not workspace.is_dir():
        print(f"keel policy: --cwd {args.cwd!r} is not a directory", file=sys.stderr)
        return 2
    verdict = classify_command(args.command, workspace)
    if args.json:
        print(json.dumps({"decision": verdict.decision, "reason": verdict.reason, "part": verdict.part}))
    else:
        print(f"{verdict.decision}: {verdict.reason} (part: {verdict.part})")
    return 0


if __name__ == "__main__":
    sys.exit(policy_main())
