"""The built-in tool set, in the order the model sees it (the order is part of the cached prefix)."""

from __future__ import annotations

from keel.tools.base import Tool


def default_tools() -> list[Tool]:
    from keel.tools.edit import EDIT_FILE
    from keel.tools.files import LIST_DIR, READ_FILE, WRITE_FILE
    from keel.tools.remember import REMEMBER
    from keel.tools.search import FIND_FILES, GREP
    from keel.tools.shell import RUN_SHELL
    from keel.tools.task import ASK_USER, FINISH, TODO_WRITE

    return [LIST_DIR, READ_FILE, FIND_FILES, GREP, EDIT_FILE, WRITE_FILE, RUN_SHELL, TODO_WRITE, REMEMBER,
            ASK_USER, FINISH]
