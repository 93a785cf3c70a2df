"""What a command's output means: which commands count as checks, and short summaries of their output.

Check classification, output summaries and the per-tool failure parsers. Pure text in, text out;
used by context (what the model sees of an output), tools (the shell) and verify (the gate).
"""
