"""The approval gate: turns policy verdicts and user rules into "run it" or "don't".

Modes:

- ``interactive``: ask-class requests are put to the person (once / always this session / no);
  file edits ask too, until the person answers "always".
- ``auto-edit``: file edits inside the workspace proceed; ask-class commands are still put to
  the person (refused, as unattended, when no one can answer). Earlier keel versions gave this
  name what ``full-auto`` does now: a config that still says it gets the safer meaning.
- ``full-auto``: file edits and ask-class commands proceed; deny-class never does. Only under an OS
  tier that confines commands (bubblewrap or Landlock): asked for without one it is an error, never
  a silent downgrade, because the policy alone is all that would stand between the model and the host.
- ``unattended`` (headless default): file edits inside the workspace proceed; ask-class
  commands are refused with a message the model can act on; deny-class is refused with its reason.

Reading a secret-looking file (.env, *.pem, id_rsa ...) always needs a person or a ``read(...)``
allow rule, in every mode: auto-approval is for changes the person can review, and a secret read
into the model's context cannot be taken back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from keel.policy.paths import PathJailError, display_path, is_secret_path, resolve_in_workspace
from keel.policy.rules import Rule, RuleSet, ShellEvaluation
from keel.policy.shell.paths import runs_later
from keel.policy.shell.risk import PartReport

Mode = Literal["interactive", "auto-edit", "full-auto", "unattended"]
MODES = ("interactive", "auto-edit", "full-auto", "unattended")
FULL_AUTO_NEEDS_TIER = ("approval mode full-auto runs ask-class commands without asking, so it needs an OS "
                        "sandbox tier that confines them (bubblewrap or Landlock), and none does here")
# Tools whose second word names what they do: "always" remembers both words (npm install, git push).
_SUBCOMMAND_TOOLS = frozenset({"git", "npm", "yarn", "pnpm", "pip", "pip3", "uv", "poetry", "cargo", "go",
                               "docker", "podman", "kubectl", "apt", "apt-get", "brew", "make", "dnf", "gem",
                               "conda", "systemctl", "python", "python3"})
_NO_ONE_HERE = ("Use the file tools to edit files; run only read-only commands and the project's checks.")


@dataclass(frozen=True)
class ApprovalOutcome:
    allowed: bool
    message: str              # for the model: why it was refused / how it was approved
    decision: str             # the policy's class for the request: "allow" | "ask" | "deny"
    network: bool = False     # the sandbox should let this command reach the network


PREVIEW_INDENT = "  │ "   # each line of a question's preview (a diff) starts with it; a command's own lines do not


def question(head: str, preview: str, options: str) -> str:
    """An approval question as the person sees it: what keel wants and why (``head``), the change it
    would make (``preview``, a unified diff, may be empty), then the answers."""
    body = "".join(f"\n{PREVIEW_INDENT}{line}" for line in preview.rstrip("\n").splitlines()) if preview else ""
    return f"{head}{body}\n  {options}"


def _shown(preview: Callable[[], str] | None) -> str:
    if preview is None:
        return ""
    try:
        return preview()
    except Exception as exc:  # a preview that breaks must not lose the question
        return f"(no diff shown: {exc})"


def question_parts(text: str) -> tuple[str, str, str]:
    """(head, preview, options) of a ``question`` — front ends show each its own way (the REPL
    colours the diff, ACP sends the change as a diff of its own)."""
    lines = text.splitlines()
    options = lines.pop() if lines and "[y]" in lines[-1] else ""
    head = [line for line in lines if not line.startswith(PREVIEW_INDENT)]
    preview = [line[len(PREVIEW_INDENT):] for line in lines if line.startswith(PREVIEW_INDENT)]
    return "\n".join(head), "\n".join(preview), options.strip()


def remembered_prefix(part: PartReport) -> list[str]:
    """The words an "always" answer covers: ``npm install`` for ``npm install left-pad``."""
    words = part.words
    if len(words) > 1 and os.path.basename(words[0]) in _SUBCOMMAND_TOOLS and not words[1].startswith("-"):
        return words[:2]
    return words[:1]


class Approver:
    def __init__(self, mode: Mode, rules: RuleSet | None = None, *, workspace: Path,
                 prompt: Callable[[str], str] | None = None, confined: bool = False,
                 pid_namespace: bool = False, snapshot: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"approval mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "full-auto" and not confined:
            raise ValueError(FULL_AUTO_NEEDS_TIER)
        self.mode = mode
        self.rules = rules if rules is not None else RuleSet()
        self.workspace = Path(os.path.realpath(workspace))
        self.prompt = prompt
        self.confined = confined          # an OS tier confines the filesystem: workspace-write applies
        self.pid_namespace = pid_namespace  # a PID namespace reaps detached processes (bubblewrap)
        # keel snapshots the workspace before each command (keel.trace.snapshot): a deletion it holds is
        # undoable; the shell watch turns this off when the workspace is over the snapshot caps
        self.snapshot = snapshot
        # What "always" answers unlock for the rest of this session.
        self._session = RuleSet(allow=list(self.rules.allow), ask=list(self.rules.ask), deny=list(self.rules.deny))
        self._always_commands: set[str] = set()
        self._always_edit = False
        self._always_read: set[Path] = set()

    # -- shell ---------------------------------------------------------------------------------

    def authorize_shell(self, command: str) -> ApprovalOutcome:
        try:
            evaluation = self._session.evaluate_shell(command, self.workspace, confined=self.confined,
                                                      pid_namespace=self.pid_namespace, snapshot=self.snapshot)
        except Exception as exc:  # never fail open: a gate that breaks refuses
            return ApprovalOutcome(False, f"refused: the command could not be checked ({exc!r})", "ask")
        verdict = evaluation.verdict
        if verdict.decision == "deny":
            return ApprovalOutcome(False, f"refused: {verdict.reason} (part: {verdict.part}). This command "
                                          "is never run; find another way that stays inside the workspace.", "deny")
        if verdict.decision == "allow":
            return ApprovalOutcome(True, "allowed", "allow", network=evaluation.network)
        if command.strip() in self._always_commands:
            return ApprovalOutcome(True, "approved for this session", "ask", network=evaluation.network)
        if self.mode == "full-auto":
            return ApprovalOutcome(True, f"auto-approved: {verdict.reason}", "ask", network=evaluation.network)
        if self.mode == "unattended" or self.prompt is None:
            return ApprovalOutcome(False, f"refused: `{command.strip()}` needs approval ({verdict.reason}) and no one "
                                          f"is present. {_NO_ONE_HERE}", "ask")
        return self._ask_shell(command, evaluation)

    def _ask_shell(self, command: str, evaluation: ShellEvaluation) -> ApprovalOutcome:
        verdict = evaluation.verdict
        prefixes = {tuple(remembered_prefix(p)) for p in evaluation.asking_parts if p.words}
        always = " and ".join(f"`{' '.join(p)} …`" for p in sorted(prefixes)) or "this exact command"
        answer = self._ask(question(f"keel wants to run: {command.strip()}\n"
                                    f"  needs approval: {verdict.reason} (part: {verdict.part})", "",
                                    f"[y] yes, once   [a] always allow {always} this session   [n] no"))
        if answer in ("y", "yes", "o", "once"):
            return ApprovalOutcome(True, "approved once by the user", "ask", network=evaluation.network)
        if answer in ("a", "always"):
            for prefix in prefixes:
                self._session.add_allow(Rule("shell", f"shell({' '.join(prefix)}:*)", prefix, prefix=True))
            self._always_commands.add(command.strip())
            return ApprovalOutcome(True, "approved for this session by the user", "ask", network=evaluation.network)
        return ApprovalOutcome(False, f"refused by the user: `{command.strip()}`. Do not retry it; ask or "
                                      "choose another approach.", "ask")

    # -- files ---------------------------------------------------------------------------------

    def authorize_edit(self, path: str, preview: Callable[[], str] | None = None) -> ApprovalOutcome:
        """``preview``: makes the change as a unified diff, put in front of the person with the question."""
        try:
            real = resolve_in_workspace(self.workspace, path, for_write=True)
        except PathJailError as exc:
            return ApprovalOutcome(False, f"refused: {exc}", "deny")
        shown = display_path(self.workspace, real)
        decision, rule = self._session.path_decision("edit", real, self.workspace)
        if decision == "deny":
            return ApprovalOutcome(False, f"refused: editing {shown} is denied by rule {rule}", "deny")
        # Files that make other programs run commands later (.envrc, .claude/, .git/hooks ...): a
        # person or an edit(...) allow rule decides, in every mode, like a secret read.
        later = decision is None and runs_later(real, self.workspace)
        if decision == "allow" or (decision is None and not later
                                   and (self.mode != "interactive" or self._always_edit)):
            return ApprovalOutcome(True, "allowed", "allow")
        why = f"rule {rule} asks before editing it" if decision == "ask" else \
            "other programs run commands from this file" if later else "file edits need approval"
        outcome, always = self._ask_path("edit", shown, why, "edits", "Leave this file unchanged.", preview)
        if always and decision is None and not later:
            self._always_edit = True
        return outcome

    def reads_without_asking(self, real: Path) -> bool:
        """Whether reading ``real`` (resolved, in the workspace) goes ahead with no one asked: what
        keel may show the model unprompted (keel.policy.reads: walks, previews) without bypassing a rule."""
        decision, _rule = self._session.path_decision("read", real, self.workspace)
        if decision == "deny":
            return False
        return decision == "allow" or real in self._always_read or (decision is None and not is_secret_path(real))

    def read_denied(self, real: Path) -> bool:
        """Whether a ``read(...)`` deny rule covers ``real``: not even its name is listed."""
        return self._session.path_decision("read", real, self.workspace)[0] == "deny"

    def authorize_read(self, path: str) -> ApprovalOutcome:
        try:
            real = resolve_in_workspace(self.workspace, path)
        except PathJailError as exc:
            return ApprovalOutcome(False, f"refused: {exc}", "deny")
        shown = display_path(self.workspace, real)
        decision, rule = self._session.path_decision("read", real, self.workspace)
        if decision == "deny":
            return ApprovalOutcome(False, f"refused: reading {shown} is denied by rule {rule}", "deny")
        if decision == "allow" or real in self._always_read:
            return ApprovalOutcome(True, "allowed", "allow")
        if decision is None and not is_secret_path(real):
            return ApprovalOutcome(True, "allowed", "allow")
        why = f"rule {rule} asks before reading it" if decision == "ask" else "it looks like a secret"
        outcome, always = self._ask_path("read", shown, why, "this file", "Work without its contents.")
        if always:
            self._always_read.add(real)
        return outcome

    def authorize_exposure(self, command: str, why: str) -> ApprovalOutcome:
        """A command the tier cannot hide every secret file from: a person decides, in every mode
        (as for a secret read); with no one present it is refused."""
        if self.prompt is None or self.mode == "unattended":
            return ApprovalOutcome(False, f"refused: `{command.strip()}` would run where keel cannot hide the "
                                          f"workspace's secret files ({why}) and no one is present to allow it. "
                                          "Use the file tools instead.", "ask")
        answer = self._ask(f"keel wants to run: {command.strip()}\n  but cannot hide the workspace's secret files "
                           f"from it: {why}\n  [y] yes, once   [n] no")
        if answer in ("y", "yes", "o", "once"):
            return ApprovalOutcome(True, "approved once by the user", "ask")
        return ApprovalOutcome(False, f"refused by the user: `{command.strip()}`.", "ask")

    def _ask_path(self, verb: str, shown: str, why: str, always_scope: str,
                  if_absent: str, preview: Callable[[], str] | None = None) -> tuple[ApprovalOutcome, bool]:
        """Put an ask-class file request to the person; returns the outcome and whether it was "always"."""
        gerund = {"edit": "editing", "read": "reading"}[verb]
        if self.prompt is None or self.mode == "unattended":
            return ApprovalOutcome(False, f"refused: {gerund} {shown} needs approval ({why}) and no one is "
                                          f"present. {if_absent}", "ask"), False
        answer = self._ask(question(f"keel wants to {verb} {shown} ({why})", _shown(preview),
                                    f"[y] yes, once   [a] always allow {always_scope} this session   [n] no"))
        if answer in ("y", "yes", "o", "once"):
            return ApprovalOutcome(True, "approved once by the user", "ask"), False
        if answer in ("a", "always"):
            return ApprovalOutcome(True, "approved for this session by the user", "ask"), True
        return ApprovalOutcome(False, f"refused by the user: do not {verb} {shown}.", "ask"), False

    def _ask(self, question: str) -> str:
        """The person's answer, normalised; anything unexpected (or no input) counts as "no". An
        interrupt (Ctrl-C or Esc at the question, an editor's cancel) is not an answer: it stops the
        run, and is recorded as a cancel, not as a refusal (keel.trace.approvals)."""
        assert self.prompt is not None
        try:
            answer = self.prompt(question)
        except EOFError:
            return "n"
        return answer.strip().lower() if isinstance(answer, str) else "n"
