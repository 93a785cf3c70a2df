"""Carrying a stopped session on from `keel run`: what a resume inherits, what it must be given, and
the line that says how (docs/sessions.md).

A resume takes the stopped run's limits, approval and verification where no flag says otherwise,
as an answer does (keel.cli.answer.inherit_policy). A limit counts across the stop, so a session a
limit stopped goes on only under a higher one: asked to resume under the same, keel says which flag
to raise instead of stopping again at once.
"""

from __future__ import annotations

import argparse
from typing import Any

from keel.trace.sessions import SavedSession, sessions_root

# limit stop reason -> (the flag, the args attribute, what the session used of it)
_LIMITS: dict[str, tuple[str, str, Any]] = {
    "limit:steps": ("--max-steps", "max_steps", lambda d: int(d.get("steps", 0))),
    "limit:wall_clock": ("--max-seconds", "max_seconds", lambda d: float(d.get("elapsed_s", 0.0))),
    "limit:tokens": ("--max-tokens", "max_tokens",
                     lambda d: sum(int((d.get("usage") or {}).get(k, 0)) for k in ("prompt_tokens", "completion_tokens"))),
}


def inherit_for_resume(args: argparse.Namespace, saved: SavedSession) -> str | None:
    """Flags not given now take the stopped run's values; the problem when the limit that stopped it
    would stop it again at once."""
    from keel.cli.answer import inherit_policy, stop_reason

    inherit_policy(args, saved, answering=False)
    reason = stop_reason(saved) or ""
    if reason == "limit:cost":
        return None if args.budget_usd is not None else (
            f"session {saved.id} stopped at its cost budget (limit:cost); it goes on only under a higher "
            f"one: {resume_command(saved)} --budget-usd X")
    if reason not in _LIMITS:
        return None
    flag, attr, used_of = _LIMITS[reason]
    used, limit = used_of(saved.data), getattr(args, attr, None)
    if limit is None or limit > used:
        return None
    more = _raised(attr, used)
    return (f"session {saved.id} stopped at {reason} ({flag} {limit:g}, {used:g} used, counted across the stop); it "
            f"goes on only with a higher limit: {resume_command(saved)} {flag} {more}")


def _raised(attr: str, used: float) -> str:
    return str(int(used) * 2 or 10) if attr != "max_seconds" else f"{max(used * 2, 60):.0f}"


def resume_command(saved_or_id: SavedSession | str, log: str | None = None) -> str:
    """`keel run --resume ID`, or the log's path for a session kept outside keel's data dir."""
    if isinstance(saved_or_id, SavedSession):
        return resume_command(saved_or_id.id, str(saved_or_id.log_path))
    outside = log is not None and not str(log).startswith(str(sessions_root()))
    return f"keel run --resume {log if outside else saved_or_id}"


def carry_on_hint(result: Any, limits: dict[str, Any]) -> str | None:
    """After an interrupt or a limit stop, in text mode: the session and the command that carries it
    on (``limits``: the run's own, to suggest a higher one for the limit it hit)."""
    reason = str(result.stop_reason)
    if not result.session_id or not (reason == "interrupted" or reason.startswith("limit:")):
        return None
    command = resume_command(result.session_id, result.log)
    if reason in _LIMITS:
        flag, attr, _ = _LIMITS[reason]
        used = result.steps if attr == "max_steps" else result.duration_s if attr == "max_seconds" else \
            result.usage.prompt_tokens + result.usage.completion_tokens
        command += f" {flag} {_raised(attr, max(float(limits.get(attr) or 0), float(used)))}"
    elif reason == "limit:cost":
        command += " --budget-usd X"
    return f"session {result.session_id} saved ({reason}); carry it on: {command}"
