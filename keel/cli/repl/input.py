"""Reading what the person types: prompt_toolkit with a history file, multi-line entry and
slash-command completion.

Enter sends. A line ending in a backslash, or Esc then Enter (Alt-Enter), starts a new line
instead, so a long task can be typed over several lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys


class SlashCompleter(Completer):
    """Completes `/name` at the start of the input, with each command's one-line help."""

    def __init__(self, commands: Mapping[str, str]) -> None:
        self.commands = commands

    def get_completions(self, document: Document, _event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text or "\n" in text:
            return
        for name, help_text in self.commands.items():
            if name.startswith(text[1:]):
                yield Completion(name, start_position=-(len(text) - 1), display=f"/{name}", display_meta=help_text)


def key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.apply_completion(buf.complete_state.current_completion)
            return
        if buf.document.text_before_cursor.endswith("\\"):   # trailing backslash: go on on the next line
            buf.delete_before_cursor(1)
            buf.insert_text("\n")
            return
        buf.validate_and_handle()

    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


def history_for(path: Path | None) -> History:
    """The history file in keel's data directory; in memory when it cannot be written."""
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


class TaskInput:
    def __init__(self, commands: Mapping[str, str], history_path: Path | None,
                 toolbar: Callable[[], str] | None = None) -> None:
        self.session: PromptSession[str] = PromptSession(
            history=history_for(history_path), completer=SlashCompleter(commands), complete_while_typing=True,
            key_bindings=key_bindings(), multiline=True, prompt_continuation="… ",
            bottom_toolbar=toolbar)

    def read(self) -> str:
        """The next entry. Raises KeyboardInterrupt (Ctrl-C) and EOFError (Ctrl-D on an empty line)."""
        return self.session.prompt("keel> ")

    def ask(self, label: str) -> str:
        """A one-line answer, outside the task history."""
        answer: PromptSession[str] = PromptSession()
        return answer.prompt(label)

    def choose(self, label: str, keys: str, default: str | None = None) -> str:
        """One key of ``keys``, taken as it is pressed (approvals, --step pauses, plan approval), as
        in Codex and Claude Code; Enter picks ``default`` when there is one. Raises KeyboardInterrupt
        (Ctrl-C or Esc) and EOFError (Ctrl-D), which callers count as "no"."""
        return choice_session(keys, default).prompt(label)


def choice_session(keys: str, default: str | None) -> PromptSession[str]:
    kb = KeyBindings()

    @kb.add(Keys.Any)
    def _other(_event: KeyPressEvent) -> None:   # any other key does nothing (it is not typed in)
        return None

    def pick(key: str) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            event.app.current_buffer.text = key      # the answer stays on screen after the prompt
            event.app.exit(result=key)
        return handler

    for key in keys:
        kb.add(key)(pick(key))
        if key.upper() != key:
            kb.add(key.upper())(pick(key))
    if default is not None:
        kb.add("enter")(pick(default))
    else:
        kb.add("enter")(_other)

    @kb.add("c-c")
    @kb.add("escape", eager=True)   # Esc, as during a run: stop here (the caller's "no")
    def _interrupt(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt)

    @kb.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        event.app.exit(exception=EOFError)

    return PromptSession(key_bindings=kb)
