"""`keel run` with no engine named anywhere: the in-process default model, when keel[local] is installed.

Nothing named means no --base-url / KEEL_BASE_URL / [engine] base_url, no model name and no --local:
a first run on a fresh machine. With llama-cpp-python there the run uses the embedded default and
says so on its first line; without it the "no engine URL" error names both ways (keel.agent).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from keel.config import Config

DEFAULT_NOTE = ("keel: no engine configured (--base-url or KEEL_BASE_URL for a server): running the default "
                "model, Qwen2.5-Coder-1.5B-Instruct, in this process (--local)")


def local_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def choose_default_engine(config: Config) -> str | None:
    """Point ``config`` at the in-process default model when it names no engine and keel[local] is
    installed; the line saying so, else None (the config is left as it was)."""
    from keel.engine.local_model import DEFAULT_LOCAL_MODEL

    engine = config.engine
    if engine.local_model is not None or engine.base_url or engine.model or not local_installed():
        return None
    engine.local_model = DEFAULT_LOCAL_MODEL
    return DEFAULT_NOTE


@contextmanager
def loading(config: Config, show: bool) -> Iterator[None]:
    """Say that the in-process model is loading (a 1.1 GB file: seconds to tens of seconds, minutes
    when it is first downloaded) and how long it took, on stderr; nothing for an HTTP engine."""
    if not show or config.engine.local_model is None:
        yield
        return
    started = time.monotonic()
    print("keel: loading the model into this process …", file=sys.stderr, flush=True)
    yield
    print(f"keel: model loaded ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
