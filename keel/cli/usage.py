"""Argument parsing for sub-commands that own their parser (`keel policy`, `keel checks`): a usage
error is raised, not printed-and-exited, so the command can word it and return exit code 2."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    pass


class RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)
