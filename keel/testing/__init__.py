"""Scripted engines for tests: a real OpenAI-compatible HTTP server and an in-process model.

Names are resolved lazily so ``python -m keel.testing.server`` does not import the server module
twice, and importing the package starts nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # real types for checkers; at run time names load on first use
    from keel.testing.inprocess import ScriptedModel
    from keel.testing.script import ScriptError, ScriptStep, load_script
    from keel.testing.server import ScriptedEngineServer, serve_main

_EXPORTS = {
    "ScriptedEngineServer": "keel.testing.server",
    "serve_main": "keel.testing.server",
    "ScriptedModel": "keel.testing.inprocess",
    "ScriptError": "keel.testing.script",
    "ScriptStep": "keel.testing.script",
    "load_script": "keel.testing.script",
}

__all__ = ["ScriptError", "ScriptStep", "ScriptedEngineServer", "ScriptedModel", "load_script", "serve_main"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'keel.testing' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
