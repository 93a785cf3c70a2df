"""Request routing: (method, path, JSON body) in, (status, JSON payload) out. No HTTP here."""

import re
from urllib.parse import parse_qs, urlsplit

NOTE_PATH = re.compile(r"^/notes/(\d+)$")


def not_found(path):
    return 404, {"error": f"no route or resource for {path}"}


def dispatch(store, method, target, body):
    """Answer one request. ``target`` is the request path, possibly with a query string."""
    parts = urlsplit(target)
    path = parts.path
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "GET" and path == "/health":
        return 200, {"status": "ok"}
    if path == "/notes":
        if method == "GET":
            search = query.get("q", [""])[0]
            return 200, {"notes": store.search(search) if search else store.all()}
        if method == "POST":
            return create_note(store, body)
        return 405, {"error": f"{method} not allowed on /notes"}
    match = NOTE_PATH.match(path)
    if match and method == "GET":
        note = store.get(int(match.group(1)))
        return (200, note) if note else not_found(path)
    if match and method == "DELETE":
        return (204, None) if store.delete(int(match.group(1))) else not_found(path)
    return not_found(path)


def create_note(store, body):
    if not isinstance(body, dict) or not isinstance(body.get("title"), str) or not body["title"].strip():
        return 400, {"error": "a note needs a non-empty string title"}
    text = body.get("body", "")
    if not isinstance(text, str):
        return 400, {"error": "body must be a string"}
    return 201, store.add(body["title"].strip(), text)
