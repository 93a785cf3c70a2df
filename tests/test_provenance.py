"""What served a run, on record: session_start and the result of `keel run` name the server, its
version, the model and (for a GGUF) its digests, for the scripted engine over real HTTP and for
llama-cpp-python's own OpenAI-compatible server started here on 127.0.0.1 with the 0.5B model (the
in-process engine: tests/test_local_smoke.py). `keel stats` shows the record; `keel eval compare`
says when two runs' setups differ."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import call, smoke_model
from phoenix_backend import free_port

from keel.engine.provenance import keel_version, setup_differences
from keel.eval.compare import compare, format_compare
from keel.testing.server import ScriptedEngineServer

ANSWER = [{"tool_calls": [call("finish", summary="add() returns a - b.")]}]
TASK = "explain the bug in calc.py"


def test_scripted_engine_run_records_its_serving(calc_repo, run_keel):
    text_call = {"content": "<tool_call>\n<function=read_file>\n<parameter=path>\ncalc.py\n</parameter>\n"
                            "</function>\n</tool_call>"}
    with ScriptedEngineServer([text_call, *ANSWER]) as server:
        r = run_keel("run", TASK, "--cwd", str(calc_repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json")
    assert r.code == 0, r.stderr
    start = next(e for e in r.events() if e["type"] == "session_start")["serving"]
    assert start["keel_version"] == keel_version() and start["engine"] == "http"
    assert (start["model"], start["model_id"], start["owned_by"]) == ("scripted", "scripted", "keel")
    assert start["server"] == "openai-compatible"   # the scripted server names no software: none is claimed
    assert start["sampling"] == {"temperature": 0.0, "seed": 1234, "max_tokens": 4096, "tool_choice": "auto",
                                 "stream": True}
    assert start["base_url"] == server.base_url
    assert r.result["serving"] == {**start, "tool_call_formats": {"qwen3_coder": 1, "structured": 1}}
    stats = run_keel("stats", r.result["session_id"])
    assert "serving" in stats.stdout and "openai-compatible" in stats.stdout and "qwen3_coder ×1" in stats.stdout


def _wait_up(url: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("llama_cpp.server did not answer")


@pytest.mark.timeout(900)
def test_llama_cpp_python_server_is_named_with_its_version(calc_repo, run_keel, keel_env, tmp_path):
    model = smoke_model()
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra is not installed "
                                                       "(pip install 'llama-cpp-python[server]')")
    import llama_cpp

    port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
                             "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ}, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_up(url, proc)
        # The record is made before the first model call; a short deadline keeps a CPU run brief.
        r = run_keel("run", TASK, "--cwd", str(calc_repo), "--base-url", url + "/v1", "--model", str(model),
                     "--max-steps", "1", "--max-seconds", "60", "--verify", "off", "--output-format", "json",
                     timeout=600)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    result = json.loads(r.stdout.strip().splitlines()[-1])
    start = next(e for e in r.events() if e["type"] == "session_start")["serving"]
    assert (start["server"], start["server_version"]) == ("llama-cpp-python", llama_cpp.__version__), start
    assert start["model_id"] == str(model) and start["owned_by"] == "me"
    assert result["serving"]["server"] == "llama-cpp-python"


@pytest.mark.timeout(600)
def test_keel_doctor_local_names_what_serves_the_model(run_keel):
    model = smoke_model()
    pytest.importorskip("llama_cpp", reason="keel[local] is not installed")
    import llama_cpp

    r = run_keel("doctor", "--local", str(model), timeout=500)
    [line] = [ln for ln in r.stdout.splitlines() if "serving" in ln]
    assert f"llama-cpp-python {llama_cpp.__version__}" in line and "gguf sha256" in line, r.stdout
    assert f"keel {keel_version()}" in line


def _records(serving: dict, outcome: str = "success") -> list[dict]:
    return [{"agent": "keel", "case": {"id": "c1"}, "repeat": 1, "outcome": outcome, "metrics": {},
             "serving": serving}]


def test_eval_compare_says_when_two_runs_setups_differ():
    a = {"engine": "http", "server": "llama.cpp", "server_version": "b6000", "model": "qwen", "quantization": "Q4_K_M",
         "chat_template_sha256": "aa", "context_window": 32768, "sampling": {"temperature": 0.0}, "keel_version": "0.1.0"}
    b = {**a, "server": "ollama", "server_version": "0.12.0", "chat_template_sha256": "bb", "context_window": 4096}
    assert setup_differences(a, dict(a)) == []
    text = format_compare(compare(_records(a), _records(b, "failed")), "A", "B")
    assert "setups differ: server: 'llama.cpp' -> 'ollama'" in text
    assert "setups differ: chat_template_sha256: 'aa' -> 'bb'" in text and "context_window: 32768 -> 4096" in text
    same = format_compare(compare(_records(a), _records(dict(a))), "A", "B")
    assert "setups differ" not in same


def test_a_run_whose_cases_had_two_setups_says_so():
    a = {"engine": "http", "server": "vllm", "model": "m"}
    rows = _records(a) + [{**_records({**a, "server_version": "0.11"})[0], "case": {"id": "c2"}}]
    result = compare(rows, _records(a))
    assert "run A itself mixes 2 setups" in result["agents"]["keel"]["setup_differences"]

