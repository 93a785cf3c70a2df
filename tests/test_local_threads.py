"""``local_threads = "auto"``: the physical cores other processes leave free (keel.engine.local_cpu)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from keel.config import EngineSettings
from keel.engine.local_cpu import ThreadFit, fitting_threads, physical_cores, read_cpuinfo

SMT_4 = "".join(f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu % 2}\n\n" for cpu in range(4))
TWO_SOCKETS = "".join(f"processor\t: {cpu}\nphysical id\t: {cpu // 2}\ncore id\t\t: 0\n\n" for cpu in range(4))
ARM = "processor\t: 0\nBogoMIPS\t: 48.00\n\nprocessor\t: 1\nBogoMIPS\t: 48.00\n"


def test_physical_cores_count_cores_not_hyperthreads() -> None:
    assert physical_cores(SMT_4, {0, 1, 2, 3}) == 2        # two cores with two threads each
    assert physical_cores(SMT_4, {0, 2}) == 1              # both usable CPUs are one core
    assert physical_cores(TWO_SOCKETS, {0, 1, 2, 3}) == 2  # core 0 of each package
    assert physical_cores(ARM, {0, 1}) == 2                # no core ids: the usable CPUs
    assert physical_cores("", set()) == 1


@pytest.mark.parametrize(("physical", "others", "expected"), [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 7.0, 1), (8, 2.2, 6), (8, -1.0, 8)])
def test_fitting_threads_leave_the_busy_cores_alone(physical: int, others: float, expected: int) -> None:
    assert fitting_threads(physical, others) == expected


def test_between_steps_sees_other_processes_keeping_every_core_busy() -> None:
    fit = ThreadFit(read_cpuinfo())
    fit.at_start()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(fit.physical)]
    try:
        time.sleep(2.0)
        busy = fit.between_steps(current=fit.physical)   # measured while they spin (not yet waited for)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    assert busy == 1
    assert fit.between_steps(current=7) == 7             # no time has passed: nothing to tell


def test_the_start_counts_processes_busy_now_and_not_one_that_has_ended() -> None:
    fit = ThreadFit(read_cpuinfo())
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(fit.physical)]
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert fit.at_start() == 1                        # every core is taken now
        assert time.monotonic() - started < 1.0           # a short look, not a wait
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    # They have ended: the load average still counts them for a minute; the start does not.
    assert fit.at_start() == fitting_threads(fit.physical, 0.0) or fit.physical == 1


def test_setting_accepts_auto_or_a_count() -> None:
    assert EngineSettings().local_threads == "auto"
    assert EngineSettings(local_threads=3).local_threads == 3
    with pytest.raises(ValueError):
        EngineSettings(local_threads=0)
    with pytest.raises(ValueError):
        EngineSettings(local_threads="many")
