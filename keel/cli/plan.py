"""`keel run --plan` and plan approval: which plan a run executes, and how it continues.

- ``keel run --plan TASK``: plan mode; stops with ``awaiting_plan_approval`` (exit 3), the plan in
  the result JSON and in ``<session dir>/plan.md``.
- ``keel run --resume SESSION --approve-plan``: the session goes on from where it stopped, out of
  plan mode, with ``plan.md`` approved and its steps as todos.
- ``keel run --resume SESSION --plan-file edited.md``: the same with the person's edited plan.
- ``keel run --plan-file PLAN TASK``: no session to continue: a fresh run seeded with the plan.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.ext.plan import PLAN_FILE, approved_plan_message, plan_todos

if TYPE_CHECKING:
    from keel.agent import Agent
    from keel.loop.result import RunResult

APPROVED_FILE = "plan-approved.md"


def add_plan_flags(p: Any) -> None:
    p.add_argument("--plan", action="store_true",
                   help="plan mode: explore read-only, then stop with a plan to approve "
                        "(exit 3, stop_reason awaiting_plan_approval; the plan is saved as plan.md in the session)")
    p.add_argument("--approve-plan", action="store_true",
                   help="with --resume SESSION: approve the session's plan.md and carry it out (its steps become todos)")
    p.add_argument("--plan-file", type=Path, metavar="PATH",
                   help="carry out this (edited) plan: with --resume SESSION it replaces the session's plan.md; "
                        "with a TASK it seeds a fresh run")


def plan_problem(args: argparse.Namespace, saved: Any, plan: str | None) -> str | None:
    """A usage error in the plan flags, or None. A session that stopped with a plan nobody
    approved is not resumed into execution without an approval."""
    if args.plan and (args.approve_plan or args.plan_file):
        return "--plan makes a plan; --approve-plan / --plan-file carry one out: use one or the other"
    if args.approve_plan and saved is None:
        return "--approve-plan needs --resume SESSION (the session that made the plan); or pass --plan-file PATH TASK"
    if saved is not None and plan is None and not args.plan and awaiting_approval(saved.dir):
        return (f"session {saved.id} stopped with a plan awaiting approval ({saved.dir / PLAN_FILE}): add "
                "--approve-plan, or --plan-file EDITED.md, or --plan to keep planning")
    return None


def read_plan(args: argparse.Namespace, session_dir: Path | None) -> tuple[str | None, str | None]:
    """(the plan to carry out, or None when none was asked for; a problem)."""
    if args.plan_file is not None:
        try:
            text = args.plan_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return None, f"cannot read the plan file {args.plan_file}: {e}"
        return (text, None) if text.strip() else (None, f"the plan file {args.plan_file} is empty")
    if not args.approve_plan:
        return None, None
    path = session_dir / PLAN_FILE if session_dir is not None else None
    if path is None or not path.is_file():
        return None, "this session has no plan to approve (it was not run with --plan, or stopped before planning)"
    return path.read_text(encoding="utf-8"), None


def awaiting_approval(session_dir: Path) -> bool:
    """The session stopped with a plan nobody approved yet: resuming it must approve or re-plan."""
    return (session_dir / PLAN_FILE).is_file() and not (session_dir / APPROVED_FILE).is_file()


def approve_and_continue(agent: Agent, saved: Any, plan: str) -> RunResult:
    """Continue a saved plan-mode session into execution: the approval and plan go in as the next
    user message, its steps replace the todo list, the conversation (what was explored) is kept."""
    directory = agent.log_path.with_suffix("") if agent.log_path else None
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / APPROVED_FILE).write_text(plan.strip() + "\n", encoding="utf-8")
    saved.data.setdefault("task_state", {})["todos"] = plan_todos(plan)
    agent.bus.emit("plan_approved", plan=plan[:4000], todos=len(plan_todos(plan)), resumed=saved.id)
    return agent.resume(saved, approved_plan_message(plan).strip())


def approval_hint(result: RunResult) -> str | None:
    """What to run next, for a person reading text output after a plan-mode stop."""
    if result.stop_reason != "awaiting_plan_approval":
        return None
    saved = f" (saved: {Path(result.log).with_suffix('') / PLAN_FILE})" if result.log else ""
    return (f"plan awaiting approval{saved}. Carry it out: keel run --resume {result.session_id} --approve-plan"
            f" — or edit it and pass --plan-file EDITED.md")
