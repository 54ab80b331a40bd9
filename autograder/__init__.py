"""Sandboxed grading: run submissions, harvest plain data, compare against keys.

Imports ``costmodel`` and the questions' checks; never the generator (see docs/security.md).
"""

import os

# The grader's NumPy work is small arrays (the trusted comparison, the checks' grade()),
# done while the sandboxes use every core: one BLAS thread, or OpenBLAS's threads spin
# against them (on 2 busy cores a 32 x 8 x 2144 product took 30 ms with its threads, 1 ms
# without).  Read when NumPy loads; a value the user set stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
