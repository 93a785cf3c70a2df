"""`keel run --resume SESSION --answer TEXT`: answer the question an ``--attended`` run stopped on.

An attended run that asks (``ask_user``, or a reply that is a question) stops with ``needs_user``.
Headless, nobody answers in the terminal, so the person answers later: the answer goes in as the
next user message (the reply to the question) and the session goes on from its saved state, under
the limits and policy the stopped run had (flags given now override them; steps and wall clock
count across the stop, as for any resume).

A failed answer changes nothing: usage problems are found before anything is written, and a run
that gets no reply from the engine (unreachable, refused, interrupted before the first reply) puts
the session's saved state and event log back as they were, so it still waits for its answer.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from keel.core.files import write_atomic
from keel.core.schema import read_log
from keel.trace.sessions import SavedSession

if TYPE_CHECKING:
    from keel.agent import Agent
    from keel.loop.result import RunResult

ANSWER_LIMIT = 100_000  # characters: an answer is a reply, not a document (a file path can carry more)
WAITING = "needs_user"


def add_answer_flag(p: Any) -> None:
    p.add_argument("--answer", metavar="TEXT",
                   help="with --resume SESSION (or --continue): the reply to the question an --attended run "
                        "stopped on (needs_user); '-' reads it from stdin. The session goes on with it")


def read_answer(raw: str, stdin: IO[str]) -> tuple[str, str | None]:
    """The answer text from the flag ('-': stdin) and a problem, if any."""
    try:
        text = stdin.read() if raw == "-" else raw
    except (OSError, UnicodeDecodeError) as e:
        return "", f"--answer -: cannot read the answer from stdin ({e})"
    if not text.strip():
        return "", "--answer is empty: give the reply to the session's question"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
        return "", "--answer is not valid UTF-8 text"
    if len(text) > ANSWER_LIMIT:
        return "", f"--answer is {len(text):,} characters; an answer is at most {ANSWER_LIMIT:,}"
    return text.strip(), None


def stop_reason(saved: SavedSession) -> str | None:
    """Why the session last stopped: from its state, or for an older state from its log's last stop."""
    if saved.status in ("running", "crashed"):
        return None
    if "stop_reason" in saved.data:
        return saved.stop_reason
    with contextlib.suppress(OSError):
        stops = [e for e in read_log(saved.log_path).events if e.get("type") == "stop"]
        if stops:
            return str(stops[-1].get("reason") or "") or None
    return None


def waiting_for_answer(saved: SavedSession) -> bool:
    return saved.status == "incomplete" and stop_reason(saved) == WAITING


def question_of(saved: SavedSession) -> str:
    """The question the session stopped on: its last ask_user call, else its last reply's text."""
    for msg in reversed(saved.data.get("messages") or []):
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            if fn.get("name") == "ask_user":
                with contextlib.suppress(json.JSONDecodeError, TypeError, AttributeError):
                    return str(json.loads(fn.get("arguments") or "{}").get("question") or "")
        return str(msg.get("content") or "").strip()
    return ""


def answer_problem(args: argparse.Namespace, saved: SavedSession | None) -> str | None:
    """A usage error in --answer, or None. Checked before anything is written."""
    if args.answer is None:
        if saved is not None and waiting_for_answer(saved) and not (args.approve_plan or args.plan_file):
            return (f"session {saved.id} stopped on a question: {_quote(question_of(saved))}; answer it with "
                    f"keel run --resume {saved.id} --answer \"...\"")
        return None
    if saved is None:
        return "--answer needs --resume SESSION (or --continue): the session whose question it answers"
    if args.plan or args.approve_plan or args.plan_file:
        return "--answer replies to a question; --plan / --approve-plan / --plan-file are for plan mode: use one"
    if not waiting_for_answer(saved):
        why = stop_reason(saved) or saved.status
        return (f"session {saved.id} did not stop on a question (it stopped: {saved.status}, {why}); --answer "
                f"continues only a needs_user stop; resume it without --answer")
    return None


def prepare_answer(args: argparse.Namespace, saved: SavedSession | None,
                   stdin: IO[str]) -> tuple[str | None, str | None]:
    """(the answer to continue ``saved`` with, or None when none was given; a problem). With an
    answer, ``args`` takes the stopped run's limits and policy where no flag says otherwise."""
    if problem := answer_problem(args, saved):
        return None, problem
    if args.answer is None or saved is None:
        return None, None
    answer, problem = read_answer(args.answer, stdin)
    if problem:
        return None, problem
    inherit_policy(args, saved)
    return answer, None


def _quote(question: str) -> str:
    text = " ".join(question.split())
    return repr(text if len(text) <= 200 else text[:199] + "…") if text else "(no question text saved)"


def inherit_policy(args: argparse.Namespace, saved: SavedSession, *, answering: bool = True) -> None:
    """Flags not given now take the stopped run's values (its session_start record): the same limits,
    approval and verification; and a person ``answering`` is present, so the run is attended."""
    if answering:
        args.attended = True
    with contextlib.suppress(OSError):
        start = next((e for e in read_log(saved.log_path).events if e.get("type") == "session_start"), {})
        config = start.get("config") or {}
        limits = config.get("limits") or {}
        for flag in ("max_steps", "max_seconds", "max_tokens", "budget_usd"):
            if getattr(args, flag, None) is None and limits.get(flag) is not None:
                setattr(args, flag, limits[flag])
        if args.approval is None and config.get("approval"):
            args.approval = config["approval"]
        verify = config.get("verify") or {}
        if args.verify is None and verify.get("mode"):
            args.verify = verify["mode"]
        before = [a for a in verify.get("accept") or [] if isinstance(a, str) and a.strip()]
        if before:
            args.accept = list(dict.fromkeys([*before, *(args.accept or [])]))


@dataclasses.dataclass
class _Saved:
    """What a resume may change on disk, as it was before: put back when the resume got no reply."""
    state: Path
    state_bytes: bytes
    log: Path
    log_size: int
    handoff: Path
    handoff_bytes: bytes | None

    @classmethod
    def take(cls, saved: SavedSession) -> _Saved:
        from keel.context.handoff import HANDOFF_FILE

        state, handoff = saved.dir / "state.json", saved.dir / HANDOFF_FILE
        log_size = saved.log_path.stat().st_size if saved.log_path.is_file() else 0
        return cls(state, state.read_bytes(), saved.log_path, log_size, handoff,
                   handoff.read_bytes() if handoff.is_file() else None)

    def put_back(self) -> None:
        write_atomic(self.state, self.state_bytes)
        with contextlib.suppress(OSError):
            os.truncate(self.log, self.log_size)
        with contextlib.suppress(OSError):
            if self.handoff_bytes is None:
                self.handoff.unlink(missing_ok=True)
            else:
                write_atomic(self.handoff, self.handoff_bytes)


def answer_and_continue(agent: Agent, saved: SavedSession, answer: str) -> RunResult:
    """Carry ``saved`` on with ``answer`` as the user's reply. A run that got no reply from the engine
    leaves the session as it was and comes back as an error result (exit 2) that says so."""
    from keel.loop.result import RunResult

    assert agent.recorder is not None, "answering needs the session's log"
    before = _Saved.take(saved)
    steps_before = int(saved.data.get("steps", 0))
    replied = False
    try:
        result = agent.resume(saved, answer)
        replied = result.steps > steps_before
    finally:
        if not replied:  # also on Ctrl-C or an exception: no reply came, so nothing happened
            before.put_back()
    if replied or result.stop_reason == "interrupted":  # Ctrl-C before the reply: the session as it was, 130
        return result
    return RunResult(status="error", stop_reason="resume_failed", session_id=saved.id, log=str(saved.log_path),
                     steps=steps_before, error=result.error or f"the engine gave no reply ({result.stop_reason})",
                     summary=f"the answer was not delivered (no reply from the engine); session {saved.id} is "
                             "unchanged and still waits for an answer: run the same command again")


def answer_hint(result: RunResult) -> str | None:
    """What a person reading text output runs next after a needs_user stop: the question and the
    `--resume ID --answer` line (keel issue 32: text mode printed neither)."""
    if result.stop_reason != WAITING:
        return None
    asked = " ".join((result.question or result.summary).split())
    asked = asked if len(asked) <= 300 else asked[:299] + "…"
    return (f"the run asks: {asked or '(no question text)'}\n"
            f"keel: answer it with: keel run --resume {result.session_id} --answer \"YOUR ANSWER\"")
