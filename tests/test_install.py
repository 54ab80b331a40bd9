"""ScaleGrade stands on its own: its wheel, installed normally, releases and grades from any
folder; a copy of the checkout with no ``shared/`` anywhere above it passes its tests.

The wheel goes into a fresh virtual environment (``--no-deps``: the dependencies are this
environment's, read through a ``.pth`` file, so nothing is downloaded), and every command
runs in an empty working folder, so nothing of the checkout can be found by accident.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

from autograder.integrations.gradescope import build_wheel

REPO = Path(__file__).resolve().parents[1]
SECRET = "an-install-test-secret-0123456789"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCALEGRADE_", "PYTHON"))}
    return env | {"SCALEGRADE_SECRET": SECRET} | extra


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment holding ScaleGrade's wheel, not the checkout (its bin/)."""
    root = tmp_path_factory.mktemp("install")
    wheel = build_wheel(root / "dist", REPO)
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # this environment's packages, after the new one's own (an editable install's .pth
    # files are not read from there, so the checkout stays out of sight)
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        + ["--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    return root / "venv" / "bin"


def _run(bin_dir: Path, cwd: Path, *args: str, check: bool = True, **env: str):
    done = subprocess.run(
        [str(bin_dir / "scalegrade"), *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert done.returncode == 0, f"scalegrade {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_carries_the_engine_and_the_bank_not_the_checkout(installed, tmp_path):
    code = (
        "import json, generator, scalegrade; from generator import bank; "
        "print(json.dumps([generator.__file__, str(bank.load().root)]))"
    )
    done = subprocess.run(
        [str(installed / "python"), "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    package, root = json.loads(done.stdout)
    site = installed.parent / "lib"
    assert Path(package).is_relative_to(site) and not Path(package).is_relative_to(REPO)
    assert Path(root).is_relative_to(site) and root.endswith("scalegrade/bank")
    for name in ("courses.yaml", "notes/000.yaml", "templates/README.md", "assignments/dl"):
        assert (Path(root) / name).exists(), name
    wheel = next((installed.parent.parent / "dist").glob("scalegrade-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("scalegrade/bank/") and "starter" in n]
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docker/"))]


def test_an_installed_scalegrade_releases_grades_and_builds_self_tests(installed, tmp_path):
    work = tmp_path / "course"
    work.mkdir()
    (work / "roster.csv").write_text(
        "student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n"
    )
    for aid in ("tdlsm/hw1", "dl/hw1"):
        _run(installed, work, "validate", aid, "--students", "5")
    _run(installed, work, "bank", "--coverage")
    done = _run(
        installed, work, "generate", "tdlsm/hw1", "--roster", "roster.csv", "--out", "hw1",
        "--with-solutions",
    )  # fmt: skip
    assert "keys:" in done.stdout
    _run(
        installed, work, "grade", "tdlsm/hw1", "hw1/solutions", "--keys", "hw1/keys",
        "--out", "grades", "--timeout", "120",
    )  # fmt: skip
    for student in ("ana", "ben"):
        doc = json.loads((work / "grades" / student / "results.json").read_text())
        failed = [t["name"] for t in doc["tests"] if "score" in t and t["score"] < t["max_score"]]
        assert not failed, (student, failed)  # every autograded part, the 5 code parts too
    _run(installed, work, "selftest", "dl/hw1", "--seed", "3", "--out", "practice.html")
    assert (work / "practice.html").stat().st_size > 10_000


def test_a_bank_of_ones_own_is_used_through_bank(installed, tmp_path):
    # an instructor copies the bank, adds one question by copying a folder, and uses it
    shipped = installed.parent / "lib"
    (courses,) = shipped.rglob("scalegrade/bank/courses.yaml")
    mine = tmp_path / "my-bank"
    shutil.copytree(courses.parent, mine)
    new = mine / "templates" / "mine" / "big-model"
    shutil.copytree(mine / "templates" / "budgets" / "model-budget", new)
    spec = yaml.safe_load((new / "question.yaml").read_text())
    spec["title"] = "The budget of a bigger model"
    (new / "question.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (mine / "assignments" / "tdlsm" / "quiz.yaml").write_text(
        "title: Quiz\nkind: homework\nnotebook: quiz\nquestions:\n  - question: mine/big-model\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "roster.csv").write_text("student_id,name,email\nana,Ana Lima,ana@x.edu\n")
    done = _run(installed, work, "validate", "tdlsm/quiz", "--bank", str(mine), "--students", "5")
    assert "mine/big-model" in done.stdout
    _run(installed, work, "generate", "tdlsm/quiz", "--roster", "roster.csv", "--out", "quiz",
         SCALEGRADE_BANK=str(mine))  # fmt: skip
    key = json.loads((work / "quiz" / "keys" / "ana.json").read_text())
    assert key["questions"][0]["title"] == "The budget of a bigger model"
    refused = _run(installed, work, "validate", "tdlsm/quiz", "--students", "5", check=False)
    assert refused.returncode == 2 and "no such assignment" in refused.stderr
    # or starts one from nothing: the installed package carries the scaffold
    _run(installed, work, "new-bank", "fresh", "--course", "ml101")
    done = _run(installed, work, "validate", "ml101/hw1", "--bank", "fresh", "--students", "5")
    assert "ok example/mean-code mean" in done.stdout


def _shipped_files() -> list[str]:
    """The checkout as it stands: tracked and untracked files git does not ignore."""
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [f for f in done.stdout.split("\0") if f and (REPO / f).is_file()]


def test_a_copy_of_the_checkout_with_no_shared_folder_passes_its_fast_tests(tmp_path):
    clone = tmp_path / "ScaleGrade"
    for name in _shipped_files():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, clone / name)
    assert [p.name for p in tmp_path.iterdir()] == [clone.name]  # nothing beside the clone
    fast = [
        "tests/contract",
        "tests/costmodel/test_worked_examples.py",
        "tests/generator/test_bank.py",
        "tests/generator/test_coverage.py",
        "tests/generator/test_question.py",
        "tests/generator/test_notes_examples.py",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *fast],
        cwd=clone,
        env=_env(PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
    where = subprocess.run(
        [sys.executable, "-c", "from generator import bank; print(bank.load().root)"],
        cwd=clone,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()) == clone  # the copy's own bank, not this checkout's
