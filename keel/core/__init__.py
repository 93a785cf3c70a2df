"""The bottom layer: the event bus and its log format, the one atomic write and file digest.

Imports nothing else from keel, so every other room may import it (docs/layout.md).
"""
