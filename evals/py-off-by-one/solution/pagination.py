"""Splitting result lists into pages for the list endpoints."""


def page_count(total, per_page):
    """How many pages ``total`` items fill, at ``per_page`` per page."""
    return (total + per_page - 1) // per_page


def paginate(items, page, per_page=20):
    """The items on ``page`` (pages are numbered from 1); an empty list past the last page."""
    if page < 1:
        raise ValueError("page numbers start at 1")
    start = (page - 1) * per_page
    return items[start:start + per_page]
