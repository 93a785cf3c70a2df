from app import page_meta
from textkit import (camel_to_snake, dedent_block, indent, slugify, snake_to_camel, strip_accents, title_case,
                     unique_slug, wrap_text)


def test_case_conversion():
    assert camel_to_snake("parseHTTPResponse") == "parse_http_response"
    assert snake_to_camel("parse_http_response") == "parseHttpResponse"
    assert snake_to_camel("user_id", upper_first=True) == "UserId"
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_wrapping():
    assert wrap_text("one two three four", width=9) == "one two\nthree\nfour"
    assert indent("a\n\nb", "> ") == "> a\n\n> b"
    assert dedent_block("\n    x\n      y\n") == "x\n  y"


def test_slugs():
    assert strip_accents("Crème brûlée") == "Creme brulee"
    assert slugify("  Hello, World! ") == "hello-world"
    assert unique_slug("Hello World", {"hello-world", "hello-world-2"}) == "hello-world-3"


def test_app_uses_the_public_api():
    meta = page_meta("a tale of two cities", "It was the best of times.", taken=["a-tale-of-two-cities"])
    assert meta == {"title": "A Tale of Two Cities", "slug": "a-tale-of-two-cities-2",
                    "summary": "It was the best of times.", "tag": "a"}
