"""nbgrader's own app, run in this process (as nbgrader's own tests do), for the tests that
claim compatibility with it."""

from __future__ import annotations

import logging
import os
from io import StringIO
from pathlib import Path

from jupyter_core.application import NoStart
from nbgrader.apps.nbgraderapp import NbGraderApp


def config(path: Path, lines: str) -> None:
    """Write ``path/nbgrader_config.py`` with ``lines`` (``c.X = ...``)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "nbgrader_config.py").write_text("c = get_config()\n" + lines, encoding="utf-8")


def nbgrader(cwd: Path, *args: str) -> str:
    """`nbgrader ARGS` run in ``cwd`` (nbgrader reads ./nbgrader_config.py); its log.  A
    failure fails the test with the log."""
    app, log = NbGraderApp.instance(), StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        app.initialize(list(args))
        app.init_logging(logging.StreamHandler, [log], color=False, subapps=True)
        app.start()
        code = 0
    except NoStart:
        code = 0
    except SystemExit as err:
        code = err.code
    finally:
        app.reset()
        os.chdir(here)
    assert not code, f"nbgrader {' '.join(args)}:\n{log.getvalue()}"
    return log.getvalue()
