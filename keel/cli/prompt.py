"""Asking the person at the terminal: approvals and ask_user answers."""

from __future__ import annotations

import sys

from keel.cli.keys import paused


def terminal_prompt(question: str) -> str:
    """Show ``question`` on stderr and read one line from the terminal."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.output import create_output

    sys.stdout.flush()
    with paused():   # the run's key watch stands aside; keys typed before the question do not answer it
        sys.stderr.write("\n" + question + "\n")
        sys.stderr.flush()
        # stdout may be a pipe (json output); the prompt itself goes to the terminal via stderr
        session: PromptSession[str] = PromptSession(output=create_output(stdout=sys.stderr))
        return session.prompt("> ")
