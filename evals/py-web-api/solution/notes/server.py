"""The HTTP layer: JSON in and out, one thread per request. Run: python -m notes.server --port 8080"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from notes.routes import dispatch
from notes.store import NoteStore


class NotesHandler(BaseHTTPRequestHandler):
    store = NoteStore()

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        self.answer("POST")

    def do_DELETE(self):
        self.answer("DELETE")

    def answer(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return self.send_json(400, {"error": "the request body is not valid JSON"})
        status, payload = dispatch(self.store, method, self.path, body)
        self.send_json(status, payload)

    def send_json(self, status, payload):
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # keep test output quiet
        pass


def main(argv=None):
    parser = argparse.ArgumentParser(description="Serve the notes API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), NotesHandler)
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
