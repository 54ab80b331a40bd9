"""Starts the executor in the jail: ``python -s -P -B .../inside/__main__.py FD``.

This folder is loaded as the package ``scalegrade_inside``, never through ``autograder``
(a grading image has none of the project), and :func:`executor.main` runs."""

import errno
import importlib.util
import os
import sys

FOLDER = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "scalegrade_inside", os.path.join(FOLDER, "__init__.py"), submodule_search_locations=[FOLDER]
)
_package = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _package
_spec.loader.exec_module(_package)

from scalegrade_inside import executor  # noqa: E402 - the package is the one just loaded

try:
    sys.exit(executor.main(sys.argv))
except OSError as err:
    if err.errno != errno.EPIPE:
        raise
    sys.exit(1)
