"""A small JSON notes API on the standard library."""
