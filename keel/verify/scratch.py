"""The scratch copy of the workspace the gate runs checks in (its tests put back as they were), and
the sandbox those runs get: a copy, never the real workspace's hidden files.

The copy holds every file but git's data and caches; a secret-looking file (the one list,
keel.policy.paths) is copied as an empty file, as the bubblewrap tier shows it to commands, so no
second copy of a ``.env`` lands in keel's data dir. Installed dependencies (``node_modules``, a venv)
are linked, not copied: the checks need them. The runs hide the real workspace (its ``.env`` at its
real path was readable from the scratch run, issue 35) and may read only those dependency folders
of it (``SandboxPolicy.exposed``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from keel.policy.paths import is_secret_name
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext

LINKED_DIRS = ("node_modules", ".venv", "venv")


def _copy(source: str, target: str) -> str:
    if is_secret_name(source):
        with open(target, "wb"):      # empty, as bubblewrap shows it
            pass
        shutil.copymode(source, target)
        return target
    return shutil.copy2(source, target)


def copy_workspace(workspace: Path, work: Path) -> None:
    """Copy ``workspace`` to ``work`` (which must not exist): secrets empty, dependencies linked."""
    shutil.copytree(workspace, work, symlinks=True, copy_function=_copy,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", *LINKED_DIRS))
    for name in LINKED_DIRS:
        if (workspace / name).is_dir():
            (work / name).symlink_to(workspace / name, target_is_directory=True)


def scratch_context(ctx: ToolContext, work: Path) -> ToolContext:
    """``ctx`` for runs in the copy ``work`` of ``ctx.workspace``: the real workspace hidden from
    them, its dependency folders readable."""
    real = os.path.realpath(ctx.workspace)
    policy = ctx.sandbox if ctx.sandbox is not None else SandboxPolicy()
    exposed = tuple(os.path.join(real, n) for n in LINKED_DIRS if os.path.isdir(os.path.join(real, n)))
    sandbox = dataclasses.replace(policy, hide_paths=[*policy.hide_paths, real], exposed=(*policy.exposed, *exposed))
    return dataclasses.replace(ctx, workspace=work, sandbox=sandbox)
