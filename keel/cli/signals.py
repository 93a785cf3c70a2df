"""SIGTERM and SIGHUP stop a run the way Ctrl-C does.

`timeout`, CI runners and process managers send SIGTERM; a closed terminal sends SIGHUP. Python's
default for both is to die on the spot: no `stop` event, no result, and a running shell command's
process tree left behind. Raising KeyboardInterrupt from the handler reuses the one interrupt path
the loop already has (every call answered, the command's tree killed, `stop` written, result
printed); the CLI then exits 128 + the signal number (143, 129) instead of 130.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class SignalStop:
    """Remembers which signal asked the run to stop; later ones are ignored so cleanup can finish."""

    def __init__(self) -> None:
        self.received: int | None = None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None:
            return  # already stopping: a second TERM must not cut the cleanup short
        self.received = signum
        raise KeyboardInterrupt

    def exit_code(self, default: int = 130) -> int:
        return 128 + self.received if self.received is not None else default


@contextmanager
def stop_on_signals() -> Iterator[SignalStop]:
    state = SignalStop()
    # A signal already ignored stays ignored: `nohup keel run …` must survive the hangup.
    previous = {sig: signal.signal(sig, state.handle) for sig in STOP_SIGNALS
                if signal.getsignal(sig) is not signal.SIG_IGN}
    # A blocked signal is not a choice but a leak: a parent's mask is inherited through exec, and
    # a blocked SIGTERM would leave keel deaf to its process manager. Handled means unblocked.
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, set(previous)) if previous else None
    try:
        yield state
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
