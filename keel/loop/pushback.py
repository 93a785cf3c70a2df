"""Pushback wording. The more often a kind repeats, the more specific the text gets, because
a model that ignored a gentle nudge usually needs the exact next action spelled out."""

from __future__ import annotations

from keel.core.state import TaskState
from keel.verify.selfcheck import is_test_file


def _todo_lines(state: TaskState) -> str:
    return "\n".join(f"- [{t.status}] {t.content}" for t in state.unfinished_todos())


def _check_lines(state: TaskState, exercising: bool = False) -> str:
    """What ran since the last change and why it is not evidence, never "nothing ran" when something did.

    ``exercising``: keel found no check of the project's own, so only a passing command that runs a
    changed file (or imports its module) counts; say so for each passing command that does not."""
    failing = state.failing_checks_since_last_change()
    if failing:
        return "Checks that failed since your last change:\n" + "\n".join(
            f"- `{c.command}` exited {c.exit_code}" for c in failing)
    recent = state.checks_since_last_change()
    if recent and exercising:
        changed = ", ".join(state.files_changed[-8:])
        ran = "; ".join(f"`{c.command}` exited {c.exit_code}" for c in recent[-3:])
        return (f"Since your last change: {ran}. That is not evidence: keel found no tests or checks of this "
                f"project to run, so the evidence must run the code you changed ({changed}); "
                f"{'this command does' if len(recent[-3:]) == 1 else 'these commands do'} not run a changed file "
                "or import its module.")
    if state.checks and not recent:
        last = state.checks[-1]
        return f"No check has run since your last change (`{last.command}` ran before it)."
    return "No check has run since your last change."


def _restated(state: TaskState) -> str:
    """The task again, plus one concrete first call: what a small model that lost the thread needs."""
    if not state.task:
        return ""
    task = " ".join(state.task.split())
    task = task if len(task) <= 300 else task[:297] + "..."
    files = state.request.files
    first = f'read_file with {{"path": "{files[0]}"}}' if files else 'run_shell with {"command": "ls"}'
    return f"\nThe task is: {task}\nA good next call: {first}."


def pushback_text(kind: str, times_before: int, state: TaskState, detail: str = "") -> str:
    """The text for one pushback; ``detail`` carries facts such as the gate's failure summaries."""
    if kind in _GATE_KINDS:
        text = _gate_text(kind, min(times_before, 2), detail, state)
    else:
        text = _pushback_text(kind, min(times_before, 2), state, detail)
    # From the second repeat on, restate the task; the count keeps consecutive texts distinct.
    if times_before >= 1 and kind != "truncated":
        text += _restated(state)
    if times_before >= 2:
        text += f" (reminder {times_before + 1})"
    return text


def _offers(state: TaskState, tool: str) -> bool:
    return not state.tools or tool in state.tools   # unknown: the full tool set


def _changes_by_description(state: TaskState) -> bool:
    return "change_file" in state.tools


def _edit_tools(state: TaskState, joiner: str, close: str = "") -> str:
    """The tools that change files, as offered: change_file in the small profile."""
    if _changes_by_description(state):
        return "change_file"
    return f"edit_file{joiner}write_file{close}"


def _explore_tools(state: TaskState, joiner: str = ", ") -> str:
    names = [t for t in ("list_dir", "read_file", "grep") if _offers(state, t)]
    return joiner.join(names if joiner == ", " else [n for n in names if n != "read_file"] or names)


_GATE_KINDS = frozenset({"verification_failed", "no_change", "tampered_tests", "contract_review",
                         "changed_answer_only", "no_evidence", "answer_contradicted", "answer_unfounded",
                         "answer_reports_change", "answer_ungrounded", "answer_lists_parts", "answer_wrong_error"})


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrote_only_tests(state: TaskState) -> bool:
    """The task asks for tests, and every file the run changed is a test: failing checks are its tests' fault."""
    return (state.request.allows_test_changes and bool(state.files_changed)
            and all(is_test_file(f) for f in state.files_changed))


_ANSWER_GAPS = {
    "answer_reports_change": [
        "Your answer says a change was made, but no file in the workspace changed (and this request asks for "
        "none). Answer the question itself from what the files say: name the file and the function.",
        "Still an answer about a change nobody made. Say what the files show, naming them.",
        "Finishing with that answer is refused: nothing changed.",
    ],
    "answer_ungrounded": [
        "Your answer names nothing of this project: no file, function or term from its code. Read the files "
        "the question is about, then answer with what they contain, naming them (change no file).",
        "Still nothing of the project named. Name the file and the functions your answer is about.",
        "Finishing with that answer is refused: it names nothing of the project.",
    ],
    "answer_lists_parts": [
        "Your answer lists the project's files and names, but the question is what it does. Read the code and "
        "say what it does: what goes in, what it computes or changes, what comes out (change no file).",
        "Still only names. Say in plain words what the code does when it runs.",
        "Finishing with that answer is refused: it says what the project holds, not what it does.",
    ],
    "answer_wrong_error": [
        "Your answer blames an exception the failing check never raises. Read the failure below: the line "
        "and the values it shows are the cause to explain (change no file). Your answer named:",
        "The failing check still does not show the exception you blame. Explain what it does show. You named:",
        "Finishing with that answer is refused: the failing check contradicts it. You named:",
    ],
}


def _gate_text(kind: str, level: int, detail: str, state: TaskState) -> str:
    """Pushback for a completion claim the verification gate refused."""
    facts = f"\n{detail}" if detail else ""
    if kind == "contract_review":   # asked once (keel.verify.contract)
        return ("The checks pass. The task also says the code must do what these comments say, and the tests "
                "do not check every sentence of them. Read your code against each sentence: every rule, error "
                "and example; if it all holds, call finish again." + facts)   # a concrete next call comes last
    if kind == "no_change":
        return [
            "The task asks for a change, but no file in the workspace has changed: describing a fix is not "
            f"making it. Make the change with {_edit_tools(state, ' or ')}, run the check, then finish." + facts,
            "Still nothing has changed in the workspace, so the task is not done. Your next message must be "
            "a tool call: read the file the task concerns, then edit it." + facts,
            f"Finishing is refused: no file changed. Call {_edit_tools(state, ' (or ', ')')} on the file that needs the "
            "fix now." + facts,
        ][level]
    if kind == "changed_answer_only":
        request = state.request
        said = "the user said not to change anything" if request.forbids_change else "it asks only for an answer"
        changed = f" Changed: {detail}." if detail else ""
        return [
            f"This request asks for an answer in words, not a change ({said}: “{_short(request.why)}”), but files "
            f"in the workspace changed.{changed} Put them back exactly as they were, then answer in your reply.",
            f"The workspace still differs from how it started.{changed} Restore those files to their original "
            "content; the answer goes in your reply, not in a file.",
            f"Finishing is refused while files differ from the start ({said}).{changed} Restore them.",
        ][level]
    if kind == "answer_contradicted":   # an answer that clears the code while its checks fail
        return [
            "Your answer says nothing is wrong, but the project's checks fail on this code. Read the failing "
            "output and the code it points to, then answer again with what is wrong (change no file)." + facts,
            "The checks still fail, so \"nothing is wrong\" is not the answer. Say what the failure shows." + facts,
            "Finishing with that answer is refused while the checks fail." + facts,
        ][level]
    if kind == "answer_unfounded":   # asked what is wrong, answered "nothing" (Request.presumes_flaw)
        return [
            "The request says something is wrong, and your answer says nothing is. Nothing can show that code "
            "has no flaw. Read the code again against its docstrings and comments, sentence by sentence, and "
            "try the edge cases in your head (the first and the last item, page or index 1, an empty input). "
            "Then name what is wrong, with the line. Change no file." + facts,
            "Still no flaw named. Compare each line with what its docstring promises for the smallest inputs, "
            "and say which line breaks that promise and how." + facts,
            "Finishing with \"nothing is wrong\" is refused: the request says there is a flaw." + facts,
        ][level]
    if kind in _ANSWER_GAPS:   # an answer that does not rest on the project (keel.verify.grounding)
        return _ANSWER_GAPS[kind][level] + facts
    if kind == "no_evidence":
        return [
            "Nothing shows your change works: the project's checks fail as they did before you started, and "
            "no test passed. Make the failing checks pass, or add a test that exercises your change and passes, "
            "then finish." + facts,
            "Still no passing evidence: every check fails as it did at the start. Run the tests that exercise "
            "your change and make them pass." + facts,
            "Finishing is refused without a passing check after your change." + facts,
        ][level]
    if kind == "tampered_tests":
        return [
            "You changed existing tests or the acceptance script. Tests are the evidence: do not edit them to "
            "pass unless the task asks for it. Restore them and fix the code instead. The checks were run "
            "against the original tests:" + facts,
            "The original tests still decide. Put the tests back as they were and change the code under "
            "test." + facts,
            "Finishing is refused while tests are edited. Restore them, then fix the code." + facts,
        ][level]
    if _wrote_only_tests(state):
        # Measured (js-write-tests, 1.5B): its new test expected humanDuration(-1) to return where the code
        # throws; told to fix the code, which the task keeps, it claimed done three times with the test failing.
        return [
            "Not done yet: the tests you wrote fail on the code as it is." + facts + "\nThe task asks for tests, "
            "not a change to the code: a new test that fails expects something the code does not do. Read what "
            "the failure says the code returned or threw, check it against the doc comment, and change that "
            "test's expectation to match.",
            "Your tests still fail on the unchanged code." + facts + "\nChange the failing test itself: expect "
            "what the failure shows (an error the code throws is expected with assert.throws or pytest.raises).",
            "Finishing is refused while your tests fail." + facts + "\nFix the failing test's expectation, or "
            "remove that test.",
        ][level]
    return [
        "Not done yet: the project's checks fail on the current files." + facts + "\nFind the root cause "
        "before editing: read the failing test and the code it calls, fix the code, then finish again.",
        "The checks still fail." + facts + "\nDo not guess: read the code at the locations above, make one "
        "focused fix, then run the failing check yourself with run_shell before finishing.",
        "Finishing is refused while checks fail." + facts + "\nFix the first failure above, then run it "
        "yourself before finishing.",
    ][level]


def _answer_text(kind: str, level: int, state: TaskState, detail: str) -> str:
    """Pushback for a request that asks for an answer (keel.core.request): look first, or answer."""
    if kind == "did_nothing":    # a question: looking is worth one reminder, no more
        return ("You answered without looking at the workspace. If the question is about this project, read the "
                f"files it concerns first ({_explore_tools(state)}), then answer; if it needs no file, answer again.")
    return [
        f"This request asks for an answer, and your reply is {detail}. Answer the question itself now, in "
        "your reply (or finish's summary): what it asks, in plain words, from what you found.",
        f"Still no answer ({detail}). Nobody will reply to a question, and work you promise is not done: "
        "read what you need with the tools, then write the answer.",
        f"Write the answer now ({detail} again): the facts the question asks for, in a few sentences.",
    ][level]


def _pushback_text(kind: str, level: int, state: TaskState, detail: str = "") -> str:
    changed = ", ".join(state.files_changed[-8:]) or "none"
    if kind == "question_unattended":
        return [
            "No one is here to answer questions. Make a reasonable assumption, state it, and continue the task.",
            "Nobody will reply. Do not ask again: pick the most reasonable option yourself, say which one in "
            "one sentence, and make your next message a tool call that carries the task forward.",
            "STOP ASKING. There is no user. Your next message must be a tool call (for example read_file, "
            "edit_file or run_shell) that makes progress on the task.",
        ][level]
    if kind == "recheck_answer":   # asked once (Request.asks_flaws)
        return ("The request asks what is wrong, and your answer says nothing is. Before that stands, read the "
                "code again against its docstrings and comments, sentence by sentence, and try the edge cases "
                "in your head (the first and the last item, page or index 1, an empty input). Then answer: name "
                "what is wrong, or say why each part is right. Change no file.")
    if kind == "no_answer" or (kind == "did_nothing" and detail == "answer"):
        return _answer_text(kind, level, state, detail)
    if kind == "no_change":   # the gate off (--verify off): the same rule as the gate's
        return _gate_text(kind, level, detail, state)
    if kind == "did_nothing":
        return [
            f"You have not done anything yet. Inspect the workspace ({_explore_tools(state)}) and carry out "
            "the task before finishing.",
            f"The task is not done: no tool has been used. Start with {_explore_tools(state, ' or ')} to find the "
            "relevant files, then read and change them.",
            "Call a tool now. " + ("Begin with list_dir(path=\".\"), then read" if _offers(state, "list_dir")
                                   else "Read") + " the files the task names.",
        ][level]
    if kind == "unfinished_todos":
        return [
            "Your todo list still has unfinished items:\n" + _todo_lines(state)
            + "\nFinish them, or update the list with todo_write if they no longer apply.",
            "You tried to finish with open todos again:\n" + _todo_lines(state)
            + "\nWork on the first one now. If an item is obsolete, mark it done with todo_write and say why.",
            "Finishing is refused while todos are open:\n" + _todo_lines(state)
            + "\nCall todo_write with the real status of every item, then continue the first pending one.",
        ][level]
    if kind == "unverified":
        checks = _check_lines(state, exercising=detail == "no_plan")
        return [
            f"You changed files ({changed}) but have not verified the result. {checks} Run the project's "
            "tests or run the changed code (run_shell), fix any failure, then finish.",
            f"Not verified yet. {checks} Run the relevant check now, for example `python -m pytest -q` or "
            "the command that exercises your change, and only finish once it exits 0. A command piped into "
            "another (`| tail`) reports the last command's status, so run the check on its own.",
            f"Finishing is refused without passing evidence. {checks} Your next message must be a run_shell "
            "call that runs the tests; if they fail, fix the code and run them again.",
        ][level]
    if kind == "truncated":
        if detail == "call":      # the text stopped inside a call (finish "stop"): no output limit to blame
            return ("Your reply ended inside a tool call (its text stopped before the call's closing tag or "
                    "brace), so nothing ran. Send the call again, complete, as one tool call; write a long file "
                    "in parts (write_file with the first part, then edit_file).")
        if detail == "repeating":   # measured: a 1.5B model's new_text repeating one added line until cut
            how = ("change_file's change is a sentence or two, and keel writes the file" if _changes_by_description(state)
                   else "in an edit, old_text is only the lines to change and new_text only their replacement, "
                        "each line once")
            return f"Your reply was cut off because it kept repeating the same lines; nothing ran. Make one short " \
                   f"tool call: {how}."
        return ("Your reply was cut off at the output-token limit. Continue with a shorter reply: one tool "
                "call at a time, and no long prose.")
    if kind == "malformed_call":
        return [
            "Your reply looks like a tool call written as text; it was not run. Call tools through the "
            "tool-calling interface: the tool's name plus a JSON object of arguments, e.g. read_file with "
            '{"path": "calc.py"}.',
            "That was text again, not a tool call, so nothing ran. Emit exactly one structured tool call, e.g. "
            'run_shell with {"command": "ls"}. Do not write the call inside your message text.',
            'Nothing ran: write no prose, make one structured tool call such as run_shell {"command": "ls"}.',
        ][level]
    if kind == "empty_reply":
        return [
            "Your reply was empty. Continue the task: call a tool, or finish with a summary if it is done.",
            "Empty reply again. Make your next message one tool call that moves the task forward.",
            "Reply with exactly one tool call now, e.g. read_file or run_shell.",
        ][level]
    return "Continue the task."
