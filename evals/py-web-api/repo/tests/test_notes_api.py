def test_health(api):
    assert api.request("GET", "/health") == (200, {"status": "ok"})


def test_create_then_fetch(api):
    status, note = api.request("POST", "/notes", {"title": "groceries", "body": "eggs, milk"})
    assert status == 201 and note["title"] == "groceries"
    assert api.request("GET", f"/notes/{note['id']}") == (200, note)


def test_listing_contains_created_notes(api):
    _, note = api.request("POST", "/notes", {"title": "call mum"})
    status, payload = api.request("GET", "/notes")
    assert status == 200 and note in payload["notes"]


def test_a_note_needs_a_title(api):
    assert api.request("POST", "/notes", {"body": "no title"})[0] == 400


def test_unknown_note(api):
    assert api.request("GET", "/notes/9999")[0] == 404
