r"""What a sandbox run is asked (:class:`Plan`, its :class:`Probe`\ s, the :class:`Limits`)
and what it gives back (:class:`Outcome`), with the errors a run raises."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 60.0  # whole run, then the whole process tree is killed
    cpu_seconds: int = 60
    # RLIMIT_AS (torch import needs a few GB of address space), and the limit of the job's
    # memory cgroup where there is one
    memory_bytes: int = 6 * 2**30
    # False: no RLIMIT_AS where the job has a memory cgroup, which then bounds it alone (a
    # GPU run: CUDA reserves far more address space than it uses); a job without one keeps it
    address_space: bool = True
    processes: int = 256  # RLIMIT_NPROC (threads count); student code runs as a non-root uid
    file_bytes: int = 64 * 2**20  # RLIMIT_FSIZE
    open_files: int = 256
    output_bytes: int = 1 * 2**20  # stdout/stderr kept (the rest is dropped, not buffered)
    harvest_bytes: int = 16 * 2**20


@dataclass(frozen=True)
class Probe:
    id: str  # the code part's grade id, e.g. "q8-ring"
    function: str | None  # the student's function in the notebook; None: the checks read names
    source: str  # Python source of the question's checks.py (defines probe())
    seed: int  # grading seed (0 <= seed < 2**63)
    params: dict  # the student's variant params (plain JSON data)
    # probe() runs in the probe process, the student's function behind a proxy; False:
    # in the student's own process, as checks written before the probe process do
    isolated: bool = False
    # modules the warm executor imports before the run, once per batch (checks.preloads)
    preload: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    variables: tuple[str, ...]  # answer variables to read after the cells ran
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True)
class Outcome:
    harvest: dict | None  # plain data, schema-checked; None when the run failed
    error: str | None  # "timed out after 60 s", "killed by signal 9 (memory?)", ...
    seconds: float
    isolation: str  # "namespaces", "process" (fallback) or "docker"
    log: str  # tail of stdout/stderr, capped


class SandboxError(RuntimeError):
    """The sandbox itself cannot start (not a submission's error)."""


class HarvestError(ValueError):
    """What came back from the sandbox is not a harvest of the expected shape."""
