"""llama.cpp's extra buffer types (AMX, repacking): off where AMX is advertised, as set otherwise."""

from __future__ import annotations

import pytest

from keel.config import EngineSettings
from keel.engine.local_cpu import amx_advertised, model_params, use_extra_buffers

XEON_AMX = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n"
            "flags\t\t: fpu avx2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8\n")
LAPTOP = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"


@pytest.mark.parametrize(("mode", "cpuinfo", "expected"), [
    ("auto", XEON_AMX, False),   # the segfaulting case: AMX advertised, maybe not enabled
    ("auto", LAPTOP, True),
    ("auto", ARM, True),
    ("auto", "", True),          # no /proc/cpuinfo (macOS, Windows)
    ("on", XEON_AMX, True),      # the user knows the host runs AMX
    ("off", LAPTOP, False),
])
def test_extra_buffers_decision(mode: str, cpuinfo: str, expected: bool) -> None:
    assert use_extra_buffers(mode, cpuinfo) is expected


def test_amx_is_read_from_the_flags_line_only() -> None:
    assert amx_advertised(XEON_AMX)
    assert not amx_advertised("model name\t: amx_tile lookalike\nflags\t\t: avx2\n")


def test_setting_is_validated() -> None:
    assert EngineSettings().local_extra_buffers == "auto"
    with pytest.raises(ValueError, match="local_extra_buffers"):
        EngineSettings(local_extra_buffers="maybe")


def test_model_params_sets_and_restores_the_bindings_defaults() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    low = llama_cpp.llama_cpp
    before = low.llama_model_default_params
    with model_params(llama_cpp, extra_buffers=False):
        assert low.llama_model_default_params().use_extra_bufts is False
    assert low.llama_model_default_params is before
    assert low.llama_model_default_params().use_extra_bufts is True
    with model_params(llama_cpp, extra_buffers=True):
        assert low.llama_model_default_params is before
