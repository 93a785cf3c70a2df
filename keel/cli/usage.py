"""Argument parsing for sub-commands that own their parser (`keel policy`, `keel checks`): a usage
error is raised, not printed-and-exited, so the command can word it and return exit code 2."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    pass


class RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine flags every command that talks to a model takes, worded once."""
    parser.add_argument("--base-url", help="the engine's OpenAI-compatible URL (default: KEEL_BASE_URL)")
    parser.add_argument("--model", help="model name as the server lists it (default: KEEL_MODEL)")
    parser.add_argument("--api-key-env", help="name of the environment variable that holds the API key")
    add_local_flag(parser)


def add_local_flag(parser: argparse.ArgumentParser) -> None:
    """--local [MODEL]: the in-process engine, for `keel run`, the REPL, `keel acp` and `keel mcp-serve`
    alike (keel.cli.run.local_flag reads it)."""
    parser.add_argument("--local", nargs="?", const="", metavar="MODEL",
                        help="run a GGUF model in this process (llama.cpp, no server): a .gguf path or a Hugging "
                             "Face repo:file; without MODEL the default small Qwen2.5-Coder (needs keel[local])")
