"""A real nginx for tests and benchmarks: a config of its own in a folder, run in the
foreground (`daemon off;`), every path it writes inside that folder."""

from __future__ import annotations

import os
from pathlib import Path

CONF = """
{user}
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
worker_processes {workers};
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        {server}
    }}
    {extra}
}}
"""


def nginx_conf(
    folder: Path,
    port: int,
    *,
    workers: int = 1,
    root: Path | None = None,
    server: str = "",
    extra: str = "",
) -> Path:
    """Write `folder`/nginx.conf: nginx on 127.0.0.1:`port` serving `root` (default:
    `folder`), `server` and `extra` added to its server and http blocks."""
    # As root, nginx's workers would run as nobody, who cannot read pytest's 0700 folders.
    user = "user root;" if os.geteuid() == 0 else ""
    conf = folder / "nginx.conf"
    text = CONF.format(
        user=user,
        dir=folder,
        port=port,
        workers=workers,
        root=root if root is not None else folder,
        server=server,
        extra=extra,
    )
    conf.write_text(text)
    return conf


def nginx_command(folder: Path, conf: Path | None = None) -> list[str]:
    """The command that runs nginx with `folder`'s config and prefix."""
    return ["nginx", "-c", str(conf or folder / "nginx.conf"), "-p", str(folder)]
