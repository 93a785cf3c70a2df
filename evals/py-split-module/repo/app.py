"""Builds page metadata for the site generator."""

from textkit import slugify, title_case, unique_slug, wrap_text


def page_meta(title, body, taken=()):
    return {
        "title": title_case(title),
        "slug": unique_slug(title, set(taken)),
        "summary": wrap_text(body, width=60).split("\n\n")[0],
        "tag": slugify(title.split()[0]) if title.split() else "",
    }
