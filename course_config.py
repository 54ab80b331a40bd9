"""The two courses ScaleGrade serves, and where their notes are.

The generator and autograder (later issues) read rosters, the course secret and
default policies from here; the cost model does not depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Course:
    id: str
    title: str
    notes: str  # file under ../shared/seeds/ ("000" and "001" in citations)
    cite_as: str


COURSES: dict[str, Course] = {
    "tdlsm": Course(
        id="tdlsm",
        title="Training and Deploying Large-Scale Models",
        notes="000_65b48ca61b9ad61f.txt",
        cite_as="000",
    ),
    "dl": Course(
        id="dl",
        title="Deep Learning (cost-oriented)",
        notes="001_eec14080b3a7e063.txt",
        cite_as="001",
    ),
}
