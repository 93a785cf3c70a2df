"""DELETE /notes/<id> and GET /notes?q=... (the search matches title or body, ignoring case)."""


def test_delete_removes_the_note(api):
    _, note = api.request("POST", "/notes", {"title": "temporary"})
    assert api.request("DELETE", f"/notes/{note['id']}") == (204, None)
    assert api.request("GET", f"/notes/{note['id']}")[0] == 404
    assert note not in api.request("GET", "/notes")[1]["notes"]


def test_deleting_an_unknown_note_is_404(api):
    assert api.request("DELETE", "/notes/424242")[0] == 404


def test_search_matches_title_or_body_ignoring_case(api):
    _, in_title = api.request("POST", "/notes", {"title": "Dentist appointment", "body": "Tuesday"})
    _, in_body = api.request("POST", "/notes", {"title": "reminder", "body": "book the DENTIST"})
    _, other = api.request("POST", "/notes", {"title": "gym", "body": "legs"})
    status, payload = api.request("GET", "/notes?q=dentist")
    assert status == 200
    assert in_title in payload["notes"] and in_body in payload["notes"]
    assert other not in payload["notes"]


def test_empty_search_lists_everything(api):
    everything = api.request("GET", "/notes")[1]["notes"]
    assert api.request("GET", "/notes?q=")[1]["notes"] == everything
