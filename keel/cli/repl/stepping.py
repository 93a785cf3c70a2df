"""--step mode: after each step that goes on, ask continue / abort / stop stepping.

The runner only calls ``after_step(step) -> bool`` (False stops the run like an interrupt); the
asking lives here, so the loop carries no UI.
"""

from __future__ import annotations

from collections.abc import Callable

QUESTION = "step {step} done · [c] continue   [a] abort the run   [s] stop stepping (run to the end)"


class StepPauser:
    def __init__(self, ask: Callable[[str], str], enabled: bool = True) -> None:
        self.ask = ask
        self.enabled = enabled

    def __call__(self, step: int) -> bool:
        if not self.enabled:
            return True
        while True:
            try:
                answer = self.ask(QUESTION.format(step=step)).strip().lower()
            except (EOFError, KeyboardInterrupt):
                return False   # Ctrl-C / Ctrl-D at the pause: the person wants out
            if answer in ("", "c", "continue"):
                return True
            if answer in ("a", "abort"):
                return False
            if answer in ("s", "stop", "stop stepping"):
                self.enabled = False
                return True
