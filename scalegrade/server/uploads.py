"""An upload, checked before it is queued, and stored where nothing serves it.

Checked: an ``.ipynb`` name, at most the configured bytes, a notebook nbformat can read,
of this assignment (its metadata, its answer cells), and not the notebook as it was
released (no code cell changed or added: no answer given).  Nothing in it is run here;
the sandbox runs it.

Stored under ``DATA/uploads/<assignment>/<student>/``, made by this process only (0600, a
name of the server's making, written then moved into place), before the job that names
it is queued: an upload the queue knows is never missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from scalegrade.server.course import Served

UPLOADS = "uploads"


class UploadError(ValueError):
    """An upload refused, with what to do about it."""


def _answer_cells(doc: dict) -> dict[tuple, str]:
    """The notebook's ScaleGrade cells (answers, code, free response) and their sources."""
    out = {}
    for cell in doc.get("cells", []):
        meta = (cell.get("metadata") or {}).get("scalegrade")
        if isinstance(meta, dict) and meta.get("kind") in ("answer", "code", "free_response"):
            name = (meta.get("kind"), meta.get("variable") or meta.get("function"),
                    meta.get("question"), meta.get("answer"))  # fmt: skip
            source = cell.get("source", "")
            out[name] = "".join(source) if isinstance(source, list) else str(source)
    return out


def _code(doc: dict) -> list[str]:
    """The sources of a notebook's code cells, in order (what runs when it is graded)."""
    return [
        "".join(c.get("source", "")) if isinstance(c.get("source"), list) else str(c.get("source"))
        for c in doc.get("cells", [])
        if isinstance(c, dict) and c.get("cell_type") == "code"
    ]


def check(filename: str, data: bytes, served: Served, student_id: str) -> None:
    """Raise :class:`UploadError` unless ``data`` is a notebook of this assignment with an
    answer in it."""
    notebook = served.release.notebook
    if not filename.lower().endswith(".ipynb"):
        raise UploadError(
            f"{filename or 'That file'} is not a notebook: upload your {notebook} "
            "(File > Download as .ipynb in Jupyter)."
        )
    try:
        doc = json.loads(data.decode("utf-8"))
        nb = nbformat.from_dict(doc)
        nbformat.validate(nb)
    except (UnicodeDecodeError, ValueError, nbformat.ValidationError) as err:
        raise UploadError(
            f"{filename} is not a readable notebook ({type(err).__name__}); download it "
            "again from Jupyter, or start again from your released notebook."
        ) from None
    meta = (doc.get("metadata") or {}).get("scalegrade")
    other = meta.get("assignment") if isinstance(meta, dict) else None
    if isinstance(other, str) and other != served.name:
        raise UploadError(
            f"{filename} is a notebook of {other[:200]}, not of {served.name}: upload it on "
            "that assignment's page."
        )
    mine = _answer_cells(doc)
    if not mine:
        raise UploadError(
            f"{filename} has none of {served.release.title}'s answer cells: is it the right "
            f"notebook? Upload the {notebook} you downloaded here."
        )
    released = served.notebook(student_id)
    if released is not None:
        as_released = json.loads(released.read_text(encoding="utf-8"))
        if _code(doc) == _code(as_released):
            raise UploadError(
                f"{filename} is your notebook as it was released: it holds no answer yet. "
                "Fill in the answer cells, save, and upload it again."
            )


def store(data_dir: Path, served: Served, student_id: str, data: bytes) -> tuple[str, str]:
    """Write the upload; its path relative to ``data_dir``, and its SHA-256."""
    digest = hashlib.sha256(data).hexdigest()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    relative = Path(UPLOADS) / served.slug / student_id / f"{stamp}-{digest[:12]}.ipynb"
    target = Path(data_dir) / relative
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(relative), digest
