"""An HTTP child for update tests and benchmarks, kept as text: written to a file and
run as a command."""

from __future__ import annotations

# An HTTP server on the socket it is given (fd 3, systemd's protocol) that answers
# its VERSION and stops after the request in hand on SIGTERM; with CRASH_AFTER it
# exits 3 that many seconds after it started, between two requests (a run-time
# crash a settle sees, and no request cut in half).
SERVER = """
import os, signal, socket, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

class Answer(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{os.environ['VERSION']} {os.getpid()}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))  # ends after the request in hand
sock = socket.socket(fileno=3)
server = HTTPServer(sock.getsockname()[:2], Answer, bind_and_activate=False)
server.socket, server.timeout = sock, 0.05
crash = float(os.environ.get("CRASH_AFTER", "0")) or None
began = time.monotonic()
while crash is None or time.monotonic() - began < crash:
    if stopping:
        sys.exit(0)
    server.handle_request()
sys.exit(3)
"""
