"""The warm sandbox a test module grades in, on the host or in the grading image."""

from __future__ import annotations

import pytest

from autograder.sandbox import Limits, Plan, Probe, Sandbox

WHERE = ["host", "container"]  # a module fixture's params: both, the image where CI built it


def sandbox_at(request, limits: Limits) -> Sandbox:
    """The sandbox of ``request.param`` (one of WHERE): on the host, or in the grading image
    (the ``grading_image`` fixture: skipped without it, failed in CI)."""
    if request.param == "container":
        image = request.getfixturevalue("grading_image")
        return Sandbox(backend="docker", image=image, limits=limits)
    return Sandbox(limits=limits)


def everywhere(limits: Limits):
    """A module's ``sandbox`` fixture: one warm sandbox on the host, then one in the
    grading image (``sandbox = everywhere(LIMITS)`` at the module's top)."""

    @pytest.fixture(scope="module", params=WHERE)
    def sandbox(request):
        with sandbox_at(request, limits) as box:
            yield box

    return sandbox


def probed(sandbox: Sandbox, folder, cells: str, function: str, probe: str):
    """What one isolated probe (``probe``: its source) returned on a notebook of ``cells``
    defining ``function``, the run and the probe asserted clean."""
    from tests.autograder.test_sandbox import notebook

    plan = Plan((), (Probe(f"q1-{function}", function, probe, 7, {}, isolated=True),))
    outcome = sandbox.run(notebook(folder / "nb.ipynb", cells), plan)
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    result = outcome.harvest["probes"][f"q1-{function}"]
    assert result["ok"], result
    return result["result"]
