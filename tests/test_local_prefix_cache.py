"""The prefix cache on disk (keel.engine.prefix_cache, keel.engine.local_prefix).

The pure part (keys, entry format, eviction) on real files; the engine part with the real 0.5B
GGUF in fresh processes, as a second run of keel would be: it skips, saying why, when
KEEL_SMOKE_MODEL is unset or llama-cpp-python is missing (like tests/test_local_smoke.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import smoke_model

from keel.engine.prefix_cache import CacheKey, PrefixCache, evictions, model_digest, token_digest

ROOT = Path(__file__).resolve().parent.parent
TOKENS = list(range(100, 300))


def key(model: str = "m" * 64, tokens: list[int] = TOKENS, n_ctx: int = 4096) -> CacheKey:
    return CacheKey(model=model, prefix=token_digest(tokens), n_ctx=n_ctx, keel="0.1", llama_cpp="0.3.36")


def test_an_entry_comes_back_only_for_its_own_key(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, 16)
    state = os.urandom(100_000)
    assert cache.save(key(), TOKENS, state)
    assert cache.load(key()) == (TOKENS, state)
    assert cache.load(key(n_ctx=8192)) is None                  # another context size: another file
    assert cache.load(key(model="n" * 64)) is None              # another model: another directory
    assert len(list(tmp_path.glob("*/*.kv"))) == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_corrupt_entry_is_ignored_and_removed(tmp_path: Path, damage: str) -> None:
    cache = PrefixCache(tmp_path, 16)
    cache.save(key(), TOKENS, os.urandom(50_000))
    path = cache.path(key())
    blob = path.read_bytes()
    broken = {"truncate": blob[:-1000], "flip": blob[:-10] + bytes(10), "garbage": os.urandom(len(blob)),
              "empty": b""}[damage]
    path.write_bytes(broken)
    assert cache.load(key()) is None
    assert not path.exists()


def test_an_entry_written_under_another_key_is_not_used(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, 16)
    cache.save(key(model="n" * 64), TOKENS, b"x" * 1000)
    cache.path(key()).parent.mkdir(parents=True)
    shutil.copy(cache.path(key(model="n" * 64)), cache.path(key()))
    assert cache.load(key()) is None      # the header names the other model


def test_eviction_keeps_the_total_under_the_cap_oldest_first(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, 1)    # 1 MiB: three entries of 300 kB fit, four do not
    keys = [key(tokens=[i] * 100) for i in range(3)]
    for i, k in enumerate(keys):
        assert cache.save(k, [i] * 100, os.urandom(300_000))
        os.utime(cache.path(k), (1000 + i, 1000 + i))     # a definite age order, whatever the clock
    cache.load(keys[0])                                   # a hit makes the oldest the newest
    cache.save(key(tokens=[9] * 100), [9] * 100, os.urandom(300_000))
    left = {p.name for p in tmp_path.glob("*/*.kv")}
    assert sum(p.stat().st_size for p in tmp_path.glob("*/*.kv")) <= 1024 * 1024
    assert cache.path(keys[0]).name in left and cache.path(keys[1]).name not in left
    assert not cache.save(key(tokens=[8] * 100), [8] * 100, os.urandom(2_000_000))   # bigger than the cap
    assert not PrefixCache(tmp_path, 0).save(key(tokens=[7] * 100), [7] * 100, b"x")   # 0 = off


def test_a_temp_file_of_a_killed_writer_is_removed_once_stale(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, 16)
    folder = cache.path(key()).parent
    folder.mkdir(parents=True)
    stale, fresh = folder / ".a.kv.0000.keel-tmp", folder / ".b.kv.1111.keel-tmp"
    stale.write_bytes(b"x" * 1000)
    fresh.write_bytes(b"x" * 1000)
    os.utime(stale, (1000, 1000))
    cache.save(key(), TOKENS, b"state")
    assert not stale.exists() and fresh.exists()     # a write in progress is left alone


def test_evictions_is_oldest_first_until_it_fits() -> None:
    entries = [("a", 10, 3.0), ("b", 10, 1.0), ("c", 10, 2.0)]
    assert evictions(entries, 30) == []
    assert evictions(entries, 25) == ["b"]
    assert evictions(entries, 5) == ["b", "c", "a"]


def test_model_digest_follows_the_file(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + os.urandom(3 << 20))
    first = model_digest(model)
    assert model_digest(model) == first
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(model, copy)
    os.utime(copy, ns=(1, 1))
    assert model_digest(copy) != first                # same bytes, another file: not trusted as the same
    with model.open("r+b") as fh:                     # the tail changes, size and mtime restored
        st = model.stat()
        fh.seek(-5, os.SEEK_END)
        fh.write(b"xxxxx")
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model_digest(model) != first


# ---- the engine, on the real 0.5B model, one fresh process per run ---------------------------

RUN = """
import json, sys
from pathlib import Path
from keel.engine.local import LocalEngine
from keel.engine.prefix_cache import PrefixCache
model, root, cap, task = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
engine = LocalEngine(model, n_ctx=2048, max_tokens=24, n_threads=1, prefix_cache=PrefixCache(root, cap))
tools = [{"type": "function", "function": {"name": n, "description": f"{n} a file of the project",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
         for n in ("read_file", "write_file", "finish")]
messages = [{"role": "system", "content": "You are a careful coding agent. Call one tool at a time. " * 12},
            {"role": "user", "content": task}]
turn = engine.complete(messages, tools)
print(json.dumps({"content": turn.content, "prompt": turn.usage.prompt_tokens, "cached": turn.usage.cached_tokens,
                  "evaluated": engine.evaluated_tokens}))
"""
TASK = "Fix the bug in calc.py: add() subtracts."
OTHER_TASK = "Rename the function parse() in reader.py to parse_line() and update its callers."


def run(model: Path, root: Path, cap_mb: int = 512, task: str = TASK) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, str(model), str(root), str(cap_mb), task], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def entries(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.kv"))


@pytest.mark.timeout(1800)
def test_a_second_process_reads_only_the_new_tokens_and_replies_the_same(tmp_path: Path) -> None:
    model, cache = smoke_model(), tmp_path / "cache"
    plain = run(model, tmp_path / "off", cap_mb=0)
    assert plain["cached"] == 0 and not (tmp_path / "off").exists()
    first = run(model, cache)
    assert first["cached"] == 0 and len(entries(cache)) == 2       # the static prefix and the whole prompt
    one_run = sum(p.stat().st_size for p in entries(cache))
    again = run(model, cache)                                       # the same task again: all but one token
    assert again["cached"] == again["prompt"] - 1 and again["evaluated"] == 1, again
    other = run(model, cache, task=OTHER_TASK)                      # another task: the static prefix
    assert 0.8 * other["prompt"] < other["cached"] < other["prompt"] - 8, other
    assert again["content"] == first["content"] == plain["content"]
    assert other["content"] == run(model, tmp_path / "off", cap_mb=0, task=OTHER_TASK)["content"]

    saved = {p: p.read_bytes() for p in entries(cache)}
    for path, blob in saved.items():                                # corrupt KV bytes in every entry
        path.write_bytes(blob[: len(blob) // 2] + bytes(len(blob) - len(blob) // 2))
    damaged = run(model, cache)
    assert damaged["cached"] == 0 and damaged["content"] == plain["content"]        # ignored, read afresh
    # this task's two entries were removed and saved again, the same bytes; the other task's is not read yet
    assert sum(p.read_bytes() == saved.get(p) for p in entries(cache)) == 2

    copy = tmp_path / "other-model.gguf"                  # the same bytes as another file: another digest
    shutil.copyfile(model, copy)
    elsewhere = run(copy, cache)
    assert elsewhere["cached"] == 0 and elsewhere["content"] == plain["content"]
    assert len({p.parent for p in entries(cache)}) == 2                # one directory per model

    cap = (one_run >> 20) + 1                                          # room for one run's entries, not two
    run(model, tmp_path / "small", cap_mb=cap)
    run(copy, tmp_path / "small", cap_mb=cap)
    left = entries(tmp_path / "small")
    assert sum(p.stat().st_size for p in left) <= cap << 20
    assert len(left) == 2 and len({p.parent for p in left}) == 1     # the older model's entries went first
