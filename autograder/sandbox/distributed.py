"""Scale out: the same per-submission sandbox run on a Dask cluster.

``scalegrade grade ... --executor dask --scheduler ADDRESS``.  Only the sandbox step moves:
the grader sends each submission's notebook bytes and its plan (the answer variables and
the probes' sources, seeds and the student's params: exactly what a local sandbox gets) to
a worker; the worker runs them in its own :class:`~autograder.sandbox.Sandbox`, built once
per worker process from the same :class:`SandboxSpec` by a worker plugin, and sends back
the outcome as JSON text.  Keys, the comparison and the gradebook stay with the grader, so
a worker machine never holds an answer, and results are those of the local executor.

Every worker needs the same ScaleGrade install as the grader and the sandbox's
prerequisites (root and ``unshare`` for namespaces, or a Docker engine and the image for
``--sandbox docker``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from autograder.sandbox import Limits, Outcome, Plan, Sandbox
from autograder.sandbox.remote import RemoteRunner

try:  # the ``dask`` extra: pip install 'scalegrade[dask]'
    from distributed import Client, WorkerPlugin, get_worker
except ImportError:  # pragma: no cover - without the extra, DaskRunner says what to install
    Client = None
    WorkerPlugin = object
    get_worker = None


@dataclass(frozen=True)
class SandboxSpec:
    """What a worker builds its Sandbox from: the grader's own sandbox arguments."""

    backend: str = "auto"
    limits: Limits = field(default_factory=Limits)
    hide: tuple[str, ...] = ()
    image: str | None = None
    gpus: str | None = None
    preload: tuple[str, ...] = ()
    engine: str = "auto"  # the container engine of --sandbox docker, on the worker

    def __post_init__(self) -> None:
        object.__setattr__(self, "hide", tuple(os.path.abspath(p) for p in self.hide))

    def build(self, jobs: int = 2) -> Sandbox:
        """The worker's Sandbox, for ``jobs`` submissions at once (its threads)."""
        return Sandbox(
            backend=self.backend,
            limits=self.limits,
            hide=[Path(p) for p in self.hide],
            image=self.image,
            gpus=self.gpus,
            preload=self.preload,
            engine=self.engine,
            jobs=jobs,
        )


class SandboxPlugin(WorkerPlugin):
    """One warm Sandbox per worker process, for one batch; closed when the batch ends or
    the worker stops.  A worker that joins later builds its own on arrival."""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.sandbox: Sandbox | None = None

    def setup(self, worker) -> None:
        self.sandbox = self.spec.build(worker.state.nthreads)

    def teardown(self, worker) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def run_submission(plugin: str, name: str, notebook: bytes, plan: Plan) -> str:
    """The task a worker runs: ``notebook`` (the submission's bytes, named ``name``) in this
    worker's sandbox; the Outcome as JSON text (plain data only crosses the cluster)."""
    sandbox = get_worker().plugins[plugin].sandbox
    if sandbox is None:
        raise RuntimeError(f"the sandbox of plugin {plugin} is closed")
    work = tempfile.mkdtemp(prefix="scalegrade-dask-")
    try:
        path = Path(work) / (os.path.basename(name) or "notebook.ipynb")
        path.write_bytes(notebook)
        outcome = sandbox.run(path, plan)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return json.dumps(dataclasses.asdict(outcome))


class DaskRunner(RemoteRunner):
    """The ``run(notebook, plan) -> Outcome`` of a Sandbox, on a Dask cluster.

    ``grade_batch(..., sandbox=DaskRunner(...), jobs=runner.threads)``: each grader thread
    waits on one submission's task, so ``jobs`` is the cluster's worker threads.
    """

    isolation = "dask"
    unavailable = "the Dask cluster could not run it"

    def __init__(self, client: Client, spec: SandboxSpec, *, owns_client: bool = False):
        self.client = client
        self.spec = spec
        self._owns_client = owns_client
        self.plugin = f"scalegrade-sandbox-{uuid.uuid4().hex[:12]}"
        # Builds the sandbox on every worker now (an error there is raised here) and on
        # every worker that joins later.
        client.register_plugin(SandboxPlugin(spec), name=self.plugin)

    @classmethod
    def connect(cls, scheduler: str, spec: SandboxSpec, *, timeout: float = 30.0) -> DaskRunner:
        """A runner on the cluster whose scheduler listens at ``scheduler``
        (``tcp://host:8786``); it owns its client."""
        if Client is None:
            raise RuntimeError(
                "--executor dask needs Dask's distributed scheduler: "
                "pip install 'scalegrade[dask]' (here and on every worker)"
            )
        client = Client(scheduler, timeout=timeout, set_as_default=False)
        try:
            return cls(client, spec, owns_client=True)
        except BaseException:
            client.close()
            raise

    @property
    def threads(self) -> int:
        """Worker threads in the cluster now."""
        return sum(self.client.nthreads().values())

    def _send(self, notebook: Path, data: bytes, plan: Plan) -> Outcome:
        future = self.client.submit(
            run_submission,
            self.plugin,
            notebook.name,
            data,
            plan,
            key=f"scalegrade-{notebook.parent.name}-{uuid.uuid4().hex[:8]}",
            pure=False,
        )
        return Outcome(**json.loads(future.result()))

    def close(self) -> None:
        try:
            self.client.unregister_worker_plugin(self.plugin)
        except Exception:  # noqa: BLE001 - the workers may be gone already
            pass
        if self._owns_client:
            self.client.close()
