"""``keel checks [--cwd DIR] [--run] [--json] [--task TEXT] [--accept CMD ...]``: the verification plan.

Prints the checks keel would run on a completion claim in DIR, each with the reason it was chosen,
then the checks it cannot run (with a note) and hints (CI commands, superseded inferences). With
``--run`` it runs them in order through the ``run_shell`` tool — the same shell policy, sandbox,
timeout and output cap the model's commands get, authorized as the gate authorizes its checks — and
exits 0 when every check passed, 1 otherwise.
Usage errors (a missing or refused --cwd, a broken config) exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.cli.usage import RaisingParser, UsageError
from keel.verify.gate import CheckOutcome
from keel.verify.plan import CheckSet, PlannedCheck

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = RaisingParser(prog="keel checks", description="Show (and run) the checks that verify work in a project.")
    parser.add_argument("--cwd", default=".", help="the project directory (default: current directory)")
    parser.add_argument("--allow-any-cwd", action="store_true",
                        help="accept a system directory, $HOME or one of its ancestors as the project")
    parser.add_argument("--run", action="store_true", help="run the checks in order and report pass/fail")
    parser.add_argument("--json", action="store_true", help="print the plan (and results) as JSON")
    parser.add_argument("--task", default="", metavar="TEXT",
                        help="a task text: the commands it names as acceptance become checks")
    parser.add_argument("--accept", action="append", default=[], metavar="CMD",
                        help="an acceptance command to add (repeatable)")
    return parser


@dataclass(frozen=True)
class CheckResult:
    check: PlannedCheck
    passed: bool
    exit_code: int | None
    duration_s: float
    note: str = ""          # why it failed when the exit code does not say it (refused, missing output)
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"category": self.check.category, "command": self.check.command, "passed": self.passed,
                "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3), "note": self.note}


def format_plan(plan: CheckSet, workspace: Path) -> str:
    lines = [f"keel checks · {workspace}"]
    checks = plan.ordered()
    if not checks:
        lines.append("no checks found: nothing in this project names a check keel can run "
                     "(add one with --accept CMD, or pin a plan in .keel/config.toml)")
    lines += [f"[{c.category}] {c.command} — {c.reason}" for c in checks]
    if plan.skipped:
        lines.append("skipped:")
        lines += [f"  [{s.category}] {s.command} — {s.note}" for s in plan.skipped]
    if plan.hints:
        lines.append("hints:")
        lines += [f"  {h}" for h in plan.hints]
    return "\n".join(lines)


def _config_and_plan(args: argparse.Namespace, workspace: Path) -> tuple[Any, CheckSet]:
    """The plan exactly as the gate builds it: the config's pinned plan, switches and --accept."""
    from keel.config import load_config
    from keel.policy.sandbox import policy_for
    from keel.verify.detect import build_plan
    from keel.verify.detect.python import make_module_probe

    config, warnings = load_config(workspace)
    for warning in warnings:
        print(f"keel checks: warning: {warning}", file=sys.stderr)
    # getattr: the [verify] config section is optional in older configs and in tests' fakes.
    verify = getattr(config, "verify", None)
    plan_entries = getattr(verify, "plan", None)
    pinned = [(c.category, c.command) for c in plan_entries] if plan_entries is not None else None
    enabled = verify.enabled() if verify is not None and hasattr(verify, "enabled") else None
    accept = [*(getattr(verify, "accept", None) or []), *args.accept]
    tier = getattr(getattr(config, "shell", None), "sandbox", "auto")
    probe = make_module_probe(policy_for(tier))    # the interpreter probes run in the configured tier
    return config, build_plan(workspace, args.task, accept=accept, pinned=pinned, enabled=enabled, has_module=probe)


def run_plan(plan: CheckSet, workspace: Path, config: Any, *, echo: bool = True) -> list[CheckResult]:
    """Run every planned check once, in gate order, exactly as the verification gate runs it (same
    authorization, sandbox, timeouts and failure summaries); print a line per check as it ends."""
    from keel.agent import build_context
    from keel.verify.verifier import Verifier

    verifier = Verifier(plan, build_context(workspace, config, attended=False),
                        check_timeout_s=config.verify.check_timeout_s)
    results: list[CheckResult] = []

    def show(outcome: CheckOutcome) -> None:
        result = _result(outcome)
        results.append(result)
        if echo:
            print(_result_line(result), flush=True)
            if not result.passed and result.output:
                print("\n".join(f"    {line}" for line in result.output.splitlines()), flush=True)

    verifier.run_plan(on_result=show)
    return results


def _result(o: CheckOutcome) -> CheckResult:
    if not o.ran:                       # refused by the policy or could not start: never a pass
        return CheckResult(o.check, False, None, o.duration_s, note="not run", output=o.refused or "")
    note = ""
    if o.timed_out:
        note = "timed out"
    elif o.exit_code == 0 and not o.output_ok:
        note = f"output does not contain {o.check.expect_output!r}"
    return CheckResult(o.check, o.passed, o.exit_code, o.duration_s, note=note, output=o.summary)


def _result_line(result: CheckResult) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    detail = [f"{result.duration_s:.2f} s"]
    if not result.passed:
        detail.insert(0, result.note or f"exit {result.exit_code}")
    return f"{verdict} [{result.check.category}] {result.check.command} ({', '.join(detail)})"


def checks_main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"keel checks: {exc}\n{parser.format_usage().strip()}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:          # --help
        return exc.code if isinstance(exc.code, int) else 0
    from keel.cli.guard import check_workspace

    # The same refusals as `keel run`: --run makes the workspace writable to the project's commands.
    workspace, problem = check_workspace(args.cwd, args.allow_any_cwd)
    if problem:
        print(f"keel checks: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from keel.config import ConfigError

    try:
        config, plan = _config_and_plan(args, workspace)
    except (ConfigError, ValueError) as exc:
        print(f"keel checks: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.run:
        print(json.dumps(plan.to_json(), indent=2) if args.json else format_plan(plan, workspace))
        return 0
    if not args.json:
        print(format_plan(plan, workspace), flush=True)
        print()
    try:
        results = run_plan(plan, workspace, config, echo=not args.json)
    except KeyboardInterrupt:
        return 130
    except ValueError as exc:          # a bad permission rule in config (RuleError)
        print(f"keel checks: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    passed = all(r.passed for r in results)
    if args.json:
        print(json.dumps({**plan.to_json(), "results": [r.to_json() for r in results], "passed": passed}, indent=2))
    else:
        failed = sum(not r.passed for r in results)
        print(f"{len(results) - failed}/{len(results)} checks passed" if results else "no checks to run")
    return 0 if passed else 1
