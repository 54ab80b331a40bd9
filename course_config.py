"""The two courses ScaleGrade serves: notes, where the secret comes from, default policies.

Everything an instructor sets once per course lives here; each assignment's YAML may
override the policy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SECRET_ENV = "SCALEGRADE_SECRET"
NOTES_ENV = "SCALEGRADE_NOTES"  # folder holding the notes; default ../shared/seeds
# Used by `scalegrade demo` only; `scalegrade generate` refuses it.
DEMO_SECRET = b"scalegrade-demo-secret-do-not-use-for-a-real-course"


@dataclass(frozen=True)
class Policy:
    """How an assignment is graded (assignments/<course>/<id>.yaml may override)."""

    ecf: bool = True  # error carried forward along the answer graph
    ecf_credit: float = 0.8  # share of the points a correct carried answer earns
    late_penalty_per_day: float = 0.1
    late_days_max: int = 3
    solutions_after_due: bool = True


@dataclass(frozen=True)
class Course:
    id: str
    title: str
    notes: str  # file under ../shared/seeds/ ("000" and "001" in citations)
    cite_as: str
    default_tolerance: dict[str, float] = field(default_factory=lambda: {"rel": 0.01})
    policy: Policy = field(default_factory=Policy)


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


def notes_path(course: Course) -> Path:
    """The notes file of ``course``: under ``$SCALEGRADE_NOTES``, else ``../shared/seeds``."""
    default = Path(__file__).resolve().parent.parent / "shared" / "seeds"
    return Path(os.environ.get(NOTES_ENV) or default) / course.notes


class SecretError(RuntimeError):
    """No usable course secret."""


def load_secret(secret_file: Path | None = None) -> bytes:
    """The course secret: ``--secret-file`` if given, else ``$SCALEGRADE_SECRET``.

    Variants are HMAC(secret, course/assignment/question/student): whoever holds the
    secret can recompute every student's numbers, so keep it out of the repository.
    """
    if secret_file is not None:
        try:
            secret = secret_file.read_bytes().strip()
        except OSError as err:
            raise SecretError(
                f"{secret_file}: cannot read the secret file ({err.strerror})"
            ) from None
        where = str(secret_file)
    else:
        secret = os.environ.get(SECRET_ENV, "").strip().encode()
        where = f"${SECRET_ENV}"
        if not secret:
            raise SecretError(
                f"no course secret: set ${SECRET_ENV} or pass --secret-file FILE "
                "(e.g. `python -c 'import secrets; print(secrets.token_hex(32))' > secret.txt`)"
            )
    if len(secret) < 16:
        raise SecretError(f"{where}: the secret is {len(secret)} bytes; use at least 16")
    if secret == DEMO_SECRET:
        raise SecretError(f"{where}: this is the public demo secret; generate a course secret")
    return secret
