"""A Gradescope autograder package: ScaleGrade's sandboxed grader run by Gradescope.

:func:`build` writes the zip that Gradescope's "Configure Autograder" page takes::

    setup.sh          run once, as root, when Gradescope builds its image: a Python >= 3.11
                      virtual environment in /opt/scalegrade with torch's CPU build and
                      ScaleGrade, installed from the wheel below
    run_autograder    run for every submission: ``python -m autograder.integrations.gradescope run``
    scalegrade/
      config.json     the assignment, its notebook's name, the wall timeout per submission
      keys/           the assignment's keys/ folder as released, its code checks included:
                      instructor only, never visible to the notebook
      roster.csv      student_id,name,email (from the keys)
      extensions.csv  the extensions granted, when given (``export gradescope --extensions``)
      dist/scalegrade-<version>-py3-none-any.whl

Gradescope unpacks the zip into ``/autograder/source``, puts the student's files in
``/autograder/submission`` and the submission's metadata in
``/autograder/submission_metadata.json``, and uploads ``/autograder/results/results.json``.
:func:`run` does the grading: it finds the submitter on the roster (by email, then by
student id) and grades their notebook with :func:`autograder.grading.submission.grade_one`
against their own key, as every other entry point does, then writes results.json per
Gradescope's autograder specification.  The root is
``$SCALEGRADE_GRADESCOPE_ROOT`` (default ``/autograder``), so a test runs the same package in
a temporary folder.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.grading.keys import Keys
from autograder.semester.lateness import read_extensions
from autograder.semester.standing import standing
from autograder.semester.submitted_at import GRADESCOPE_FILE, SubmittedAt, gradescope_time
from contract import Key, KeyFileError, Release

ROOT_ENV = "SCALEGRADE_GRADESCOPE_ROOT"
DEFAULT_ROOT = "/autograder"
PACKAGE = "scalegrade"  # the folder in the zip (under /autograder/source)
EXTENSIONS = "extensions.csv"
TORCH = "torch==2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
VENV = "/opt/scalegrade"
PROJECT = Path(__file__).resolve().parents[2]
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip entries' time: the package's bytes do not depend on when

SETUP_SH = """#!/usr/bin/env bash
# ScaleGrade's Gradescope autograder, {assignment}: Gradescope runs this once, as root,
# when it builds the autograder image.  It makes {venv}, a Python >= 3.11 virtual
# environment with torch's CPU build and ScaleGrade (the wheel shipped in this zip).
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
new_enough() {{ "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }}
PY=python3
if ! new_enough "$PY"; then  # Ubuntu 22.04 images ship 3.10; 3.11 is in its archive
    apt-get update
    apt-get install -y python3.11 python3.11-venv
    PY=python3.11
fi
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
    apt-get update
    apt-get install -y "python3.$("$PY" -c 'import sys; print(sys.version_info[1])')-venv"
fi
"$PY" -m venv {venv}
{venv}/bin/pip install --upgrade pip
{venv}/bin/pip install "{torch}" --index-url "{torch_index}"
{venv}/bin/pip install "$HERE"/{package}/dist/*.whl
# grading reads keys/ alone: the question bank the wheel carries (reference solutions,
# checks) has no place where student code runs
{venv}/bin/python -c 'import os, shutil, scalegrade
shutil.rmtree(os.path.join(os.path.dirname(scalegrade.__file__), "bank"), ignore_errors=True)'
# the keys are the instructor's: root only (student code runs under another uid)
chmod -R go-rwx "$HERE/{package}"
{venv}/bin/python -m autograder.integrations.gradescope check --source "$HERE/{package}"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# ScaleGrade's Gradescope autograder, {assignment}: Gradescope runs this for every
# submission.  SCALEGRADE_GRADESCOPE_ROOT and SCALEGRADE_PYTHON are for testing the
# package outside Gradescope.
ROOT="${{SCALEGRADE_GRADESCOPE_ROOT:-{root}}}"
PYTHON="${{SCALEGRADE_PYTHON:-{venv}/bin/python}}"
exec "$PYTHON" -m autograder.integrations.gradescope run --root "$ROOT"
"""


class PackageError(RuntimeError):
    """The package cannot be built; the message says what to do."""


@dataclass(frozen=True)
class Package:
    path: Path
    bytes: int
    students: int
    checks: int  # code-check files shipped (in keys/checks/)
    seconds: float


# --- building the package ------------------------------------------------------------


def roster_csv(all_keys: dict[str, Key]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["student_id", "name", "email"])
    for sid, k in all_keys.items():
        w.writerow([sid, k.student.name, k.student.email])
    return out.getvalue()


def build_wheel(target: Path, project: Path = PROJECT) -> Path:
    """ScaleGrade's wheel, the question bank included, built from the checkout ``project``.

    Offline when hatchling (the build backend, a dev dependency) is installed here;
    otherwise pip fetches it.  The build writes nothing into the checkout.
    """
    if not (project / "pyproject.toml").is_file():
        raise PackageError(
            f"{project}: no pyproject.toml (ScaleGrade is not installed from a checkout); "
            "pass --wheel with a ScaleGrade wheel"
        )
    target.mkdir(parents=True, exist_ok=True)
    offline = (
        ("--no-build-isolation", "--no-index") if importlib.util.find_spec("hatchling") else ()
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", *offline),
            *("--quiet", "--wheel-dir", str(target), str(project)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise PackageError(f"building ScaleGrade's wheel failed:\n{done.stderr[-2000:]}")
    wheels = sorted(target.glob("scalegrade-*.whl"))
    if not wheels:
        raise PackageError(f"pip wheel wrote no scalegrade wheel in {target}")
    return wheels[-1]


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    zf.writestr(info, data)


def build(
    keys_dir: Path,
    out: Path,
    *,
    wheel: Path | None = None,
    timeout: float = 120.0,
    torch_index: str = TORCH_CPU_INDEX,
    extensions: Path | None = None,
) -> Package:
    """Write the Gradescope autograder zip of the assignment whose keys are ``keys_dir``.

    The zip carries ``keys_dir`` as it is, checks included, verified first: Gradescope
    grades with exactly what local grading would.  ``extensions``: an extensions.csv
    (:func:`autograder.semester.lateness.read_extensions`), checked against the roster and shipped,
    so that each submission's late penalty is ScaleGrade's, from its ``created_at``.
    """
    start = time.perf_counter()
    keys = Keys(keys_dir)
    info = keys.release
    all_keys = keys.all()
    granted = _extensions_for(extensions, info) if extensions else None
    config = {
        "assignment": info.assignment,
        "title": info.title,
        "notebook": info.notebook,
        "timeout": timeout,
    }
    with tempfile.TemporaryDirectory(prefix="scalegrade-package-") as tmp:
        wheel = wheel or build_wheel(Path(tmp) / "dist")
        if not wheel.is_file():
            raise PackageError(f"{wheel}: no such wheel")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial")
        fmt = dict(
            assignment=info.assignment,
            venv=VENV,
            torch=TORCH,
            torch_index=torch_index,
            package=PACKAGE,
            root=DEFAULT_ROOT,
        )
        with zipfile.ZipFile(partial, "w") as zf:
            _add(zf, "setup.sh", SETUP_SH.format(**fmt).encode(), executable=True)
            _add(zf, "run_autograder", RUN_AUTOGRADER.format(**fmt).encode(), executable=True)
            _add(zf, f"{PACKAGE}/config.json", (json.dumps(config, indent=1) + "\n").encode())
            _add(zf, f"{PACKAGE}/roster.csv", roster_csv(all_keys).encode())
            if granted is not None:
                _add(zf, f"{PACKAGE}/{EXTENSIONS}", granted)
            for path in sorted(p for p in keys_dir.rglob("*") if p.is_file()):
                name = path.relative_to(keys_dir).as_posix()
                _add(zf, f"{PACKAGE}/keys/{name}", path.read_bytes())
            _add(zf, f"{PACKAGE}/dist/{wheel.name}", wheel.read_bytes())
        os.replace(partial, out)
    return Package(
        out, out.stat().st_size, len(all_keys), len(keys.checks), time.perf_counter() - start
    )


def _extensions_for(path: Path, info: Release) -> bytes:
    """The extensions file's bytes, once every row is this assignment's and roster's."""
    found = read_extensions(path, info.timezone)
    problems = [
        f"{e.source}: student {e.student_id}: "
        + (
            f"an extension of {e.assignment}, not {info.assignment}"
            if e.assignment != info.assignment
            else f"not on the roster of {info.assignment}"
        )
        for e in found
        if e.assignment != info.assignment or e.student_id not in info.students
    ]
    if problems:
        raise PackageError("\n".join(problems))
    return path.read_bytes()


# --- grading one submission on Gradescope ----------------------------------------------


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return {
            r["student_id"]: {"name": r["name"], "email": r["email"]} for r in csv.DictReader(fh)
        }


def identify(metadata: dict[str, Any], roster: dict[str, dict[str, str]]) -> tuple[str | None, str]:
    """The roster's student for a submission: (student id or None, how, or why not).

    Each Gradescope user of the submission (several for a group) is looked up by email
    (case-insensitive), then by student id (the ``sid`` of Gradescope's roster).  Their
    Gradescope user ``id`` is Gradescope's own number, never matched.
    """
    by_email = {s["email"].strip().casefold(): sid for sid, s in roster.items() if s["email"]}
    users = metadata.get("users") or []
    for user in users:
        email = str(user.get("email") or "").strip().casefold()
        if email in by_email:
            return by_email[email], f"email {user.get('email')}"
        for field in ("sid", "student_id"):
            value = str(user.get(field) or "").strip()
            if value in roster:
                return value, f"student id {value}"
    who = ", ".join(str(u.get("email") or u.get("name") or u.get("id")) for u in users)
    return None, (
        f"the Gradescope account ({who or 'no user in the submission metadata'}) is not on "
        "the roster ScaleGrade released this assignment to (matched by email or student id)"
    )


def find_notebook(submission: Path, name: str) -> Path | None:
    """The submitted notebook: ``name`` anywhere in the submission, else the only .ipynb."""
    found = sorted(
        p
        for p in submission.rglob("*.ipynb")
        if p.is_file() and not any(part in ("__MACOSX", ".ipynb_checkpoints") for part in p.parts)
    )
    named = [p for p in found if p.name == name]
    if named:
        return named[0]
    return found[0] if len(found) == 1 else None


def _statuses(doc: dict[str, Any]) -> dict[str, Any]:
    for test in doc["tests"]:
        if "score" in test:
            test["status"] = "passed" if test["score"] >= test["max_score"] - 1e-9 else "failed"
    return doc


def _failure(message: str, max_score: float = 0.0) -> dict[str, Any]:
    return {
        "score": 0.0,
        "output": message,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {"max_score": max_score},
    }


def grade_submission(root: Path) -> dict[str, Any]:
    """results.json's document for the submission under ``root`` (a Gradescope tree)."""
    from autograder.grading.submission import grade_one
    from autograder.sandbox import Limits, Sandbox
    from autograder.semester import lateness, outputs
    from autograder.semester.batch import reveal_now
    from autograder.semester.gradebook import result_to_json

    source = root / "source" / PACKAGE
    if os.geteuid() == 0:
        os.chmod(source, 0o700)  # student code runs as another uid: keys out of its reach
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    keys = Keys(source / "keys")
    info = keys.release
    roster = read_roster(source / "roster.csv")
    metadata = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
    student_id, how = identify(metadata, roster)
    if student_id is None:
        return _failure(f"Not graded: {how}. Ask your instructor to check the roster.", info.points)
    notebook = find_notebook(root / "submission", info.notebook)
    if notebook is None:
        return _failure(
            f"Not graded: submit your notebook {info.notebook} (found no single .ipynb in "
            "your submission).",
            info.points,
        )
    when = gradescope_time(root / GRADESCOPE_FILE, info.timezone)
    at = when.at if isinstance(when, SubmittedAt) else None
    key, version = keys.key_at(student_id, at)  # the variant current when it was submitted
    reveal = reveal_now(info.due, info.policy, info.timezone)
    limits = Limits(wall_seconds=float(config.get("timeout", 120.0)))
    with Sandbox(limits=limits, hide=[root], preload=keys.preload) as sandbox:
        result = grade_one(key, notebook, keys=keys, runner=sandbox, reveal=reveal, version=version)
    extension = (
        {e.student_id: e for e in read_extensions(source / EXTENSIONS, info.timezone)}.get(
            student_id
        )
        if (source / EXTENSIONS).is_file()
        else None
    )
    late = lateness.alone(
        info.assignment,
        student_id,
        info.due_at(),
        when if isinstance(when, SubmittedAt) else None,
        info.policy,
        extension,
        info.timezone,
    )
    doc = standing(result_to_json(result), late, info.timezone)
    doc = _statuses(outputs.gradescope(doc, reveal=reveal))
    header = f"{info.title}: graded with the numbers released to {key.student.name} ({how})."
    doc["output"] = "\n".join([header, doc["output"]])
    doc["extra_data"] = {
        # the specification has no top-level maximum: Gradescope takes the assignment's
        "max_score": doc.pop("max_score"),
        "student_id": student_id,
        "assignment": info.assignment,
        "isolation": result.isolation,
        "sandbox_seconds": round(result.seconds, 2),
    }
    return doc


def run(root: Path) -> int:
    """Grade the submission under ``root`` and write ``root/results/results.json``."""
    start = time.perf_counter()
    try:
        doc = grade_submission(root)
        status = 0
    except Exception as err:  # noqa: BLE001 - the student must see a result, whatever broke
        print(f"scalegrade: the autograder failed: {type(err).__name__}: {err}", file=sys.stderr)
        doc = _failure(
            "The autograder could not grade this submission (an error on the instructor's "
            "side, not in your notebook). Your instructor has been shown the details."
        )
        status = 1
    doc["execution_time"] = round(time.perf_counter() - start, 2)
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    partial = results / ".results.json.partial"
    partial.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, results / "results.json")
    print(
        f"scalegrade: {doc.get('extra_data', {}).get('student_id', '?')}: "
        f"{doc['score']:g} / {doc['extra_data'].get('max_score', 0):g} points "
        f"in {doc['execution_time']:g} s"
    )
    return status


def check(source: Path) -> int:
    """What setup.sh runs after installing: the package's keys and checks are usable."""
    try:
        keys = Keys(source / "keys")
        n = len(keys.all())
    except KeyFileError as err:
        print(f"scalegrade: {err}", file=sys.stderr)
        return 1
    print(f"scalegrade: {n} keys and their {len(keys.checks)} code checks are readable")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.integrations.gradescope")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="grade /autograder/submission (run_autograder)")
    run_p.add_argument("--root", default=os.environ.get(ROOT_ENV, DEFAULT_ROOT))
    check_p = sub.add_parser("check", help="check the unpacked package (setup.sh)")
    check_p.add_argument("--source", required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(Path(args.root))
    return check(Path(args.source))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
