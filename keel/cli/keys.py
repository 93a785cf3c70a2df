"""The keyboard while a run goes on in a terminal: nothing typed is echoed into the output, Esc
stops the run as Ctrl-C does, and a question asked meanwhile (an approval, a --step pause) gets the
keys pressed after it was shown, never ones typed before.

During a run the terminal is put in no-echo, non-canonical mode and a thread reads what is typed:
a lone Esc sends SIGINT to this process (the loop's own interrupt path: the running command's tree
is killed, every call answered); anything else is dropped. Ctrl-C stays the terminal's own signal.
A prompt shown during the run pauses the reader (``paused``) and starts from an empty input queue.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import termios
import threading
from collections.abc import Iterator

ESC = b"\x1b"
SEQUENCE_WAIT_S = 0.05   # an Esc followed this soon by more bytes is an arrow key or the like
_active: KeyWatch | None = None


class KeyWatch:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()   # held by the reader while it may read; a prompt takes it to pause it
        self.paused = False
        self.stop = threading.Event()

    def _read(self) -> bytes:
        with self.lock:
            if self.paused or not select.select([self.fd], [], [], 0.1)[0]:
                return b""
            data = os.read(self.fd, 1024)
            if data == ESC and select.select([self.fd], [], [], SEQUENCE_WAIT_S)[0]:
                data += os.read(self.fd, 1024)   # the rest of an escape sequence: not Esc alone
            return data

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                data = self._read()
            except OSError:
                return
            if self.paused:
                self.stop.wait(0.05)
            elif data == ESC:
                os.kill(os.getpid(), signal.SIGINT)   # as Ctrl-C: the loop stops the run


@contextlib.contextmanager
def watching(fd: int = 0) -> Iterator[None]:
    """Watch the keyboard for the length of a run (a no-op when ``fd`` is not a terminal)."""
    global _active
    if not os.isatty(fd) or _active is not None:
        yield
        return
    before = termios.tcgetattr(fd)
    quiet = list(before)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    watch = KeyWatch(fd)
    thread = threading.Thread(target=watch._run, name="keel-keys", daemon=True)
    _active = watch
    thread.start()
    try:
        yield
    finally:
        watch.stop.set()
        thread.join(1.0)
        _active = None
        with contextlib.suppress(termios.error):
            termios.tcflush(fd, termios.TCIFLUSH)   # keys typed during the run are not the next task
            termios.tcsetattr(fd, termios.TCSANOW, before)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Around a prompt shown during a run: the reader stands aside and keys typed before the
    question was shown are dropped, so none of them answers it."""
    watch = _active
    if watch is None:
        yield
        return
    with watch.lock:
        watch.paused = True
        with contextlib.suppress(termios.error):
            termios.tcflush(watch.fd, termios.TCIFLUSH)
    try:
        yield
    finally:
        watch.paused = False
