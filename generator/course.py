"""A course of a bank, as its ``courses.yaml`` declares it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contract import Policy, Tolerance, times


class Course(BaseModel):
    """One course of the bank (``courses.yaml``); assignments live in ``assignments/<id>/``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    title: str
    cite_as: str  # how questions cite the notes ("000"); notes/<cite_as>.yaml indexes them
    notes_file: str | None = None  # the notes' own file, under $SCALEGRADE_NOTES
    default_tolerance: Tolerance = Tolerance(rel=0.01)
    policy: Policy = Policy()
    timezone: str = "UTC"  # IANA: deadlines and submission times without a zone are in it

    @field_validator("timezone")
    @classmethod
    def _a_zone(cls, name: str) -> str:
        times.zone(name)
        return name
