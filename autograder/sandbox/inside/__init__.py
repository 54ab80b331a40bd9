"""What runs in the jail: the executor (a warm zygote that forks one job per submission),
the process tree of a job (``jobs``: the student's process S, the probe process P beside
it; ``ranks``: the fresh ranks the job's init starts for P; ``process``: how each of them
is made), its mounts and memory cgroups, and the code of S (``harness``), of P
(``prober``) and of the channel between them (``wire``).

The grader starts ``__main__.py``, which loads this folder as the package
``scalegrade_inside`` (a grading image has none of ScaleGrade but this folder and the
authors' library); the grader's own process imports it as
:mod:`autograder.sandbox.inside`, for the constants and the probe process's functions
that tests and local runs use.  Standard library only, and each module imports its
neighbours explicitly: ``from . import wire``.
"""

import os

FOLDER = os.path.dirname(os.path.abspath(__file__))
UID_BASE = 61000  # student code runs as UID_BASE + slot, one slot per concurrent run
UID_SLOTS = 1000
PROBE_UID_OFFSET = UID_SLOTS  # the probe process runs as the slot's uid + this
RANK_UID_OFFSET = 2 * UID_SLOTS  # fresh ranks run as the slot's uid + this
UIDS_PER_SLOT = 3  # the slot's uid, its probe's and its ranks'
