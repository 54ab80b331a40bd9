"""The warm sandbox a test module grades in, on the host or in the grading image."""

from __future__ import annotations

from autograder.sandbox import Limits, Sandbox

WHERE = ["host", "container"]  # a module fixture's params: both, the image where CI built it


def sandbox_at(request, limits: Limits) -> Sandbox:
    """The sandbox of ``request.param`` (one of WHERE): on the host, or in the grading image
    (the ``grading_image`` fixture: skipped without it, failed in CI)."""
    if request.param == "container":
        image = request.getfixturevalue("grading_image")
        return Sandbox(backend="docker", image=image, limits=limits)
    return Sandbox(limits=limits)
