"""`scalegrade serve`: uvicorn serving the application, and the grading workers beside it.

The workers are processes of their own (``python -m scalegrade.server.worker``), started
with the server and started again if one dies; uvicorn serves the pages from this process.
Stopping the server (Ctrl-C, SIGTERM) stops the workers; killing either at any moment
loses nothing (:mod:`.queue`).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path

from scalegrade.server.config import ServeConfig

log = logging.getLogger(__name__)

RESTART_SECONDS = 1.0  # between a worker's death and its restart


def worker_command(config: ServeConfig, name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "scalegrade.server.worker",
        name,
        config.model_dump_json(),
    ]


class Workers:
    """``count`` worker processes, each started again when it dies, until :meth:`stop`."""

    def __init__(self, config: ServeConfig, count: int, log_dir: Path):
        self.config, self.count, self.log_dir = config, count, log_dir
        self.procs: dict[int, subprocess.Popen] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="scalegrade-workers", daemon=True)

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i in range(self.count):
            self._start(i)
        self.thread.start()

    def _start(self, i: int) -> None:
        name = f"worker-{i}"
        with open(self.log_dir / f"{name}.log", "ab") as out:
            self.procs[i] = subprocess.Popen(
                worker_command(self.config, name), stdout=out, stderr=subprocess.STDOUT
            )

    def _watch(self) -> None:
        while not self.stopping.wait(RESTART_SECONDS):
            for i, proc in list(self.procs.items()):
                if proc.poll() is not None and not self.stopping.is_set():
                    log.warning("worker-%s exited (%s); starting it again", i, proc.returncode)
                    self._start(i)

    def stop(self) -> None:
        self.stopping.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def serve(config: ServeConfig, *, on_ready=None) -> None:
    """Serve ``config`` until stopped: the application under uvicorn, ``config.workers``
    grading workers beside it."""
    import uvicorn

    from scalegrade.server.app import create_app
    from scalegrade.server.lti.passback import start_poster

    app = create_app(config)
    poster = start_poster(config, app)  # LTI scores back to the LMS; None without lti
    workers = Workers(config, config.workers, config.data_dir / "logs")
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
        )
    )
    workers.start()
    try:
        if on_ready is not None:
            threading.Thread(target=_when_started, args=(server, on_ready), daemon=True).start()
        server.run()
    finally:
        if poster is not None:
            poster.stop()
        workers.stop()
        app.state.platform.book.close()


def _when_started(server, on_ready) -> None:
    while not server.started and not server.should_exit:
        threading.Event().wait(0.05)
    if server.started:
        on_ready()


def config_from_argv(argv: list[str]) -> tuple[str, ServeConfig]:
    name, doc = argv
    return name, ServeConfig.model_validate(json.loads(doc))
