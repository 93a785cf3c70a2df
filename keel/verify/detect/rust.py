"""Rust (Cargo.toml): `cargo clippy`, `cargo check` and `cargo test`.

Every Cargo project supports these without configuration, so Cargo.toml is enough evidence; only the
toolchain itself must be installed.
"""

from __future__ import annotations

from pathlib import Path

from keel.verify.detect.common import Findings
from keel.verify.plan import Category

_CARGO: tuple[tuple[Category, str], ...] = (
    ("static", "cargo clippy"), ("build", "cargo check"), ("test", "cargo test"))


def detect_rust(workspace: Path, found: Findings) -> None:
    if not (workspace / "Cargo.toml").is_file():
        return
    cargo_at = found.which("cargo")
    if not cargo_at:
        for category, command in _CARGO:
            found.skip(category, command, "Cargo.toml exists, but cargo is not installed")
        return
    why = f"Cargo.toml exists; cargo found at {cargo_at}"
    # clippy is a separate rustup component: `cargo clippy` fails without the cargo-clippy binary.
    clippy_at = found.which("cargo-clippy")
    if clippy_at:
        found.plan("static", "cargo clippy", f"{why}; cargo-clippy found at {clippy_at}")
    else:
        found.skip("static", "cargo clippy", "Cargo.toml exists, but the clippy component (cargo-clippy) "
                                             "is not installed")
    found.plan("build", "cargo check", why)
    found.plan("test", "cargo test", why)
