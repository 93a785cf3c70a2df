"""``keel policy "COMMAND" [--json] [--cwd DIR]``: show how keel judges a shell command.

The verdict is the one ``run_shell`` gets: the shell policy with the configured permission rules
applied (config loaded for the workspace, as ``keel tool`` does), followed by the OS sandbox tier
that would confine the command::

    allow: git status only reads (part: git status)
    sandbox: landlock (ABI 7: fs+net)

``--json`` prints ``{"decision", "reason", "part", "network", "sandbox", "confining"}``. Exit
status: 0 whenever a verdict was printed (read the decision from the output), 2 for usage and
configuration errors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from keel.cli.usage import RaisingParser, UsageError


def _parser() -> argparse.ArgumentParser:
    parser = RaisingParser(prog="keel policy", description="Show how keel's shell policy judges a command.")
    parser.add_argument("command", help="the shell command to judge (quote it)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--cwd", default=None, help="the workspace to judge paths against and load "
                                                    ".keel/config.toml from (default: .)")
    return parser


_SANDBOX_CLAIM = re.compile(r"(?:the )?OS sandbox")


def honest_reason(reason: str, tier: str, confining: bool) -> str:
    """``reason`` with any mention of "the OS sandbox" made true for this machine: it names the
    active tier, and says plainly when nothing confines the command."""
    if "OS sandbox" not in reason:
        return reason
    if confining:
        return _SANDBOX_CLAIM.sub(tier, reason)
    # Only the affirmative claim is false here; "no OS sandbox confines it" is already true.
    return reason.replace("contained by the OS sandbox", f"NOT contained: no OS sandbox here, {tier}")


def judge(command: str, workspace: Path) -> dict[str, Any]:
    """The verdict for ``command`` in ``workspace`` under its configuration. Raises ConfigError or
    RuleError for a configuration that cannot be used."""
    from keel.config import load_config
    from keel.policy.rules import RuleSet
    from keel.policy.sandbox import active_sandbox, policy_for

    config, _warnings = load_config(workspace)
    perms = config.permissions
    # The tier changes the verdict (workspace writes, running code), exactly as for run_shell.
    info = active_sandbox(policy_for(config.shell.sandbox))
    # As in a run: the workspace is snapshotted before each command unless a cap turned that off.
    snapshot = config.shell.snapshot_max_mb > 0 and config.shell.snapshot_max_files > 0
    evaluation = RuleSet.from_config(perms.allow, perms.ask, perms.deny).evaluate_shell(
        command, workspace, confined=info.confining, pid_namespace=info.kind == "bubblewrap", snapshot=snapshot)
    verdict = evaluation.verdict
    return {"decision": verdict.decision, "reason": honest_reason(verdict.reason, info.tier, info.confining),
            "part": verdict.part, "network": evaluation.network, "sandbox": info.tier,
            "confining": info.confining}


def policy_main(argv: list[str] | None = None) -> int:
    from keel.config import ConfigError
    from keel.policy.rules import RuleError

    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"keel policy: {exc}\n{parser.format_usage().strip()}", file=sys.stderr)
        return 2
    except SystemExit as exc:          # --help
        return exc.code if isinstance(exc.code, int) else 0
    workspace = Path(args.cwd) if args.cwd is not None else Path.cwd()
    if not workspace.is_dir():
        print(f"keel policy: --cwd {args.cwd!r} is not a directory", file=sys.stderr)
        return 2
    try:
        result = judge(args.command, workspace.resolve())
    except (ConfigError, RuleError) as exc:
        print(f"keel policy: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['decision']}: {result['reason']} (part: {result['part']})")
    confines = "" if result["confining"] else " — nothing confines what commands run beyond rlimits"
    print(f"sandbox: {result['sandbox']}{confines}")
    return 0


if __name__ == "__main__":
    sys.exit(policy_main())
