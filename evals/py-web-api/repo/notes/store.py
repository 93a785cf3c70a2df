"""In-memory note storage. Thread-safe: the server handles each request on its own thread."""

import itertools
import threading


class NoteStore:
    def __init__(self):
        self._notes = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, title, body=""):
        with self._lock:
            note = {"id": next(self._ids), "title": title, "body": body}
            self._notes[note["id"]] = note
            return dict(note)

    def get(self, note_id):
        with self._lock:
            note = self._notes.get(note_id)
            return dict(note) if note else None

    def all(self):
        with self._lock:
            return [dict(n) for n in self._notes.values()]
