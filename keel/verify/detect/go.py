"""Go (go.mod): `go vet`, `go build` and `go test` over every package.

Every Go module supports these without configuration, so go.mod is enough evidence; only the
toolchain itself must be installed.
"""

from __future__ import annotations

from pathlib import Path

from keel.verify.detect.common import Findings
from keel.verify.plan import Category

_GO: tuple[tuple[Category, str], ...] = (
    ("static", "go vet ./..."), ("build", "go build ./..."), ("test", "go test ./..."))


def detect_go(workspace: Path, found: Findings) -> None:
    if not (workspace / "go.mod").is_file():
        return
    go_at = found.which("go")
    for category, command in _GO:
        if go_at:
            found.plan(category, command, f"go.mod exists; go found at {go_at}")
        else:
            found.skip(category, command, "go.mod exists, but the go toolchain is not installed")
