"""Whether llama.cpp may use its CPU "extra buffer types" (weight repacking and Intel AMX kernels).

Why this exists: on a virtual machine whose CPU advertises AMX (``amx_tile`` in /proc/cpuinfo)
but whose hypervisor does not enable the AMX tile state, llama.cpp built with ``-march=native``
puts the weights in its AMX buffers and the first prompt dies with SIGSEGV in
``ggml_backend_amx_mul_mat`` (``ldtilecfg``; measured here on a Xeon VM, every model, every
prompt). A segfault ends the keel process before any result or log line is written, so "auto"
turns the extra buffers off wherever AMX is advertised; the ordinary AVX2/AVX-512 kernels remain
(a 512-token prompt of the 1.5B model read in 4.4 s on 2 threads with them off). "on" is for a host
known to run AMX; "off" for any other build that crashes the same way.

llama-cpp-python has no constructor argument for ``llama_model_params.use_extra_bufts``, so the
shell below sets it on the default parameters ``Llama`` starts from, for that one call.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")


def amx_advertised(cpuinfo: str) -> bool:
    """Whether a /proc/cpuinfo text lists any AMX flag."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return any(f in flags for f in AMX_FLAGS)
    return False


def use_extra_buffers(mode: str, cpuinfo: str) -> bool:
    """The decision: "on"/"off" as given; "auto" = off where AMX is advertised, else on."""
    if mode in ("on", "off"):
        return mode == "on"
    return not amx_advertised(cpuinfo)


def read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:   # not Linux: no AMX question to ask
        return ""


@contextlib.contextmanager
def model_params(llama_cpp: Any, extra_buffers: bool) -> Iterator[None]:
    """While inside, ``Llama(...)`` starts from model parameters with ``use_extra_bufts`` as given."""
    low = llama_cpp.llama_cpp
    original = low.llama_model_default_params
    if extra_buffers or not hasattr(original(), "use_extra_bufts"):   # older bindings: nothing to set
        yield
        return

    def defaults() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = defaults
    try:
        yield
    finally:
        low.llama_model_default_params = original


# ---- threads that fit the machine ------------------------------------------------------------
# llama.cpp's threads spin-wait for each other at every step, so a thread that has no core to
# itself stalls all the others: on 2 shared cores, 2 threads decoded 6x slower than 1 while
# another process was busy, and 2 were faster than 1 on an idle machine (measured, 0.5B model).
# "auto" therefore counts the cores other processes are using and takes the rest.


def physical_cores(cpuinfo: str, usable: set[int]) -> int:
    """Distinct (package, core) pairs among the CPUs this process may run on; SMT siblings share a
    core and add little to llama.cpp. Without core ids (VMs, ARM, not Linux): the usable count."""
    cores, cpu, package = set(), None, "0"
    for line in cpuinfo.splitlines():
        name, _, value = (part.strip() for part in line.partition(":"))
        if name == "processor":
            cpu = int(value) if value.isdigit() else None
        elif name == "physical id":
            package = value
        elif name == "core id" and cpu in usable:
            cores.add((package, value))
    return max(1, len(cores) if cores else len(usable))


def fitting_threads(physical: int, others_busy: float) -> int:
    """Threads for ``physical`` cores while other processes keep ``others_busy`` cores busy: the
    cores left, rounded to the nearest whole core, at least one."""
    free = physical - max(0.0, others_busy)
    return max(1, min(physical, int(free + 0.5)))


def read_loadavg(path: Path = Path("/proc/loadavg")) -> float | None:
    """The 1-minute load average (runnable processes), or None where there is none."""
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_busy_s(path: Path = Path("/proc/stat")) -> float | None:
    """Seconds all CPUs spent busy since boot (everything but idle and iowait)."""
    try:
        fields = [int(x) for x in path.read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()   # this process and its waited-for children (the tools keel ran)
    return t.user + t.system + t.children_user + t.children_system


START_WINDOW_S = 0.3   # how long the start looks at the machine: ~60 clock ticks on 2 CPUs


class ThreadFit:
    """The "auto" thread count: the CPU time the machine spent busy over an interval, less keel's
    own (its decoding and the tools it ran), per second of wall time — at the start over a short
    window, between steps since the last look. Not the load average: it still counts, for about a
    minute, a process that has ended (measured: in a batch, the run before made "auto" pick 1 thread
    on an idle 2-core machine), and between steps it counted keel's own decoding as load."""

    def __init__(self, cpuinfo: str) -> None:
        usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
        self.physical = physical_cores(cpuinfo, set(usable))
        self._mark: tuple[float, float, float] | None = None

    def at_start(self) -> int:
        if self._look() is None:   # no /proc/stat: the load average is all there is
            load = read_loadavg()
            return fitting_threads(self.physical, load if load is not None else 0.0)
        time.sleep(START_WINDOW_S)
        return self.between_steps(self.physical, min_interval=START_WINDOW_S)

    def between_steps(self, current: int, min_interval: float = 1.0) -> int:
        before, after = self._mark, self._look()
        if before is None or after is None or after[0] - before[0] < min_interval:
            return current   # too short an interval to tell
        wall = after[0] - before[0]
        others = ((after[1] - before[1]) - (after[2] - before[2])) / wall
        return fitting_threads(self.physical, others)

    def _look(self) -> tuple[float, float, float] | None:
        busy = _cpu_busy_s()
        self._mark = None if busy is None else (time.monotonic(), busy, _own_cpu_s())
        return self._mark
