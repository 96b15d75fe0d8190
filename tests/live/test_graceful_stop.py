"""A graceful stop lets a download in flight finish (issue 16): the stop signal is the
server's graceful one (nginx: SIGQUIT), so `terminate_child` waits for it.

The server is a small stdlib HTTP server that behaves as nginx does: SIGQUIT stops
accepting and lets requests in flight finish; SIGTERM ends it at once. A real
nginx is used too where it is installed.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from actors import Tree
from supervision import ChildSpec, SupervisorSpec
from tests.support import wait_until
from tests.support.nginx import nginx_conf

SIZE = 8 * 1024 * 1024
CHUNK = 64 * 1024

SERVER = textwrap.dedent(
    f"""
    import http.server, os, signal, sys, threading, time
    port_file = sys.argv[1]

    class Download(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str({SIZE}))
            self.end_headers()
            chunk = b"x" * {CHUNK}
            for _ in range({SIZE // CHUNK}):
                self.wfile.write(chunk)
                time.sleep(0.01)  # a slow client's pace: about 1.3 s in all

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Download)
    server.daemon_threads = False  # server_close() waits for requests in flight
    signal.signal(signal.SIGQUIT, lambda *a: threading.Thread(target=server.shutdown).start())
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
    server.server_close()
    """
)


def _download(port: int, got: list[int], errors: list[BaseException]) -> None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/big")
        response = conn.getresponse()
        while data := response.read(CHUNK):
            got[0] += len(data)
        conn.close()
    except (OSError, http.client.HTTPException) as e:
        errors.append(e)


def _stop_during_a_download(spec: ChildSpec, port_of: object) -> tuple[int, list[BaseException]]:
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        port = port_of()  # type: ignore[operator]
        got, errors = [0], []  # type: ignore[var-annotated]
        client = threading.Thread(target=_download, args=(port, got, errors))
        client.start()
        wait_until(lambda: got[0] >= 4 * CHUNK or bool(errors), 20, "the download to begin")
        tree.nanny.terminate_child(spec.id).get()
        client.join(30)
        assert not client.is_alive()
        return got[0], errors
    finally:
        tree.stop()


def _server(tmp_path: Path, **fields: object) -> tuple[ChildSpec, object]:
    script, port_file = tmp_path / "server.py", tmp_path / "port"
    script.write_text(SERVER)

    def port() -> int:
        wait_until(port_file.exists, 20, "the server to listen")
        return int(port_file.read_text())

    spec = ChildSpec(
        id="web",
        command=[sys.executable, str(script), str(port_file)],
        shutdown=30.0,
        **fields,  # type: ignore[arg-type]
    )
    return spec, port


def test_the_graceful_stop_signal_lets_a_download_in_flight_finish(tmp_path: Path) -> None:
    spec, port = _server(tmp_path, stop_signal="QUIT")
    got, errors = _stop_during_a_download(spec, port)
    assert not errors and got == SIZE


def test_the_default_stop_signal_cuts_it(tmp_path: Path) -> None:
    """The control: SIGTERM (the default) is this server's fast stop."""
    spec, port = _server(tmp_path)
    got, errors = _stop_during_a_download(spec, port)
    assert errors or got < SIZE


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt install nginx-light)"
)
@pytest.mark.parametrize("stop_signal", ["QUIT", "TERM"])
def test_a_real_nginx_finishes_a_download_on_sigquit_and_cuts_it_on_sigterm(
    tmp_path: Path, stop_signal: str
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "big").write_bytes(b"x" * SIZE)
    conf = nginx_conf(tmp_path, free, root=tmp_path / "www", server="limit_rate 6m;")
    spec = ChildSpec(
        id="nginx",
        command=["nginx", "-c", str(conf), "-p", str(tmp_path)],
        stop_signal=stop_signal,
        shutdown=30.0,
        ready=0.5,
    )
    got, errors = _stop_during_a_download(spec, lambda: free)
    if stop_signal == "QUIT":  # nginx's graceful stop
        assert not errors and got == SIZE
    else:  # its fast one: the "got 22703083 of 60000000 bytes"
        assert errors or got < SIZE


@pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server is not installed (apt install redis-server)",
)
def test_a_real_redis_is_ready_on_sd_notify_and_saves_on_sigterm(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    spec = ChildSpec(
        id="redis",
        command=[
            "redis-server",
            "--port",
            str(free),
            "--daemonize",
            "no",
            "--supervised",
            "systemd",
            "--dir",
            str(tmp_path),
            "--save",
            "3600 1",
        ],
        ready="sd_notify",
        start_timeout=30.0,
        shutdown=30.0,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        with socket.create_connection(("127.0.0.1", free), timeout=10) as conn:
            conn.sendall(b"SET k v\r\n")
            assert conn.recv(64).startswith(b"+OK")
        tree.nanny.terminate_child("redis").get()
        assert (tmp_path / "dump.rdb").exists()  # it saved before it exited
    finally:
        tree.stop()


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt install nginx-light)"
)
def test_a_real_nginx_with_daemon_on_is_supervised_through_its_pid_file(tmp_path: Path) -> None:
    from actors.testing import wait_gone

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("hello\n")
    conf = nginx_conf(tmp_path, free, root=tmp_path / "www", server="limit_rate 6m;")
    conf.write_text(conf.read_text().replace("daemon off;", "daemon on;"))
    pid_file = tmp_path / "nginx.pid"
    spec = ChildSpec(
        id="nginx",
        command=["nginx", "-c", str(conf), "-p", str(tmp_path)],
        pid_file=str(pid_file),
        stop_signal="QUIT",
        start_timeout=20.0,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        master = tree.nanny.which_child("nginx").get().pid
        assert master == int(pid_file.read_text())  # the daemon, not the first process
        conn = http.client.HTTPConnection("127.0.0.1", free, timeout=10)
        conn.request("GET", "/index.html")
        assert conn.getresponse().read() == b"hello\n"
        conn.close()
        tree.nanny.terminate_child("nginx").get()
        assert wait_gone([master], timeout=20) == []
    finally:
        tree.stop()


@pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server is not installed (apt install redis-server)",
)
def test_a_real_redis_with_daemonize_yes_is_supervised_through_its_pid_file(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    pid_file = tmp_path / "redis.pid"
    spec = ChildSpec(
        id="redis",
        command=[
            "redis-server",
            "--port",
            str(free),
            "--daemonize",
            "yes",
            "--pidfile",
            str(pid_file),
            "--dir",
            str(tmp_path),
        ],
        pid_file=str(pid_file),
        start_timeout=20.0,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        main = tree.nanny.which_child("redis").get().pid
        assert main == int(pid_file.read_text())
        os.kill(main, 9)  # a crash of the daemon is the child's exit: restarted
        from tests.support import wait_until

        wait_until(lambda: tree.nanny.which_child("redis").get().restarts == 1, 20, "restart")
        again = tree.nanny.which_child("redis").get().pid
        assert again not in (None, main)
        with socket.create_connection(("127.0.0.1", free), timeout=10) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(64).startswith(b"+PONG")
    finally:
        tree.stop()


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt install nginx-light)"
)
def test_a_real_nginx_with_daemon_on_and_no_pid_file_is_told_what_to_set(tmp_path: Path) -> None:
    from actors.testing import wait_gone
    from supervision import EventKind, ExitKind

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    (tmp_path / "www").mkdir()
    conf = nginx_conf(tmp_path, free, root=tmp_path / "www", server="limit_rate 6m;")
    conf.write_text(conf.read_text().replace("daemon off;", "daemon on;"))
    spec = ChildSpec(
        id="nginx", command=["nginx", "-c", str(conf), "-p", str(tmp_path)], restart="temporary"
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        from tests.support import wait_event

        exited = wait_event(tree.ref, EventKind.CHILD_EXITED, "nginx")
        assert exited.reason is not None and exited.reason.kind is ExitKind.DAEMONIZED
        assert "set pid_file" in exited.reason.message
        left = int(exited.reason.message.split("pid ", 1)[1].split(",")[0].split()[0])
        assert wait_gone([left], timeout=20) == []  # nothing left running unsupervised
    finally:
        tree.stop()
