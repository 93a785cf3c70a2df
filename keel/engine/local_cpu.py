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
