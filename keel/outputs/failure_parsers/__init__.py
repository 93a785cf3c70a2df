"""Parsers that turn one check's output into a short account of what failed (see keel.outputs.summarize)."""
