"""The contract between generator and autograder: the key, and the rules it is read by.

Release writes ``keys/`` with :mod:`contract.key`; grading and the self-test compiler read
it with the same module and apply the same :mod:`contract.answers`: answer evaluation,
tolerance, the unit factor and the plausibility bound.  Neither side keeps a copy.
"""

from contract.answers import (
    PLAUSIBLE_FACTOR,
    Tolerance,
    evaluate,
    plausible,
    unit_factor,
    value,
    within,
)
from contract.key import (
    CHECKS_DIR,
    RELEASE_FILE,
    SCHEMA_VERSION,
    Answer,
    Checks,
    CodePart,
    FreeResponse,
    Key,
    KeyFileError,
    Misconception,
    Policy,
    Question,
    Release,
    Student,
    checks_file,
    read_checks,
    read_key,
    read_keys,
    read_release,
    sha256,
)

__all__ = [
    "CHECKS_DIR",
    "PLAUSIBLE_FACTOR",
    "RELEASE_FILE",
    "SCHEMA_VERSION",
    "Answer",
    "Checks",
    "CodePart",
    "FreeResponse",
    "Key",
    "KeyFileError",
    "Misconception",
    "Policy",
    "Question",
    "Release",
    "Student",
    "Tolerance",
    "checks_file",
    "evaluate",
    "plausible",
    "read_checks",
    "read_key",
    "read_keys",
    "read_release",
    "sha256",
    "unit_factor",
    "value",
    "within",
]
