"""The package layout: each group of helpers in its own module, all re-exported by textkit."""

import textkit
from textkit.case import camel_to_snake, snake_to_camel, title_case
from textkit.slug import slugify, strip_accents, unique_slug
from textkit.wrap import dedent_block, indent, wrap_text


def test_the_package_re_exports_the_modules_functions():
    for func in (camel_to_snake, snake_to_camel, title_case, wrap_text, indent, dedent_block, slugify,
                 strip_accents, unique_slug):
        assert getattr(textkit, func.__name__) is func


def test_all_lists_the_public_api():
    assert len(textkit.__all__) == 9
