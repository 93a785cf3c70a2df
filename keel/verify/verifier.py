"""The verification gate's I/O shell: run the plan's checks, keep the evidence, build GateFacts.

The runner calls ``ensure_baseline()`` just before the first change to the workspace (keel's own
writing tools ask for it once a person approved the change: ToolContext.before_change), and
``verify()`` on every completion claim; the pure rules live in keel.verify.gate. Checks run
through the run_shell executor, so they get the same policy, sandbox, timeouts and process-tree
kill as the model's own commands. Evidence is keyed by a digest of every workspace file, so a
check that passed counts only for the exact file state it ran on — and a claim repeated on an
unchanged workspace costs nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from keel.core.assists import Assists
from keel.core.events import data_dir
from keel.core.request import parse_request
from keel.outputs.counts import run_counts
from keel.outputs.summarize import summarize_failure, summarize_missing_output
from keel.policy.leftovers import asks_about
from keel.tools.base import CheckRun, ToolContext, assist_acted
from keel.tools.shell import MAX_TIMEOUT_S, RunShellArgs, run_shell
from keel.verify.answer import clears_the_code, errors_blamed
from keel.verify.bounds import bound_checks
from keel.verify.calltrace import MAX_TESTS, NODE_SUFFIXES, javascript_command, python_command, render
from keel.verify.contract import promises
from keel.verify.gate import Baseline, CheckOutcome, GateFacts, render_feedback, split_failures
from keel.verify.grounding import answer_gap, project_files, speaks_of, unshown_errors
from keel.verify.plan import CheckSet, PlannedCheck
from keel.verify.probes import contract_checks
from keel.verify.related import narrows_by_path, related_python_tests
from keel.verify.scratch import copy_workspace, scratch_context
from keel.verify.selfcheck import (
    change_summary,
    debug_leftovers,
    is_code_file,
    is_test_file,
    render_changes,
    stray_files,
    tampered_tests,
    unrelated_changes,
)
from keel.verify.snapshot import FileChange, Snapshot, diff_snapshots, take_snapshot
from keel.verify.trial import MAX_FILES, module_name, trial_calls, trial_command, trial_text

# Dependency folders a scratch copy links to instead of copying (big, and not what the agent edits).
CHECK_OUTPUT_CAP = 2_000_000     # the saved log keeps this much; the model sees only the summary
_STATUS_LINE = re.compile(r"\A[^\n]*\n?")


class _ChecksApproval:
    """How the gate's own checks are authorized: deny rules and deny-class commands still refuse,
    ask-class commands proceed without a prompt (as in full-auto mode) because the plan comes from
    the user's task, ``--accept`` and the project's files rather than from the model — but a check
    never gets the network opened for it, since the project's files are not the user's word."""

    def __init__(self, approver: Any) -> None:
        self._approver = copy.copy(approver)
        if getattr(self._approver, "mode", None) in ("unattended", "interactive", "auto-edit"):
            # Set on the copy, past Approver.__init__'s tier check: the checks are not the model's choice.
            self._approver.mode = "full-auto"

    def authorize_shell(self, command: str) -> Any:
        outcome = self._approver.authorize_shell(command)
        if getattr(outcome, "network", False):
            outcome = dataclasses.replace(outcome, network=False)
        return outcome


def _checks_context(ctx: ToolContext) -> ToolContext:
    """The context the gate runs its checks in; the saved output keeps far more than the model sees."""
    approval = _ChecksApproval(ctx.approval) if ctx.approval is not None else None
    # before_change: a check is no change of the agent's (and the baseline would run itself again)
    return dataclasses.replace(ctx, approval=approval, output_cap_bytes=CHECK_OUTPUT_CAP, before_change=None)


class Verifier:
    def __init__(self, plan: CheckSet | Callable[[], CheckSet], ctx: ToolContext, *, task: str = "",
                 artifacts_dir: Path | None = None, check_timeout_s: float = 300.0,
                 on_plan: Callable[[CheckSet], object] | None = None, assists: Assists | None = None) -> None:
        self.ctx, self.task = ctx, task
        self.assists = assists if assists is not None else ctx.assists   # contract_review, spec_probes
        # Detection may probe interpreters (subprocesses): done on first need, not before the
        # first model call, so a configuration error still answers at once.
        self._plan = plan if isinstance(plan, CheckSet) else None
        self._make_plan = plan if callable(plan) else None
        self._on_plan = on_plan
        self.artifacts_dir = artifacts_dir
        self.check_timeout_s = min(check_timeout_s, MAX_TIMEOUT_S)
        self.request = parse_request(task)      # what counts as evidence depends on what it asks for
        self.start: Snapshot = take_snapshot(ctx.workspace)
        self.baseline: Baseline | None = None
        self.last: GateFacts | None = None
        self._cache: dict[tuple[str, str], CheckOutcome] = {}
        self._saved = 0
        self._traces: dict[tuple[str, tuple[str, ...]], str] = {}
        self._records: dict[str, str | None] = {}     # bounds recorded on the code as it was (keel.verify.bounds)

    @property
    def plan(self) -> CheckSet:
        if self._plan is None:
            assert self._make_plan is not None
            self._plan = self._make_plan()
            if self._on_plan is not None:
                self._on_plan(self._plan)
        return self._plan

    @property
    def protected(self) -> set[str]:
        """Files the plan's commands depend on, and those the task says must not change: editing them to
        pass is tampering."""
        return {p for c in self.plan.checks for p in c.protects} | set(self.request.kept_files)

    # -- the two entry points ------------------------------------------------------------------
    def ensure_baseline(self) -> tuple[CheckOutcome, ...]:
        """Record which checks fail before the agent changes anything (once; cheap when cached);
        the outcomes it ran, () when it had run already. A request for an answer runs no check: its
        evidence is the answer and the workspace as it was."""
        if self.baseline is not None or self.request.answer_only or self.plan.empty:
            return ()
        snap = take_snapshot(self.ctx.workspace)
        results = tuple(self._run(c, snap.digest, self.ctx) for c in self._inferred())
        self.baseline = Baseline.from_results(snap.digest, results)
        return results

    def baseline_commands(self) -> list[str]:
        """The commands ensure_baseline runs (the acceptance checks wait for a claim)."""
        return [c.command for c in self._inferred()]

    def verify(self, claim: str = "") -> GateFacts:
        """The facts of a completion claim; ``claim``: the answer or summary it came with."""
        snap = take_snapshot(self.ctx.workspace)
        unchanged = snap.digest == self.start.digest
        if self.request.answer_only:
            return self._answer_facts(snap, unchanged, claim)
        tampered = tuple(tampered_tests(self.start, snap, self.protected, self.request))
        changes = diff_snapshots(self.start, snap)
        if tampered:
            results = self._run_on_restored_tests(snap, tampered)
        else:
            related = related_python_tests(changes, snap.files)
            results = tuple(self._run_related_first(c, snap.digest, related) for c in self.plan.ordered())
        if self.baseline is None and unchanged:
            # Nothing changed yet: this run is the baseline, no need to run the checks twice.
            self.baseline = Baseline.from_results(snap.digest, tuple(r for r in results
                                                                     if r.check.category != "acceptance"))
        changed = self._changed(snap, changes)
        contract = promises(self.request, changed) if {"contract_review", "spec_probes"} & self.assists.on else ()
        if "spec_probes" in self.assists and (probes := contract_checks(contract, changed)):
            # a probe the policy would not run is no evidence either way: it neither passes nor blocks
            results += tuple(o for c in probes if (o := self._run(c, snap.digest, self.ctx)).ran)
            assist_acted(self.ctx, "spec_probes", ", ".join(c.shown or c.command for c in probes))
        results += tuple(o for c in self._bound_checks(changed) if (o := self._run(c, snap.digest, self.ctx)).ran)
        if "contract_review" not in self.assists:
            contract = ()
        blocking, preexisting = split_failures(results, self.baseline, unchanged=unchanged, request=self.request)
        self.last = GateFacts(digest=snap.digest, results=results, blocking=blocking, preexisting=preexisting,
                              tampered=tampered, unchanged=unchanged, kind=self.request.kind,
                              plan_empty=self.plan.empty, feedback=render_feedback(blocking, preexisting),
                              contract=contract)
        return self.last

    def _answer_facts(self, snap: Snapshot, unchanged: bool, claim: str) -> GateFacts:
        """A request for an answer: the workspace must be as it was (caches and ignored files do not count:
        the snapshot leaves them out). No check runs, unless the answer clears the code ("it is correct, no
        changes needed"): then the project's checks run, and a failing one contradicts it. Asked what is wrong
        ("tell me what is wrong with it"), an all-clear that no check contradicts is still no answer: no run
        can show that code has no flaw, and the request says it has one (``unfounded``)."""
        changed = () if unchanged else tuple(c.path for c in diff_snapshots(self.start, snap))
        results: tuple[CheckOutcome, ...] = ()
        gap = answer_gap(self.request, snap, claim) if unchanged and claim else ""
        clears = unchanged and bool(claim) and clears_the_code(claim)
        blames = not gap and unchanged and self.request.presumes_flaw and bool(errors_blamed(claim))
        if (clears or blames) and not self.plan.empty:
            results = tuple(self._run(c, snap.digest, self.ctx) for c in self._inferred())
        failing = tuple(o for o in results if o.ran and not o.passed)
        feedback = ", ".join(changed[:12]) if changed else render_feedback(failing, ())
        about = tuple(o for o in failing if speaks_of(self.request, o))
        if blames and (wrong := unshown_errors(claim, about, [_saved_output(o) for o in about])):
            gap, feedback = "wrong_error", f"{' and '.join(wrong)}, but the failing check shows:\n{feedback}"
        elif gap == "ungrounded":
            feedback = project_files(snap)
        unfounded = clears and self.request.presumes_flaw
        if unfounded and not failing and "trial_calls" in self.assists:
            feedback = self._trial_calls(snap)
        self.last = GateFacts(digest=snap.digest, results=results, unchanged=unchanged, kind="answer",
                              changed=changed, forbidden=self.request.forbids_change, feedback=feedback,
                              contradicted=clears and bool(failing), unfounded=unfounded, answer_gap=gap)
        return self.last

    def _trial_calls(self, snap: Snapshot) -> str:
        """What the reviewed files' functions return on small inputs (keel.verify.trial), run in a scratch
        copy: the files the request names, else the project's code files when there are few."""
        named = [f for f in self.request.files if f in snap.files]
        code = [f for f in sorted(snap.files) if f.endswith(".py") and is_code_file(f)]
        files = [f for f in named or (code if len(code) <= MAX_FILES else []) if is_code_file(f)][:MAX_FILES]
        planned = [(f, module, calls) for f in files if (module := module_name(f))
                   and (calls := trial_calls(snap.text(f) or ""))]
        if not planned:
            return ""
        printed = self.outputs_in_copy([trial_command(module, calls) for _, module, calls in planned])
        shown = [(path, out) for (path, _, _), out in zip(planned, printed, strict=True) if out is not None]
        assist_acted(self.ctx, "trial_calls", ", ".join(p for p, _ in shown) or "nothing ran")
        return trial_text(shown)

    def call_trace(self, outcomes: Sequence[CheckOutcome]) -> str:
        """What the project's functions got and returned while the failing tests of ``outcomes`` ran
        (keel.verify.calltrace), run again in a scratch copy; empty when there is nothing to show."""
        failing = [t for o in outcomes if o.ran and not o.passed for t in o.failing_tests if t not in o.unloaded]
        if not failing:
            return ""
        key = (take_snapshot(self.ctx.workspace).digest, tuple(failing))
        if key not in self._traces:
            ids = [t for t in failing if "::" in t and t.split("::")[0].endswith(".py")][:MAX_TESTS]
            js = [f for f in sorted(self.start.files) if is_test_file(f) and f.endswith(NODE_SUFFIXES)][:MAX_TESTS]
            commands = [python_command(ids)] if ids else [javascript_command(f) for f in js]
            printed = self.outputs_in_copy(commands, timeout_s=20, ok_codes=None) if commands else []
            self._traces[key] = render("".join(out or "" for out in printed), failing)
        return self._traces[key]

    def outputs_in_copy(self, commands: list[str], timeout_s: int = 10, ok_codes: tuple[int, ...] | None = (0,),
                        files: dict[str, str] | None = None) -> list[str | None]:
        """What each command prints, run in one scratch copy of the workspace (inside the sandbox, through
        the runner; the real workspace neither changed nor visible), with ``files`` (path -> text) written
        into the copy first; None for one that failed (an exit code not in ``ok_codes``; None: any), timed
        out or was refused."""
        printed: list[str | None] = []
        with self._scratch("run-") as (work, ctx):
            for path, text in (files or {}).items():
                target = work / path
                if target.resolve().is_relative_to(work.resolve()):   # a link the copy kept must not lead out
                    target.write_text(text, encoding="utf-8")
            for command in commands:
                result = run_shell(RunShellArgs(command=command, timeout=timeout_s), _checks_context(ctx))
                ran = result.check
                ok = ran is not None and not ran.timed_out and (ok_codes is None or ran.exit_code in ok_codes)
                printed.append(_STATUS_LINE.sub("", result.output, count=1) if ok else None)
        return printed

    def run_plan(self, on_result: Callable[[CheckOutcome], object] | None = None,
                 limit_s: float | None = None) -> tuple[CheckOutcome, ...]:
        """Every planned check once on the current files, in gate order (`keel checks --run`). ``limit_s``:
        each check's time limit, when shorter than its own (change_file's rewrites, as its candidates)."""
        snap = take_snapshot(self.ctx.workspace)
        digest, outcomes = snap.digest, []
        for check in (*self.plan.ordered(), *self._probes(self._changed(snap))):
            outcomes.append(self._run(check, digest, self.ctx, limit_s))
            if on_result is not None:
                on_result(outcomes[-1])
        return tuple(outcomes)

    def change_report(self) -> dict[str, Any]:
        """The closing self-check: what changed since the start (diffstat, one line per file), plus
        debug leftovers, stray generated files and changes the task does not seem to concern."""
        now = take_snapshot(self.ctx.workspace)
        changes = diff_snapshots(self.start, now)
        report = change_summary(changes)
        report["summary"] = render_changes(changes)   # one line per file: "M app.py (+2 -1)"
        report["debug_leftovers"] = debug_leftovers(changes, now)
        report["stray_files"] = stray_files(changes)
        report["unrelated"] = unrelated_changes(changes, self.request)
        report["runs_later"] = self._runs_later(changes)
        return report

    def _runs_later(self, changes: list[Any]) -> list[dict[str, Any]]:
        """Each change to other programs' run-later config in this run: what commands wrote (kept
        after a person's yes, or put back) and what stands changed now (an approved edit)."""
        seen = list(self.ctx.left_behind)
        named = {entry["path"] for entry in seen}
        seen += [{"path": c.path, "kept": True} for c in changes if c.path not in named and asks_about(c.path)]
        return seen

    # -- running ---------------------------------------------------------------------------------
    def _inferred(self) -> list[PlannedCheck]:
        return [c for c in self.plan.ordered() if c.category != "acceptance"]

    def _run_related_first(self, check: PlannedCheck, digest: str, related: list[str]) -> CheckOutcome:
        """For a test run that takes paths, the tests of the changed files first: when they fail,
        that is the feedback (the whole suite is not worth waiting for); else the whole suite."""
        if related and check.category == "test" and narrows_by_path(check.command):
            narrowed = dataclasses.replace(check, command=f"{check.command} {' '.join(map(shlex.quote, related))}")
            first = self._run(narrowed, digest, self.ctx)
            if first.ran and not first.passed:
                return dataclasses.replace(first, check=check)
        return self._run(check, digest, self.ctx)

    def _run(self, check: PlannedCheck, digest: str, ctx: ToolContext, limit_s: float | None = None) -> CheckOutcome:
        key = (check.command, digest)
        if key in self._cache:
            return self._cache[key]
        own = min(check.timeout_s or self.check_timeout_s, self.check_timeout_s)
        timeout = min(own, limit_s or own)
        started = time.monotonic()
        result = run_shell(RunShellArgs(command=check.command, timeout=max(1, int(timeout))), _checks_context(ctx))
        elapsed = time.monotonic() - started
        if result.check is None:  # refused by the policy, or it could not start: no evidence either way
            outcome = CheckOutcome(check, None, elapsed, digest, refused=result.output)
        else:
            outcome = self._judge_output(check, result.output, result.check, elapsed, digest, ctx.workspace)
        if not (outcome.timed_out and timeout < own):   # cut short by a caller's limit: the gate runs it in full
            self._cache[key] = outcome
        return outcome

    def _judge_output(self, check: PlannedCheck, output: str, ran: CheckRun, elapsed: float,
                      digest: str, workspace: Path) -> CheckOutcome:
        body = _STATUS_LINE.sub("", output, count=1)     # run_shell's first line is its exit status
        code, timed_out = ran.exit_code, ran.timed_out
        output_ok = not check.expect_output or check.expect_output in body
        path = self._save(check, output)
        counts = run_counts(body) if check.category in ("test", "acceptance") else None
        passed = counts.passed if counts is not None else None
        if code == 0 and not timed_out and output_ok:
            return CheckOutcome(check, code, elapsed, digest, output_path=path, tests_passed=passed)
        if code == 0 and not timed_out:
            summary = summarize_missing_output(check.command, body, check.expect_output or "")
        else:
            summary = summarize_failure(check.command, body, code, timed_out=timed_out,
                                        workspace=str(workspace))
        # what the sandbox caused, said by run_shell after the output: kept, or a refused bind reads as a bug
        said = [line for line in body.splitlines() if line.startswith(("[sandbox", "[keel "))]
        text = "\n".join([summary.text(), *said]) if said else summary.text()
        return CheckOutcome(check, code, elapsed, digest, timed_out=timed_out, output_ok=output_ok,
                            failing_tests=tuple(summary.failing_tests), summary=text, output_path=path,
                            tests_passed=passed, unloaded=summary.unloaded, details=summary.details)

    def _run_on_restored_tests(self, snap: Snapshot, tampered: tuple[str, ...]) -> tuple[CheckOutcome, ...]:
        """Run the plan on a copy of the workspace whose edited tests are put back as they were:
        the original tests are the evidence, whatever the agent did to its copies."""
        with self._scratch("restored-tests-") as (work, ctx):
            for path in tampered:
                original = self.start.text(path)
                target = work / path
                if original is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(original, encoding="utf-8")
            digest = snap.digest + ":restored"
            return tuple(self._run(c, digest, ctx) for c in self.plan.ordered())

    @contextmanager
    def trials(self, limit_s: float | None = None) -> Iterator[Callable[[str, str], tuple[CheckOutcome, ...]]]:
        """``trial(path, text)``: the plan's checks on a scratch copy of the workspace with ``path``
        holding ``text`` (change_file's candidates, keel.drive.candidates). The copy is made once for
        every text tried; the real workspace is neither changed nor visible to the runs. ``limit_s``:
        each check's time limit there, when shorter than its own."""
        snap = take_snapshot(self.ctx.workspace)
        digest, changed = snap.digest, self._changed(snap)
        with self._scratch("candidates-") as (work, ctx):
            def trial(path: str, text: str) -> tuple[CheckOutcome, ...]:
                target = work / path
                if not target.resolve().is_relative_to(work.resolve()):   # a link the copy kept must not lead out
                    raise ValueError(f"{path} is not inside the scratch copy")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                key = f"{digest}:{path}:{hashlib.sha256(text.encode()).hexdigest()}"
                probes = self._probes({**changed, path: text} if not is_test_file(path) else changed)
                return tuple(self._run(c, key, ctx, limit_s) for c in (*self.plan.ordered(), *probes))

            yield trial

    def _changed(self, snap: Snapshot, changes: list[FileChange] | None = None) -> dict[str, str]:
        """The source files the run changed (path -> text now): what the contract is read from.
        ``changes``: the diff from the start to ``snap``, when the caller has it already."""
        return {c.path: text for c in (changes if changes is not None else diff_snapshots(self.start, snap))
                if c.status != "deleted" and not is_test_file(c.path) and (text := snap.text(c.path)) is not None}

    def _probes(self, changed: dict[str, str]) -> list[PlannedCheck]:
        """The gate's probes of ``changed`` (spec_probes), for change_file's judge as for a claim: a rewrite
        the gate would refuse is no better than one the checks fail. Measured (py-discount-cent): the 1.5B's
        round() passed change_file's checks and was written, the gate refused it, and the same change sent
        again was refused as a repeat, since nothing had failed the call itself."""
        if not changed:
            return []
        bounds = self._bound_checks(changed)
        if "spec_probes" not in self.assists:
            return bounds
        return contract_checks(promises(self.request, changed), changed) + bounds

    def _bound_checks(self, changed: dict[str, str]) -> list[PlannedCheck]:
        """keel.verify.bounds: the documented ends of a range, tried on the code as it was (once per
        command: the start does not change) and checked on the code as it is. A gate rule, on for every
        profile."""
        if not changed:
            return []
        before = {p: self.start.text(p) for p in changed}
        restored = {p: t for p, t in before.items() if t is not None}
        tests = [t for f in sorted(self.start.files) if is_test_file(f) and (t := self.start.text(f))][:40]

        def record(command: str) -> str | None:
            if command not in self._records:
                self._records[command] = self.outputs_in_copy([command], timeout_s=30, files=restored)[0]
            return self._records[command]
        return bound_checks(changed, before, tests, self.request.text, record)

    @contextmanager
    def _scratch(self, prefix: str) -> Iterator[tuple[Path, ToolContext]]:
        """A copy of the workspace in keel's data dir (secrets empty, dependencies linked:
        keel.verify.scratch) and the context that runs in it, the real workspace hidden; removed after."""
        base = self.artifacts_dir or data_dir() / "scratch"   # keel's own data dir, never elsewhere
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        try:
            work = scratch / self.ctx.workspace.name
            copy_workspace(self.ctx.workspace, work)
            yield work, scratch_context(self.ctx, work)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _save(self, check: PlannedCheck, output: str) -> str | None:
        """Keep the full output of a check in keel's data dir; the pushback gives its path."""
        if self.artifacts_dir is None:
            return None
        self._saved += 1
        slug = re.sub(r"[^A-Za-z0-9]+", "-", check.command).strip("-")[:40] or "check"
        path = self.artifacts_dir / f"{self._saved:03d}-{check.category}-{slug}.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(output, encoding="utf-8")
        except OSError:
            return None
        return str(path)


def _saved_output(outcome: CheckOutcome, limit: int = 100_000) -> str:
    """The start of a check's saved output ("" when none was saved)."""
    if not outcome.output_path:
        return ""
    try:
        with open(outcome.output_path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return ""
