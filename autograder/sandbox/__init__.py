"""The sandbox: student code runs only here, and only plain data comes back.

The trusted side (this package) starts the warm executor, hands it one submission at a
time, enforces the wall timeout, caps what comes back and checks the harvest's schema;
what runs in the jail is :mod:`.inside`.  See ``docs/security.md`` for the model: the
student's process S, the probe process P beside it, and what the design stops.

- :mod:`.plan`: what a run is asked (Plan, Probe, Limits) and gives (Outcome);
- :mod:`.box`: :class:`Sandbox` and its warm executor, on the host or in a container;
- :mod:`.container`: the grading image's engine and ``run`` command;
- :mod:`.harvest`: the schema of what comes back;
- :mod:`.service`, :mod:`.remote`, :mod:`.distributed`: a warm sandbox shared over a
  socket, and Dask workers grading on other machines.
"""

from .box import PRELOAD, Sandbox, namespaces_available
from .container import Container, Engine, find_engine
from .harvest import check_harvest, clean_text
from .plan import HarvestError, Limits, Outcome, Plan, Probe, SandboxError

__all__ = [
    "PRELOAD",
    "Container",
    "Engine",
    "HarvestError",
    "Limits",
    "Outcome",
    "Plan",
    "Probe",
    "Sandbox",
    "SandboxError",
    "check_harvest",
    "clean_text",
    "find_engine",
    "namespaces_available",
]
