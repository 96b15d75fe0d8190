"""A small HTTP service for health tests: python3 tests/support/health_service.py PORT [WARMUP].

Listens on 127.0.0.1:PORT after WARMUP seconds (default 0), says so on stderr,
and answers GET /health with 200 and anything else with 404. If the port is
taken it says so on stderr and exits 1, as a real service does.
"""

from __future__ import annotations

import http.server
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 200 if self.path == "/health" else 404
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: a probe a second would fill the test's output


def main() -> int:
    port = int(sys.argv[1])
    warmup = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    time.sleep(warmup)
    try:
        server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    except OSError as e:
        print(f"cannot listen on 127.0.0.1:{port}: {e.strerror}", file=sys.stderr, flush=True)
        return 1
    print(f"listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
