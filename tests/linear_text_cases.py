"""Every function of keel that runs regular expressions (or similar scans) over text from outside —
the task, files of the project, tool output, model output — and the pathological inputs that made
backtracking regexes super-linear (keel issue 22: a 200,000-character one-word task hung the
self-check for minutes). Shared by tests/test_linear_text.py and bench/linear_text.py.

find_edit's not-found diagnosis compares characters with difflib, quadratic in one long line (a 20 kB
minified line took 171 s); it compares at most keel.tools.edit_lines.SIMILARITY_CAP characters in at
most SIMILARITY_WINDOWS windows.
"""

from __future__ import annotations

from collections.abc import Callable

from keel.context.output import OutputFacts, reduced_view
from keel.context.secrets import secret_kind
from keel.context.tokens import TokenCounter
from keel.core.request import parse_request, words
from keel.core.state import TaskState
from keel.drive.move import move_asked, retarget
from keel.drive.refactor import RefactorError, anchor, follow_names, js_rename, js_specifiers
from keel.drive.rename import renames_in
from keel.drive.rewrite import asked_gone, extract_file
from keel.engine.runaway import ReplyWatch, repeated_lines, repeating_tail
from keel.ext.plan import plan_todos
from keel.loop.decider import is_question
from keel.loop.pushback import pushback_text
from keel.outputs.checks import whole_test_run
from keel.outputs.counts import run_counts
from keel.outputs.failure_parsers.common import clean_lines
from keel.outputs.failure_parsers.diagnostics import find_diagnostics
from keel.outputs.summarize import summarize_failure
from keel.tools.edit_lines import collapse, lenient, strong_key
from keel.tools.edit_match import find_edit
from keel.verify.acceptance import acceptance_checks, looks_like_command
from keel.verify.answer import answer_problem
from keel.verify.contract import doc_comments, promises, review_text, spelled_out
from keel.verify.detect.agents_md import commands_in_markdown
from keel.verify.detect.commands import categorize, context_category, mentions_check
from keel.verify.detect.makefile import parse_rules
from keel.verify.failing import failing_assertion
from keel.verify.probes import contract_checks
from keel.verify.redirect import modules_under_test
from keel.verify.selfcheck import unrelated_changes
from keel.verify.snapshot import FileChange


def pathological(size: int) -> dict[str, str]:
    """Inputs of about ``size`` characters that drive backtracking regexes to their worst case."""
    def rep(unit: str) -> str:
        return unit * max(1, size // len(unit))
    return {
        "one long word": rep("a"),
        "long path word": rep("a/"),
        "dotted word": rep("a."),
        "snake word": rep("a_"),
        "camel word": rep("aB"),
        "dashed word": rep("a-"),
        "deep nesting": rep("("),
        "repeated separators": rep(":"),
        "spaces": rep(" "),
        "blank lines": rep("\n"),
        "tabs then text": rep("\t") + "x",
        "many <": rep("<"),
        "many {": rep("{"),
        "unterminated quote": '"' + rep("a"),
        "many backticks": rep("`"),
        "unterminated fence": "```py\n" + rep("x = 1\n"),
        "many unclosed fences": rep("```a\n"),
        "many tildes": rep("~"),
        "digits": rep("0"),
        "digit dots": rep("0."),
        "url-like": "a://" + rep("b:"),
        "secret-like name": rep("token"),
        "repeated words": rep("add the "),
        "repeated rename wording": rep("rename the constant "),
        "repeated arrows": rep("a -> "),
        "repeated imports": rep("from a import ("),
        "an import, then a long blank line": "import " + rep(" \t") + "\nimport a\n",   # move.py's old _PY_IMPORT
        "repeated assertions": rep("E   assert "),
        "many distinct names": " ".join(f"name_{i}()" for i in range(size // 12 + 1))[:size],
    }


def _changes(text: str) -> list[FileChange]:
    return [FileChange("src/app.py", "modified", 1, 0, (text[:100],), (1,)),
            FileChange("lib/other.py", "modified", 1, 0, ("x = 1",), (1,))]


def _reduced(text: str) -> str:
    facts = OutputFacts(command="python -m pytest", output=text, total_bytes=len(text), exit_code=1)
    return reduced_view(facts, "/tmp/out.txt")


def _success_digest(text: str) -> str:
    lines = "\n".join([text, *(f"line {i}" for i in range(300))])
    facts = OutputFacts(command="make", output=lines, total_bytes=len(lines), exit_code=0)
    return reduced_view(facts, "/tmp/out.txt")


def _js_rename(text: str) -> str:
    try:
        return js_rename(text, "a", "b")
    except RefactorError:   # most of these do not parse: refused, after the parse
        return text


def _watch(text: str) -> object:
    watch = ReplyWatch()
    for i in range(0, len(text), 4096):
        if watch.feed(text[i:i + 4096]):
            break
    return None


# name -> function of one text. Each is public API (or the one public entry that reaches the regexes).
FUNCTIONS: dict[str, Callable[[str], object]] = {
    "request.parse_request (the one reading of the task)": parse_request,
    "selfcheck.unrelated_changes (task tokenizer)": lambda t: unrelated_changes(_changes(t), parse_request(t)),
    "request.concerns": lambda t: parse_request(t).concerns("test", ("tests/test_a.py::test_b",)),
    "request.allows_test_changes": lambda t: parse_request(t).allows_test_changes,
    "rewrite.asked_gone (a change note)": lambda t: asked_gone("a", t) or asked_gone("remove", "remove " + t),
    "request.spec_documents": lambda t: parse_request(t + " the exercise in " + t + ".md").spec_documents,
    "request.moves and renames": lambda t: (parse_request(t).moves, parse_request(t).renames),
    "acceptance.acceptance_checks": lambda t: acceptance_checks(parse_request(t)),
    "answer.answer_problem (a model's answer)": answer_problem,
    "counts.run_counts (test runner output)": run_counts,
    "checks.whole_test_run (a command)": whole_test_run,
    "acceptance.looks_like_command": looks_like_command,
    "pushback.pushback_text (restated task)": lambda t: pushback_text("gate", 2, TaskState(task=t)),
    "decider.is_question": is_question,
    "request.words": words,
    "secrets.secret_kind": secret_kind,
    "summarize.summarize_failure": lambda t: summarize_failure("python -m pytest", t, 1),
    "failure_parsers.find_diagnostics": lambda t: find_diagnostics(clean_lines(t)),
    "output.reduced_view (failure)": _reduced,
    "output.reduced_view (success digest)": _success_digest,
    "tokens.TokenCounter.count": lambda t: TokenCounter().count([t]),
    "runaway.repeating_tail": repeating_tail,
    "runaway.repeated_lines": repeated_lines,
    "runaway.ReplyWatch.feed": _watch,
    "change.extract_file (model reply)": extract_file,
    "edit_lines normalizers": lambda t: (collapse(t), lenient(t), strong_key(t)),
    "edit_match.find_edit (not found, in a file of one long line)": lambda t: find_edit(t, t[::-1][:20_000] + "z", "x"),
    "plan.plan_todos": plan_todos,
    "agents_md.commands_in_markdown": lambda t: commands_in_markdown(t, "AGENTS.md"),
    "detect.commands categorize/context": lambda t: (categorize(t, t), context_category(t), mentions_check(t)),
    "makefile.parse_rules": parse_rules,
    "rename.renames_in (task and change note)": renames_in,
    "redirect.modules_under_test (test file text)": lambda t: modules_under_test("test_a.py", t, {"a.py", "b.py"}),
    "contract.doc_comments (a JS file)": lambda t: doc_comments("a.js", t),
    "contract.promises (the task, a Python file)": lambda t: review_text(
        promises(parse_request(t + " as the docstring says f()"), {"a.py": t}), change_tool=True),
    "contract.spelled_out (a comment's sentence)": spelled_out,
    "probes.contract_checks (a JS file's comments)": lambda t: contract_checks(
        promises(parse_request(t + " as the comment says f()"), {"a.js": t}), {"a.js": t}),
    "move.move_asked (task and change note)": lambda t: move_asked("lib/a.js", t, parse_request(t)),
    "move.retarget (a JS file)": lambda t: retarget(t, "lib/b.js", "lib/a.js", "lib/c.js"),
    "refactor.anchor, follow_names (a Python file)": lambda t: (anchor(t, "a"), follow_names(t, "a", "b")),
    "refactor.js_specifiers, js_rename (a JS file)": lambda t: (js_specifiers(t), _js_rename(t)),
    "failing.failing_assertion (check output)": lambda t: failing_assertion(t, {"test_a.py": t[:1000]}),
}

