"""Token counts follow the engine's own: when the server counts twice the tokens keel estimates (a
denser tokenizer), keel learns it from the reported prompt_tokens and compacts in time, so no request
goes over the window as the server counts it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import call

from keel.testing.server import ScriptedEngineServer

WINDOW = 16_000


def _run(calc_repo: Path, keel_env, run_keel, server_chars_per_token: int, monkeypatch) -> tuple[list, list, int]:
    monkeypatch.setattr("keel.testing.script.CHARS_PER_TOKEN", server_chars_per_token)   # the server's tokenizer
    for i in range(4):   # ~1,000 tokens each by keel's estimate
        (calc_repo / f"data{i}.txt").write_text("".join(f"row {i}.{j}: a measured value\n" for j in range(150)))
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[context]\nsummarizer = "deterministic"\n')
    script = [{"tool_calls": [call("read_file", path=f"data{i}.txt")]} for i in range(4)]
    script.append({"tool_calls": [call("finish", summary="read them all")]})
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "read the data files", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--verify", "off",
                     "--context-window", str(WINDOW))
        requests = server.requests
    assert r.code == 0, r.stderr
    events = r.events()
    compactions = [e for e in events if e["type"] == "compaction"]
    sizes = [len(json.dumps(q["messages"], separators=(",", ":"))) + len(json.dumps(q.get("tools") or [],
             separators=(",", ":"))) for q in requests]
    return compactions, [s // server_chars_per_token + q["max_tokens"] for s, q in zip(sizes, requests,
                                                                                         strict=True)], len(requests)


def test_a_denser_server_tokenizer_makes_keel_compact_in_time(calc_repo, keel_env, run_keel, monkeypatch):
    compactions, needed, sent = _run(calc_repo, keel_env, run_keel, 2, monkeypatch)
    assert sent == 5
    assert compactions, "keel kept estimating 4 characters a token although the server reported 2"
    assert max(needed) <= WINDOW, needed


def test_the_same_session_fits_without_compaction_when_the_counts_agree(calc_repo, keel_env, run_keel, monkeypatch):
    compactions, needed, _ = _run(calc_repo, keel_env, run_keel, 4, monkeypatch)
    assert not compactions and max(needed) <= WINDOW
    # the same requests counted at 2 characters a token would not have fitted: the first test needs calibration
    assert 2 * (max(needed) - WINDOW // 4) > WINDOW, needed
