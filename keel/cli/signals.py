"""SIGTERM and SIGHUP stop a run the way Ctrl-C does.

`timeout`, CI runners and process managers send SIGTERM; a closed terminal sends SIGHUP. Python's
default for both is to die on the spot: no `stop` event, no result, and a running shell command's
process tree left behind. Raising KeyboardInterrupt from the handler reuses the one interrupt path
the loop already has (every call answered, the command's tree killed, `stop` written, result
printed); the CLI then exits 128 + the signal number (143, 129) instead of 130.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from keel.engine.types import Usage

if TYPE_CHECKING:
    from keel.loop.result import RunResult

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


def interrupted_outside_loop(agent: Any) -> RunResult:
    """The result of a stop signal that came before the loop began (SessionStart hooks, the first
    checks, a slow workspace scan) or after it ended, where the loop's own handler is not: the
    session gets its `stop` event (else `keel log` calls it crashed) unless the loop wrote one."""
    from keel.loop.result import RunResult

    result = RunResult(status="incomplete", stop_reason="interrupted",
                       summary="interrupted before the first model call")
    if agent is None:  # the agent was still being built: there is no session yet
        return result
    result.session_id = agent.session_id
    result.log = str(agent.log_path) if agent.log_path else None
    recorder = agent.recorder
    if recorder is None or recorder.status == "running":
        agent.bus.emit("stop", step=0, status="incomplete", reason="interrupted", summary=result.summary,
                       usage=Usage().to_json(), cost_usd=0.0 if agent.config.prices.known else None)
    else:
        result.summary = "interrupted after the run stopped"
        result.status = "complete" if recorder.status == "complete" else "incomplete"
    with contextlib.suppress(Exception):  # closing MCP servers is best effort; the result must print
        agent.close()
    return result


def print_interrupted(output_format: str) -> None:
    """A stop signal that reached `keel run` outside everything else: json readers get a result."""
    if output_format == "text":
        return
    from keel.cli.render import print_json, result_object
    from keel.loop.result import RunResult

    print_json(result_object(RunResult(status="incomplete", stop_reason="interrupted"), output_format))
