"""The one read decision: may the model see a workspace file's content, or its name?

Every path that sends a file's bytes or names to the model asks here, or asks the approval gate
this wraps (keel.policy.approval): read_file, grep, list_dir, find_files, change_file and its editor
request, edit_file's near-miss lines, a move and the rename spread, the compaction record, the first
message's preloaded files, MCP resources, and the diffs in the event log. A delegate's sub-agent uses
the parent's tools, so the same. Three answers:

- ``shows(real)``: content may go to the model unasked (no ``read(...)`` rule asks or denies, and the
  file does not look like a secret: keel.policy.paths.SECRET_PATTERNS). What walks use: they never
  ask a person per file;
- ``Approver.authorize_read``: the one-file tools put a file that does not ``show`` to the person
  (once or for the session), or refuse it when no one is present;
- ``hides_name(real)``: a ``read(...)`` deny rule covers the file, so not even its name is listed
  (a secret-looking name alone is listed: it says the file exists, not what it holds).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.policy.paths import is_secret_path


def shows(approval: Any) -> Callable[[Path], bool]:
    """Whether a file's content may go to the model unasked, under ``approval`` (None: no gate,
    so only secret-looking files are kept back)."""
    decide = getattr(approval, "reads_without_asking", None)
    if decide is not None:
        return decide
    return lambda real: not is_secret_path(real)


def hides_name(approval: Any) -> Callable[[Path], bool]:
    """Whether a ``read(...)`` deny rule keeps even the file's name from the model."""
    decide = getattr(approval, "read_denied", None)
    if decide is not None:
        return decide
    return lambda _real: False


def read_refusal(approval: Any, shown: str, real: Path) -> str | None:
    """None when the model may read ``real`` (a person may have been asked), else why not. With a gate
    every read goes to it, so ``read(...)`` rules apply to all files; without one, a secret-looking
    file is refused (no one can approve it)."""
    authorize = getattr(approval, "authorize_read", None)
    if authorize is None:
        if is_secret_path(real):
            return (f"{shown} looks like a secret file (keys, tokens or passwords); reading it requires "
                    "approval, and this session has no way to ask for it.")
        return None
    outcome = authorize(shown)
    return None if outcome.allowed else str(outcome.message)
