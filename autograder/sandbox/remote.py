"""A Sandbox's ``run(notebook, plan) -> Outcome`` done somewhere else: a Dask worker
(:mod:`.distributed`) or a warm sandbox service (:mod:`.service`).

The notebook's bytes and the plan go out, the Outcome comes back; a notebook that cannot
be read, or a runner that cannot run it, is that submission's error, never the batch's.
"""

from __future__ import annotations

import time
from pathlib import Path

from autograder.sandbox import Outcome, Plan


class RemoteRunner:
    """Subclasses send the notebook (its path, for its name; its bytes) and the plan in
    :meth:`_send`, and return the Outcome that comes back."""

    isolation = ""  # what an Outcome made here says
    unavailable = "the sandbox is unavailable"  # before the reason a run failed

    def _send(self, notebook: Path, data: bytes, plan: Plan) -> Outcome:
        raise NotImplementedError

    def run(self, notebook: Path, plan: Plan) -> Outcome:
        start = time.monotonic()
        notebook = Path(notebook)
        try:
            data = notebook.read_bytes()
        except OSError as err:
            message = f"{notebook}: cannot read the notebook ({err})"
            return Outcome(None, message, 0.0, self.isolation, "")
        try:
            return self._send(notebook, data, plan)
        except Exception as err:  # noqa: BLE001 - the runner's trouble, this submission's error
            message = f"{self.unavailable}: {err}"
            return Outcome(None, message, time.monotonic() - start, self.isolation, "")

    def close(self) -> None:
        """Nothing to close unless a subclass holds something."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
