"""``python -m llama_cpp.server`` with keel's choice of llama.cpp's extra buffer types, so the peer
runs on the same kernels as keel's in-process engine (and does not segfault where AMX is advertised
but not enabled; see keel/engine/local_cpu.py). Arguments are the server's own."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llama_cpp  # noqa: E402

from keel.engine.local_cpu import model_params, read_cpuinfo, use_extra_buffers  # noqa: E402

if __name__ == "__main__":
    with model_params(llama_cpp, use_extra_buffers("auto", read_cpuinfo())):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
