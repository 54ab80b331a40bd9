"""The authors' library for code checks: a ``checks.py`` holds only the question's
inputs, its mathematics and its properties.

Two halves, one import (``from autograder.checklib import ...``, at the top of a checks
file: the probe process loads this package, and nothing else of ScaleGrade):

- **probe side**, in the probe process: ``student.call(*args)`` calls the student's
  function and returns a :class:`Record` (``.value`` as ``.array()``/``.number()``,
  ``.grad``, ``.error``, ``.seconds``); ``student.calls([...])`` makes many calls in one
  round trip.  Conversion to plain data, size caps and error capture happen once, in
  :meth:`Record.of`; deadlines are the probe process's (``prober.Student``).  A record
  returned in the probe's result crosses to the trusted process as data.
- **grade side**, in the trusted process: :class:`Result` reads the probe's result
  without guards, :func:`expect_close` compares a record with a reference and writes
  the message, :func:`check` makes a property function, and :mod:`.stats` holds the
  statistical tests at a stated false-fail rate.

NumPy and the standard library only: see ``docs/authors.md`` for a walk through one
question.
"""

from .grading import (
    Property,
    Result,
    Verdict,
    check,
    close,
    expect_array,
    expect_close,
    judged,
    listed,
    notes,
    per_case,
    share,
)
from .reading import count, is_slice_of, matrix, number, plain, shape_note, shown, slice_at, vector
from .record import Record, error_text
from .served import Draws, Logged
from .stats import FALSE_FAIL, chi2_sf, chi2_test, two_sided_p

__all__ = [
    "FALSE_FAIL",
    "Draws",
    "Logged",
    "Property",
    "Record",
    "Result",
    "Verdict",
    "check",
    "chi2_sf",
    "chi2_test",
    "close",
    "count",
    "error_text",
    "expect_array",
    "expect_close",
    "judged",
    "is_slice_of",
    "listed",
    "matrix",
    "notes",
    "number",
    "per_case",
    "plain",
    "shape_note",
    "share",
    "shown",
    "slice_at",
    "two_sided_p",
    "vector",
]
