"""How long keel waits for an engine's reply: the run's deadline always wins.

Measured (keel issue 32): against a server that accepts the connection and never answers,
`keel run … --max-seconds 15` ran 901 s until killed (a 300 s read timeout per attempt, four attempts,
backoff between them); a reply delayed 40 s with `--max-seconds 5` stopped after 40.6 s.

The rules, for one streamed request:

- Before the reply's first byte, only the deadline and ``[engine] timeout_s`` bound the wait: a server
  on a CPU can be silent for minutes while it reads a long prompt. While it waits keel says so
  ("waiting for the engine (N s)", a ``waiting`` delta every ``NOTICE_EVERY_S``).
- After the first byte, a stream silent for ``[engine] idle_timeout_s`` counts as cut (retried like any
  cut stream); each read is also bounded by what the deadline leaves.
- A retry that the deadline would not leave time for is not made: keel waits out what is left of the
  wait the server asked for, and stops.

At the deadline the request stops with ``ReplyCut("deadline")``, the same way a streamed reply is cut
there (keel.engine.runaway): the loop then stops on the wall clock.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable

from keel.engine.assemble import TransientFailure
from keel.engine.runaway import ReplyCut
from keel.engine.types import DeltaCallback, StreamDelta

TICK_S = 0.5            # how often the wait looks at the clock
NOTICE_EVERY_S = 5.0    # how often it tells the front end it is still waiting


class ReplyClock:
    """The bounds of one request: its deadline (time.monotonic, or None) and the engine's timeouts."""

    def __init__(self, deadline: float | None, timeout_s: float, idle_timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline, self.timeout_s, self.idle_timeout_s, self.clock = deadline, timeout_s, idle_timeout_s, clock

    def left(self) -> float | None:
        """Seconds the deadline leaves (None: no deadline); raises ReplyCut once it has passed."""
        if self.deadline is None:
            return None
        left = self.deadline - self.clock()
        if left <= 0:
            raise ReplyCut("deadline")
        return left

    def capped(self, seconds: float) -> float:
        """``seconds``, or less when the deadline comes first."""
        left = self.left()
        return seconds if left is None else min(seconds, left)

    def wait_first_byte(self, sock: socket.socket, on_delta: DeltaCallback | None) -> None:
        """Return once the reply can be read; ReplyCut at the deadline, TransientFailure after timeout_s.
        Then each read may wait ``idle_timeout_s`` (or what the deadline leaves)."""
        started = self.clock()
        notice = NOTICE_EVERY_S
        while True:
            waited = self.clock() - started
            budget = self.capped(self.timeout_s - waited)
            if budget <= 0:
                raise TransientFailure(f"no reply within {self.timeout_s:g} s ([engine] timeout_s)")
            readable, _, _ = select.select([sock], [], [], min(TICK_S, budget))
            if readable:
                break
            waited = self.clock() - started
            if on_delta is not None and waited >= notice:
                on_delta(StreamDelta("waiting", str(int(waited))))
                notice += NOTICE_EVERY_S
        self.before_read(sock)

    def before_read(self, sock: socket.socket | None) -> None:
        """Bound the next read of the stream: the idle timeout, or what the deadline leaves."""
        if sock is not None:
            sock.settimeout(max(self.capped(self.idle_timeout_s), 0.001))

    def silent(self) -> Exception:
        """What a read that timed out means: the deadline came, or the stream went silent too long."""
        try:
            self.left()
        except ReplyCut as cut:
            return cut
        return TransientFailure(f"the reply stream was silent for {self.idle_timeout_s:g} s "
                                "([engine] idle_timeout_s)")

    def before_retry(self, delay: float, sleep: Callable[[float], None]) -> None:
        """When the wait before a retry would outlast the deadline, wait what is left (the server asked
        not to be called sooner) and stop with ReplyCut; else return, and the caller waits and retries."""
        left = self.left()
        if left is not None and delay >= left:
            sleep(left)
            raise ReplyCut("deadline")
