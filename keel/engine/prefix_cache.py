"""The static prompt prefix's KV state on disk, so a new run of the in-process engine starts warm.

Why: every run's first prompt begins with the same ~1,150 tokens (the chat template's head, the
system prompt and the tool schemas); on a 2-core laptop CPU their cold prefill took 29–56 s of
every run. llama.cpp can export one sequence's KV cells (``llama_state_seq_get_data``) and import
them into a fresh context; this module decides where such a state lives and whether a stored one
may be used. The engine (keel.engine.local, local_prefix) does the llama.cpp calls and keeps two
entries per first prompt: the static prefix (any task) and the whole prompt (the same task again).

An entry is one file ``<data dir>/prefix-cache/<model digest>/<key digest>.kv``:
``MAGIC``, a 4-byte header length, a JSON header (the full key, the prefix tokens, the state's
length and sha256), then the state bytes. It is used only when every key field matches and the
bytes hash to what the header says; anything else (a truncated, corrupt, foreign or older file)
is a miss, logged at debug level and removed. Entries are bounded in total size and evicted least
recently used first (a hit refreshes the file's mtime).

The key: the model file's digest (see ``model_digest``), the prefix tokens' digest, the context
size, keel's version and llama-cpp-python's version (the state layout belongs to the llama.cpp
build it comes with). A state is therefore never loaded into another model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import time
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from keel.core.files import write_atomic

log = logging.getLogger(__name__)

MAGIC = b"KEELKV01"
SUFFIX = ".kv"
EDGE_BYTES = 1 << 20            # the model digest reads this much from each end of the file
MIN_PREFIX_TOKENS = 64          # a shorter prefix is cheaper to evaluate than to read from disk
STALE_TMP_S = 3600              # a temp file this old is no write in progress


class CacheMiss(Exception):
    """A stored entry that cannot be used; the message says why (for the debug line)."""


@dataclass(frozen=True)
class CacheKey:
    model: str          # model_digest() of the GGUF file
    prefix: str         # token_digest() of the prefix tokens
    n_ctx: int
    keel: str
    llama_cpp: str

    def file_name(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:32] + SUFFIX


def model_digest(path: Path) -> str:
    """A digest naming one model file without reading all of it (1 GB would take seconds on every
    start): its size, its mtime in ns, and the sha256 of its first and last MiB (the GGUF header
    with the metadata and tensor table, and the end of the last tensor). Replacing the file with a
    different model changes the size, the header or at least the mtime, so the digest changes."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:".encode())
    with path.open("rb") as fh:
        h.update(fh.read(EDGE_BYTES))
        fh.seek(max(0, st.st_size - EDGE_BYTES))
        h.update(fh.read(EDGE_BYTES))
    return h.hexdigest()


def token_digest(tokens: Sequence[int]) -> str:
    return hashlib.sha256(array("i", tokens).tobytes()).hexdigest()


def encode_entry(key: CacheKey, tokens: Sequence[int], state: bytes) -> bytes:
    header = json.dumps({"key": asdict(key), "tokens": list(tokens), "state_len": len(state),
                         "state_sha256": hashlib.sha256(state).hexdigest()}).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + state


def decode_entry(blob: bytes, key: CacheKey) -> tuple[list[int], bytes]:
    """The prefix tokens and the state stored in ``blob``, if it is an intact entry for ``key``."""
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 4:
        raise CacheMiss("not a keel prefix-cache file (bad magic)")
    (size,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(blob[start:start + size])
        stored_key, tokens = CacheKey(**header["key"]), [int(t) for t in header["tokens"]]
        state_len, state_sha = int(header["state_len"]), str(header["state_sha256"])
    except (ValueError, TypeError, KeyError) as e:
        raise CacheMiss(f"unreadable header ({type(e).__name__}: {e})") from None
    if stored_key != key:
        diff = sorted(k for k, v in asdict(key).items() if asdict(stored_key)[k] != v)
        raise CacheMiss(f"stored for another key (differs in {', '.join(diff)})")
    if token_digest(tokens) != key.prefix:
        raise CacheMiss("the stored tokens do not match their digest")
    state = blob[start + size:]
    if len(state) != state_len:
        raise CacheMiss(f"truncated: {len(state)} of {state_len} state bytes")
    if hashlib.sha256(state).hexdigest() != state_sha:
        raise CacheMiss("the state bytes do not match their sha256")
    return tokens, state


def evictions(entries: Sequence[tuple[str, int, float]], cap_bytes: int) -> list[str]:
    """Which of ``entries`` (name, size, mtime) to remove so the rest fit in ``cap_bytes``:
    least recently used (oldest mtime) first."""
    total = sum(size for _, size, _ in entries)
    out = []
    for name, size, _ in sorted(entries, key=lambda e: (e[2], e[0])):
        if total <= cap_bytes:
            break
        out.append(name)
        total -= size
    return out


class PrefixCache:
    """The entries under ``root``, at most ``cap_mb`` MiB in all (0: the cache is off)."""

    def __init__(self, root: Path, cap_mb: int) -> None:
        self.root = root
        self.cap_bytes = cap_mb * 1024 * 1024

    @property
    def enabled(self) -> bool:
        return self.cap_bytes > 0

    def path(self, key: CacheKey) -> Path:
        return self.root / key.model[:24] / key.file_name()

    def load(self, key: CacheKey) -> tuple[list[int], bytes] | None:
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.debug("prefix cache: cannot read %s: %s", path, e)
            return None
        try:
            found = decode_entry(blob, key)
        except CacheMiss as e:
            log.debug("prefix cache: ignoring and removing %s: %s", path, e)
            self.discard(key)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)     # a hit is a use: least recently used goes first
        return found

    def discard(self, key: CacheKey) -> None:
        with contextlib.suppress(OSError):
            self.path(key).unlink()

    def save(self, key: CacheKey, tokens: Sequence[int], state: bytes) -> bool:
        """Store an entry (atomically) and evict down to the cap. False when it does not fit or
        cannot be written: the cache is an optimisation, never a reason for a run to fail."""
        blob = encode_entry(key, tokens, state)
        if not self.enabled or len(blob) > self.cap_bytes:
            log.debug("prefix cache: %d bytes do not fit in the cap of %d", len(blob), self.cap_bytes)
            return False
        try:
            write_atomic(self.path(key), blob, make_parents=True)
        except OSError as e:
            log.debug("prefix cache: cannot write %s: %s", self.path(key), e)
            return False
        self.evict(keep=self.path(key))
        return True

    def entries(self) -> list[tuple[str, int, float]]:
        out = []
        for path in self.root.glob(f"*/*{SUFFIX}"):
            with contextlib.suppress(OSError):
                st = path.stat()
                out.append((str(path), st.st_size, st.st_mtime))
        return out

    def evict(self, keep: Path | None = None) -> None:
        for tmp in self.root.glob("*/.*.keel-tmp"):   # left by a process killed while writing
            with contextlib.suppress(OSError):
                if time.time() - tmp.stat().st_mtime > STALE_TMP_S:
                    tmp.unlink()
        entries = self.entries()
        if keep is not None:   # the entry just written is the newest, whatever the clock says
            entries = [(n, s, float("inf") if n == str(keep) else m) for n, s, m in entries]
        for name in evictions(entries, self.cap_bytes):
            with contextlib.suppress(OSError):
                os.unlink(name)
                log.debug("prefix cache: evicted %s", name)
