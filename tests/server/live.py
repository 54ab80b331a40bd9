"""The platform live on loopback, in this process: uvicorn on a free port and grading
workers in threads (each a real :class:`~scalegrade.server.worker.Worker` with its warm
sandbox), for the tests that drive it as a browser or an LMS does."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from scalegrade.server.app import create_app
from scalegrade.server.config import ServeConfig
from scalegrade.server.worker import Worker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live(config: ServeConfig, *, workers: int = 1, setup=None) -> Iterator[str]:
    """Serve ``config`` on 127.0.0.1 until the block ends; yields the base URL.
    ``setup(app)``: what to do with the app before it serves (accounts, say)."""
    port = free_port()
    config = config.model_copy(update={"host": "127.0.0.1", "port": port})
    app = create_app(config)
    if setup is not None:
        setup(app)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    stop = threading.Event()
    graders = [Worker(config, f"live-{i}") for i in range(workers)]
    threads = [threading.Thread(target=server.run, daemon=True)] + [
        threading.Thread(target=w.run, args=(stop,), daemon=True) for w in graders
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise AssertionError("uvicorn did not start within 30 s")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for w in graders:
            w.close()
        app.state.platform.book.close()
