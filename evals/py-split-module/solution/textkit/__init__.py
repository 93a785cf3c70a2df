"""Text utilities used across the site generator, one module per group; all re-exported here."""

from textkit.case import camel_to_snake, snake_to_camel, title_case
from textkit.slug import slugify, strip_accents, unique_slug
from textkit.wrap import dedent_block, indent, wrap_text

__all__ = ["camel_to_snake", "snake_to_camel", "title_case", "wrap_text", "indent", "dedent_block", "slugify",
           "strip_accents", "unique_slug"]
