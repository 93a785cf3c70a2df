"""What the snapshot before each run_shell costs, against the plain stat scan keel makes anyway.

    python bench/snapshot.py [FILES] [MB]       # default: 5,000 files holding 100 MB in a temp dir

Builds the workspace (nested directories, sizes from 1 KB up, some binary), then measures in the
same run: the stat scan alone; the first snapshot (every file read, hashed and stored as a blob);
a later snapshot with nothing changed; and one after 20 files changed. Prints milliseconds and each
snapshot's ratio to the scan. A later snapshot reads only files whose stat key changed, so its cost
is the scan plus those files.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from session_overhead import _ms  # the same median-of-5 timer, measured alike

from keel.trace.checkpoints import CheckpointStore
from keel.trace.shellwatch import scan
from keel.trace.snapshot import Snapshotter


def _build(root: Path, files: int, total_mb: int) -> None:
    rng = random.Random(7)
    average = total_mb * 2**20 // files
    for i in range(files):
        d = root / f"pkg{i % 40}" / f"mod{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        size = max(1024, int(rng.expovariate(1 / average)))
        data = rng.randbytes(size) if i % 10 == 0 else (b"x = %d\n" % i) * (size // 8)
        (d / f"f{i}.py").write_bytes(data)


def main() -> int:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    total_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    tmp = Path(tempfile.mkdtemp(prefix="keel-bench-snapshot-"))
    try:
        work, session = tmp / "work", tmp / "session"
        _build(work, files, total_mb)
        size = sum(f.stat().st_size for f in work.rglob("*") if f.is_file())
        print(f"workspace: {files:,} files, {size / 2**20:.0f} MB")
        snap = Snapshotter(CheckpointStore(session / "checkpoints", work))

        def one() -> None:
            modes: dict[str, int] = {}
            snap.take(scan(work, modes), modes)

        scan_ms = _ms(lambda: scan(work))
        t = time.perf_counter()
        one()
        first_ms = (time.perf_counter() - t) * 1000
        # the scan and a later snapshot measured in turns, so a busy machine slows both alike
        scans, laters = [], []
        for _ in range(9):
            scans.append(_ms(lambda: scan(work), 1))
            laters.append(_ms(one, 1))
        scan_ms, later_ms = statistics.median(scans), statistics.median(laters)
        print(f"stat scan alone:                 {scan_ms:8.1f} ms   (1.0x)")
        print(f"first snapshot (scan + all):     {first_ms:8.1f} ms   ({first_ms / scan_ms:.1f}x)")
        print(f"later, nothing changed:          {later_ms:8.1f} ms   ({later_ms / scan_ms:.2f}x)")
        changed = sorted(work.rglob("*.py"))[:20]

        def after_edits() -> None:
            for path in changed:
                with path.open("ab") as fh:
                    fh.write(b"# edited\n")
            one()

        edits_ms = _ms(after_edits, 9)
        print(f"later, 20 files changed:         {edits_ms:8.1f} ms   ({edits_ms / scan_ms:.2f}x)")
        blobs = session / "checkpoints" / "blobs"
        stored = sum(os.path.getsize(b) for b in blobs.iterdir())
        print(f"store: {len(snap.store.pack.index()):,} blobs in the pack, {stored / 2**20:.0f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
