"""Prompt texts shipped with keel. The system prompt is static (no dates, no paths) so every
session, in every project, shares one byte-identical prefix with the engine's prefix cache."""

from __future__ import annotations

from importlib import resources


def system_prompt(profile: str = "full", *, change_file: bool = True) -> str:
    """``small``: the short prompt of the slim tool set (keel.tools.small), written for 0.5–3B models;
    ``change_file`` False: that set without change_file (its assist off), so the prompt says edit_file."""
    name = "system_small.md" if profile == "small" else "system.md"
    text = resources.files("keel.engine.prompts").joinpath(name).read_text(encoding="utf-8")
    if profile == "small" and not change_file:
        text = text.replace(_WITH_CHANGE_FILE, _WITH_EDIT_FILE)
    return text


_WITH_CHANGE_FILE = ("2. Change it with change_file: give the file's path and say exactly what must change and why. "
                     "keel rewrites the file with your change and runs the project's tests.\n"
                     "3. If a test still fails, read the output and call change_file again, saying what is still wrong.")
_WITH_EDIT_FILE = ("2. Change it with edit_file: old_text copied exactly from the file, new_text what replaces it.\n"
                   "3. Run the project's tests with run_shell; if a test still fails, read the output and fix it.")


PRESENT = ("A person is present and reads your replies: ask with ask_user only when you cannot go on "
           "without their answer.")
ABSENT = "No one is available to answer questions unless you are told so."


def task_message(task: str, workspace: str, protection: str, top_level: list[str] | None = None, *,
                 attended: bool = False) -> str:
    """The first user message: the task, then facts about the workspace. A shallow listing saves a
    turn and keeps small models from guessing paths (e.g. tests/test_x.py for ./test_x.py).
    ``attended`` (the REPL, ACP, `--attended`): a person is there to answer, so the message says so."""
    listing = ""
    if top_level is not None:
        listing = "Top-level entries: " + (", ".join(top_level) if top_level else "(empty)") + "\n"
    return (f"{task.strip()}\n\n---\nWorkspace: {workspace} (tool paths are relative to it)\n{listing}"
            f"Command sandbox: {protection}\n{PRESENT if attended else ABSENT}")


def answer_note(forbidden: bool) -> str:
    """The first message's last words for a request that asks only for an answer (keel.core.request):
    the system prompt speaks of changing files, so say plainly that this one is answered in words."""
    why = "The user asked you not to change anything." if forbidden else "Nothing needs to change."
    return (f"This request asks for an answer, not a change. {why} Read what you need, change no file, "
            "and answer in your reply (or as finish's summary): that answer is what the user gets.")
