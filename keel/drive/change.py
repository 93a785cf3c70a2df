"""``change_file``: the model says which file and what to change; a short, focused request to the same
model writes the whole new file (the small profile's main edit tool).

Why: measured on Qwen2.5-Coder-1.5B (Q4_K_M, this repo's small-window eval cases), the agent loop
with edit_file solved 1 case of 6: the model copied a whole function into old_text and new_text
unchanged, or kept the typo it was asked to fix. The same model, asked in a fresh request that holds
only the task, the file, the test file and the failing output to "reply with the complete corrected
file in one code block", fixed 4 of the 6 at temperature 0, in 10–20 s each. A small model reasons
about code far better than it copies it into JSON strings inside a long conversation. This is
Aider's architect/editor split with one model: the loop decides *what*; the edit request, with
nothing else in its window, writes *how*.

The pure core builds the request and judges the reply (``change_request``, ``extract_file``,
``judge``); ``make_change_tool`` is the shell: it reads the file, calls the engine with no tools,
writes through write_file (path jail, approval, checkpoints and diffs as for any write) and runs
the project's checks, so the model sees at once whether the change worked.
"""

from __future__ import annotations

import difflib
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import Field

from keel.context.outline import language_of
from keel.context.preload import CHARS_PER_TOKEN, FileText, choose, collect
from keel.drive.callee import where_else
from keel.drive.candidates import REWRITE_FLOOR_S, Rounds, Search, focused, search, trial_limit
from keel.drive.check_text import (
    HANG_WEIGHT,
    against,
    failing_output,
    failing_tests,
    failure_score,
    render_checks_after,
    saved_tail,
)
from keel.drive.expect import from_code
from keel.drive.move import asked_move
from keel.drive.putback import put_back
from keel.drive.rewrite import (
    GROWTH,
    editor_cap,
    editor_reply_cap,
    extract_file,
    imports_added,
    is_stub,
    keeps_definitions,
    reply_need,
    restore_dropped,
    restore_dropped_js,
    rewrite_problem,
    unframed,
    without_self_test,
)
from keel.drive.spread import Spread, rename_asked
from keel.engine.types import Usage
from keel.policy.beneath import anchor, read_beneath
from keel.policy.paths import PathJailError, display_path, resolve_in_workspace
from keel.policy.reads import read_refusal, shows
from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec, assist_acted
from keel.tools.small import NOTE_MAX_CHARS, breaks_python

if TYPE_CHECKING:
    from keel.verify.gate import CheckOutcome

EDITOR_PROMPT = "You are a careful programmer who fixes code."   # measured: see change_request
LONG_TASK_CHARS = 1500       # a task longer than this is said before the file (change_request)
RELATED_SHARE = 0.2          # of the context window, for the other files shown with the one to change
MIN_KEPT_SHARE = 0.5         # of the file's lines, below which a "change" is a replacement (a stub, a gutted file)
SMALL_FILE_LINES = 2         # files this short may change entirely


class ChangeArgs(ToolArgs):
    path: str = Field(description="The file to change (or create), relative to the workspace.")
    # No example here or in the refusals: a 1.5B model sent an example's words as its own change,
    # twice (a pagination fix for a mutable default, "len(rows) + 1" in a file without rows).
    # a maxLength makes it a note: under constrained decoding, one line that must end (keel/engine/grammar.py)
    change: str = Field(min_length=1, max_length=NOTE_MAX_CHARS,
                        description="What must change in it and why, in a sentence or two: the function or line, "
                                    "and what it must do instead.")


@dataclass(frozen=True)
class Reply:
    """What the edit request produced: the new file text, or why there is none (``checked``: a check
    on the rewrite refused it, keel.drive.rewrite)."""

    text: str | None
    problem: str = ""
    checked: bool = False


# -- pure core ---------------------------------------------------------------------------------------
def change_request(task: str, change: str | None, path: str, current: str | None, related: Sequence[FileText],
                   failures: str, refused: str = "", focus: str = "") -> list[dict[str, Any]]:
    """The edit request's messages: the other files first, the file to change last, then the
    failing checks' output, the task and the change (a small model follows the last thing it read).
    ``change`` None: the task and the checks alone (the second attempt, see make_change_tool).

    The wording is the one measured (1.5B model, greedy, six cases): this layout with the raw end of
    the failing output fixed 4 of 6; the same content with keel's failure summary instead, or with
    "end of" markers and other headings, fixed none of off-by-one's three prompt variants. ``refused``:
    why the editor's last rewrite was not written (keel.drive.rewrite), said before the task; ``focus``:
    one failing test to make pass first (the ``focus`` assist, a candidate's request), said after it.
    A task over LONG_TASK_CHARS is said before the file instead (see below)."""
    parts = [f"=== {f.path} ===\n{_body(f.text or '')}" for f in related]
    # A long task (an Exercism exercise's instructions, ~1,100 tokens) is said before the file, and the
    # end points back to it: every request of a change_file call, and of the next call, then shares it
    # with the one before, and the engine's cache keeps it. Said after the file, it was read again
    # whenever the file shown changed (each new round, each candidate from the file as the run found
    # it), 12-14 s a time on the 1.5B. A short task keeps the measured place, at the end.
    told = len(task.strip()) > LONG_TASK_CHARS
    if told:
        parts.append(f"Task: {task.strip()}\n\n")
    if current is None:
        parts.append(f"{path} does not exist yet: write it.\n")
    else:
        parts.append(f"=== {path} ===\n{_body(current)}=== end ===\n")
    if failures:
        parts.append(f"The tests fail:\n{failures.strip()}\n\n")
    if refused:
        parts.append(f"Your last rewrite was not used: {refused}\n\n")
    note = f"The change to make in {path}: {change.strip()}\n" if change else ""
    # The focus goes after the task, not before it: a candidate's request then shares everything up to
    # the task's end with the request before it, and the engine's cache keeps that part. Before the
    # task, every candidate read an Exercism task's ~1,100 tokens again, 12-14 s each on the 1.5B.
    aim = f"Make this failing test pass first: {focus}\n" if focus else ""
    # Measured (1.5B, greedy): told to make a wrong change that the project's weak tests still pass
    # (mutable-default: "add_tag: article.tags = [tag]"), the editor obeyed and keel ended complete
    # on a wrong fix. With this sentence it no longer did, and each right note still worked.
    hedge = " Fix the cause of the bug, where it is; the change above is only a suggestion." if change else ""
    ask = f"Task: the one above, before {path}.\n" if told else f"Task: {task.strip()}\n"
    parts.append(f"{ask}{note}{aim}Reply with the complete corrected {path} in one code block.{hedge}")
    return [{"role": "system", "content": EDITOR_PROMPT}, {"role": "user", "content": "".join(parts)}]


def judge(current: str | None, new: str | None, path: str, cut: bool, held: str | None = None) -> Reply:
    """Whether ``new`` may replace ``current`` (None: a new file); the problem, in words for the model.
    ``held``: what it must mostly keep, when not ``current``: the file as the run found it (not its own lines)."""
    if new is None:
        why = "was cut off before the file ended" if cut else "held no code block"
        return Reply(None, f"The rewrite of {path} {why}, so nothing was written. Call change_file again "
                           "with a shorter, more exact change, or use edit_file for a few lines.")
    if current is not None and not current.endswith("\n") and new.endswith("\n"):
        new = new[:-1]   # keep the file's own last-line convention
    if current is not None and new == current:
        return Reply(None, f"The rewrite of {path} came back unchanged, so nothing was written. Read the "
                           "failing test again, then say exactly which line of the file is wrong and what it "
                           "must become.")
    if current is None:
        return Reply(new)
    if (placeholder := _placeholder(current, new)) is not None:
        return Reply(None, f"The rewrite of {path} left part of the file out ({placeholder!r}), so nothing was "
                           "written. Call change_file again; the whole file is written for you.")
    base = current if held is None else held
    share = kept_share(base, new)
    if share < MIN_KEPT_SHARE and len(_lines(base)) > SMALL_FILE_LINES and not keeps_definitions(path, base, new):
        return Reply(None, f"The rewrite of {path} kept only {share:.0%} of its lines, so it would replace the "
                           "file rather than change it; nothing was written. Say which part must change.")
    if path.endswith(".py") and (broken := breaks_python(current.encode(), new.encode())):
        return Reply(None, f"The rewrite of {path} is not valid Python ({broken}), so nothing was written. "
                           "Call change_file again, saying exactly what must change.")
    return Reply(new)


def kept_share(old: str, new: str) -> float:
    """The share of ``old``'s non-blank lines that ``new`` keeps, in order (1.0 for an empty file)."""
    a, b = _lines(old), _lines(new)
    if not a:
        return 1.0
    kept = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return kept / len(a)


_PLACEHOLDER = re.compile(r"^\s*(#|//|/\*)\s*(\.\.\.|…|(the )?rest of|(existing|other|remaining) (code|functions|methods))",
                          re.I)


def _placeholder(old: str, new: str) -> str | None:
    """A line like ``# ... rest of the file`` that ``new`` has and ``old`` had not: a lazy rewrite."""
    before = set(old.splitlines())
    return next((line.strip() for line in new.splitlines() if _PLACEHOLDER.match(line) and line not in before), None)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def fits(current: str | None, reply_cap: int | None) -> bool:
    """Whether the whole new file can come back within one reply of ``reply_cap`` tokens."""
    if reply_cap is None or current is None:
        return True
    return math.ceil(len(current) / CHARS_PER_TOKEN * GROWTH) + 40 <= reply_cap


def _body(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


# -- the shell ---------------------------------------------------------------------------------------
def make_change_tool(candidates: int = 2) -> Tool:
    """change_file: it uses the engine, task, checks and log of the run it is called from (``ctx.run``).

    When the project has checks and the rewrite leaves them failing (or none came back), a second
    request asks for the file from the task and the failing checks alone, without the model's note,
    and the rewrite whose checks fail least is kept (the first on a tie). Measured on a 1.5B model:
    its note "remove FREE_SHIPPING_CENTS and add FLAT_RATE_CENTS at the end" for a `>` that should
    be `>=` was followed faithfully, where the task alone gave the right fix. When neither passes, the
    ``candidates`` assist asks for up to ``candidates`` more, tried on a copy (keel.drive.candidates)."""
    from keel.tools.files import WRITE_FILE, file_session
    from keel.tools.path_hints import directory_hint
    from keel.verify.redirect import elsewhere, evidence_redirect, redirect_notice
    from keel.verify.selfcheck import is_test_file

    # The failures of this tool's last check run, and the gate's result it saw then: when the gate has
    # run since (a finish was refused), the gate's result is the newer one.
    latest: dict[str, Any] = {}
    rounds, warned = Rounds(), set[str]()   # the again assist's; missing paths told of their name elsewhere

    def execute(args: ChangeArgs, ctx: ToolContext) -> ToolResult:
        rounds.last = None
        result = change_one(args, ctx)
        before, after = result.meta.get("failing") or (0, 0)
        if after and "again" in ctx.assists and rounds.more():
            result.meta["again"] = True   # the same change sent again is one more round (Rounds)
        if after and "callee_change" in ctx.assists and ctx.run is not None:   # the rest may be in another file
            result = where_else(result.meta.get("rewritten", args.path), result, ctx,
                                lambda path, note, c: change_one(ChangeArgs.model_construct(path=path, change=note), c))
        if (result.meta.get("failing") or (0, 0))[1] and "put_back" in ctx.assists and ctx.run is not None:
            result = put_back(result, ctx, lambda o: latest.update(outcomes=o, gate=ctx.run and ctx.run.verifier.last))
        return result

    def change_one(args: ChangeArgs, ctx: ToolContext) -> ToolResult:
        run = ctx.run
        if run is None:
            return ToolResult.error("change_file runs inside a run only (it asks the run's model).")
        engine = run.engine   # with the run's guards (runaway, deadline)
        try:
            real = resolve_in_workspace(ctx.workspace, args.path, for_write=True)
            data = read_beneath(*anchor(real)) if real.is_file() else None   # no symlink followed
        except (PathJailError, OSError) as e:
            return ToolResult.error(f"Cannot change {args.path}: {e}" + directory_hint(ctx, args.path))
        if real.is_dir():
            return ToolResult.error(f"Cannot change {args.path}: it is a directory, not a file"
                                    + (directory_hint(ctx, args.path) or "."))
        try:
            current = data.decode("utf-8") if data is not None else None
        except UnicodeDecodeError:
            return ToolResult.error(f"{args.path} is not a UTF-8 text file; change_file rewrites text files only.")
        shown = display_path(ctx.workspace, real)
        if current is None and shown not in warned and (twin := elsewhere(ctx.workspace, shown)) is not None:
            warned.add(shown)   # a new file of that name is made when the call comes again
            return ToolResult.error(twin)
        # the file goes to the engine in the editor request (and a move carries it to a name the
        # tools read freely): the one read decision first (keel.policy.reads)
        if data is not None and not shows(ctx.approval)(real) and \
                (refusal := read_refusal(ctx.approval, shown, real)) is not None:
            return ToolResult.error(refusal)
        task, request, verifier = run.task, run.request, run.verifier
        checks = verifier if verifier is not None and not verifier.plan.empty else None   # None: nothing to run
        # a move, or a rename the task names, is keel's own refactoring: no editor request, whatever the note says
        assists = ctx.assists
        done = (asked_move(ctx, shown, current, args.change, request, checks) if "moves" in assists else None) or \
            (rename_asked(ctx, shown, current, request, checks) if "rename_spread" in assists else None)
        if done is not None:
            if done.ok:
                assist_acted(ctx, "moves" if done.meta.get("moved") else "rename_spread", f"{shown}: {args.change}")
            return _finished(done, [], checks.run_plan() if checks and done.ok else None, Usage(), "", latest, verifier)
        gate_last = verifier.last if verifier is not None else None
        known = latest.get("outcomes") if latest and latest.get("gate") is gate_last else None
        if known is None and gate_last is not None:
            known = gate_last.results
        if checks is not None and current is not None and "test_redirect" in assists and \
                (aim := evidence_redirect(ctx.workspace, shown, current, request, checks.protected, known)):
            target, words = aim   # where to go instead of a test or the task's spec: a bare refusal was sent again
            assist_acted(ctx, "test_redirect", f"{shown} -> {target or 'refused'}")
            if target is None:
                return ToolResult.error(words)
            done = change_one(ChangeArgs.model_construct(path=target, change=words), ctx)
            return replace(done, output=redirect_notice(shown, target) + done.output,
                           meta={**done.meta, "rewritten": target})   # callee_change goes on from there
        failures = failing_output(known, saved_tail) if known is not None else ""
        if failures and known is not None and verifier is not None and "call_trace" in assists and \
                (trace := verifier.call_trace(known)):
            failures += "\n\n" + trace   # the cause is often a call deeper than the failing line
            assist_acted(ctx, "call_trace", f"{shown}: {trace.count(chr(10))} lines")
        window = run.window_tokens
        files, _ = collect(ctx.workspace, shows(ctx.approval))
        others = [f for f in files if f.path != shown and f.text is not None]
        related = choose(request.with_note(args.change), others, int(window * RELATED_SHARE * CHARS_PER_TOKEN)).shown
        tests = [f for f in others if is_test_file(f.path)]   # what a rewrite must not copy
        asked = sum(len(m["content"]) for m in change_request(task, args.change, shown, current, related, failures))
        base = editor_reply_cap(engine)
        cap = editor_cap(base, reply_need(shown, current), window - int(asked / CHARS_PER_TOKEN) - 64)
        if not fits(current, cap):
            return ToolResult.error(f"{shown} is too long to be rewritten whole in one reply. Use edit_file: "
                                    "old_text copied exactly from the file, new_text its replacement.")
        start = verifier.start if verifier is not None else None   # what the run found: the user's text
        held = None if start is None or (shown in start.files and start.text(shown) is None) else start.text(shown) or ""
        spent, began = Usage(), time.monotonic()
        assist_acted(ctx, "whole_file_editor", shown)
        round_ = rounds.start(shown, args.change) if "again" in assists else 0
        if round_:   # the same change sent again: one more round, sampled anew (counted for `keel eval`)
            assist_acted(ctx, "again", f"{shown}: round {round_ + 1} of this change")
        lead = Rounds.variant(round_, 0, candidates + 2)   # the note's and the task's requests: greedy in round 0

        def ask(note: str | None, refused: str = "", variant: int = 0, start: str | None = None,
                focus: str = "") -> tuple[Reply, list[str]]:
            started = time.monotonic()
            messages = change_request(task, note, shown, start or current, related, failures, refused, focus)
            # a cap or variant of its own only when set: an engine without the keywords still serves
            sampled: dict[str, Any] = {"variant": variant} if variant else {}
            turn = engine.complete(messages, [], max_tokens=cap, **sampled) if cap != base else \
                engine.complete(messages, [], **sampled)
            spent.add(turn.usage)
            run.bus.emit("change_request", step=run.step, path=shown, with_note=note is not None,
                         latency_s=round(time.monotonic() - started, 3), finish_reason=turn.finish_reason,
                         usage=turn.usage.to_json(), reply=turn.content)   # whole: keel replay serves it
            new, restored = unframed(extract_file(turn.content), shown), list[str]()
            if new is not None and current is not None and shown.endswith(".py"):
                new, restored = restore_dropped(current, new, note or "")
            elif new is not None and current is not None and "editor_checks" in assists and \
                    language_of(shown) == "javascript":
                new, restored = restore_dropped_js(current, new, note or "")
            if new is not None and "editor_checks" in assists:
                new, dropped = without_self_test(shown, current, new)
                if dropped:
                    assist_acted(ctx, "editor_checks", f"{shown}: the rewrite's own tests under __main__ left out")
                new, imported = imports_added(shown, current, new)
                if imported:
                    assist_acted(ctx, "editor_checks", f"{shown}: the rewrite's missing {'; '.join(imported)} added")
                if (problem := rewrite_problem(shown, current, new, note or args.change, tests)) is not None:
                    assist_acted(ctx, "editor_checks", problem)
                    return Reply(None, problem, checked=True), restored
            if new is not None and verifier is not None and "expected_values" in assists and \
                    (fixed := from_code(shown, new, request, lambda c: verifier.outputs_in_copy([c])[0])) is not None:
                new = fixed[0]   # the task keeps the code and asks for tests: the code says what to expect
                assist_acted(ctx, "expected_values", f"{shown}: {'; '.join(fixed[1])}")
            return judge(current, new, shown, turn.finish_reason == "length", held), restored

        def write(text: str) -> ToolResult:
            if real.is_file():
                file_session(ctx).record_read(real, read_beneath(*anchor(real)))   # read just now, by this tool
            return WRITE_FILE.execute(WRITE_FILE.spec.args(path=args.path, content=text), ctx)

        # a rename the rewrite makes goes to the other files using the old name before the checks run
        spread = Spread(ctx, request, args.change, shown, current, checks)
        if "rename_spread" not in assists:
            spread.candidates = []
        first, restored = ask(args.change, "", lead)
        limit = trial_limit(known, REWRITE_FLOOR_S)   # the rewrites' checks; a candidate's get trial_limit(known)
        tried: list[tuple[str, list[str], ToolResult, tuple[CheckOutcome, ...], bool]] = []   # ..., with the note
        if first.text is not None:
            spread.after(written := write(first.text), first.text)
            if not written.ok or checks is None:
                return _finished(written, restored, None, spent, spread.report(written))
            outcomes = checks.run_plan(limit_s=limit)
            if failure_score(outcomes) == 0:
                return _scored(_finished(written, restored, outcomes, spent, spread.report(written), latest, verifier),
                               known, outcomes)
            tried.append((first.text, restored, written, outcomes, True))
        elif checks is None and not first.checked:
            return ToolResult.error(first.problem, usage=spent)
        # the task and the failing checks alone; told why a rewrite was refused, when it was
        refused = first.problem if first.checked else ""
        second, restored_second = ask(None, refused, lead)
        if second.text is not None and all(second.text != t[0] for t in tried):
            spread.after(written := write(second.text), second.text)
            if checks is None:   # the first rewrite was refused by a check, and there is nothing to run
                return _finished(written, restored_second, None, spent, spread.report(written))
            if written.ok:
                tried.append((second.text, restored_second, written, checks.run_plan(limit_s=limit), False))
        # none written: the cause may be elsewhere, unless the change was asked before, the run wrote this
        # file, or it is a stub (its placeholders are why the tests fail; Exercism luhn: both rewrites of the
        # stub were cut, no candidate was asked, and the model had to send the same change again)
        ours = known is not None and (round_ > 0 or (held is not None and current != held) or is_stub(shown, current))
        best = min((failure_score(t[3]) for t in tried), default=failure_score(known) if known and ours else 0)
        found = Search()
        if checks is not None and "candidates" in assists and best:
            aims = iter(focused(ctx, shown, known if "focus" in assists else None))
            found = search(ctx, lambda v: ask(None, refused, v, held, next(aims)), checks, shown, current, limit=candidates,
                           block=(rounds.searched(shown, round_), candidates + 2),   # sampled anew, from `held`
                           protected=(is_test_file(shown) or shown in checks.protected)
                           and not request.allows_test_changes, before=best, spent=spent, limit_s=trial_limit(known),
                           unit=(spent.total // 2, (time.monotonic() - began) / 2))
            if (kept := found.kept or found.better) is not None and kept.text is not None:
                spread.after(written := write(kept.text), kept.text)
                if written.ok:   # its evidence is the real files', run again here
                    tried.append((kept.text, list(kept.restored), written, checks.run_plan(limit_s=limit), False))
        cost = f"\n{found.report()}" if found.tried else ""
        if not tried:
            return _scored(ToolResult.error((second.problem if first.checked and second.problem else first.problem)
                                            + cost, usage=spent), known, known)
        text, restored, written, outcomes, noted = min(tried, key=lambda t: failure_score(t[3]))   # first on a tie
        if current is not None and known is not None and failure_score(outcomes) > failure_score(known):
            write(current)   # worse than before the call: the file goes back (measured: a note that broke page_count)
            spread.undo()
            return _scored(ToolResult.error(
                f"Nothing was kept: with the rewrite the checks failed worse than before "
                f"({against(failure_score(outcomes), failure_score(known))}), so "
                f"{shown} is as it was. Read the failing test again and say exactly what must change." + cost, usage=spent), known, known)
        if text != tried[-1][0]:
            write(text)   # the first rewrite did at least as well as the second: back to it
        still = "timed out" if failure_score(tried[0][3]) >= HANG_WEIGHT else "still failed"
        note = "" if noted else (
            "Your note was not followed (" + (f"with it the checks {still}" if tried[0][4] else
                                             first.problem.rstrip(".")) +
            "): a rewrite from the task and the failing checks alone did better, and is what was written.")
        note = "\n".join(line for line in (note, found.report(), spread.report(written)) if line)
        return _scored(_finished(written, restored, outcomes, spent, note, latest, verifier), known, outcomes)

    spec = ToolSpec("change_file",
                    "Change a file by saying what must change: keel rewrites the whole file with your change, "
                    "saves it and runs the project's checks.", ChangeArgs, WRITE_FILE.spec.annotations)
    return Tool(spec, execute)


def _scored(result: ToolResult, before: Sequence[CheckOutcome] | None,
            after: Sequence[CheckOutcome] | None) -> ToolResult:
    """``result`` with how many checks failed before the call and after it (keel.drive.callee reads it)."""
    if before is not None and after is not None:
        result.meta["failing"] = (failure_score(before), failure_score(after))
        result.meta["failing_tests"] = failing_tests(after)
    return result


def _finished(written: ToolResult, restored: list[str], outcomes: tuple[CheckOutcome, ...] | None, spent: Usage,
              note: str, latest: dict[str, Any] | None = None, verifier: Any = None) -> ToolResult:
    """The tool's reply for the rewrite that stays: what was written, definitions put back, the checks."""
    written.meta["usage"] = spent
    if not written.ok:
        return written
    lines = [written.output]
    if restored:
        lines.append(f"The rewrite had left out {', '.join(f'{n}()' for n in restored)}; kept as it was.")
    if note:
        lines.append(note)
    if outcomes is not None:
        lines.append(render_checks_after(outcomes))
        if latest is not None:
            latest.update(outcomes=outcomes, gate=verifier.last if verifier is not None else None)
    written.output = "\n".join(line for line in lines if line)
    return written
