"""The `scalegrade` command's edges: calc, --list, --gpu, bad input, verify; what the
commands that run no code check leave out (torch)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from scalegrade.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_calc_prints_human_units():
    # 000 Ex. 1(b): 16 N for N = 1.31e9 is about 21 GB
    result = run("calc", "memory.model_state_bytes", "n_params=1310359552")
    assert result.exit_code == 0, result.output
    assert "21.0 GB (19.5 GiB)" in result.output
    assert "Prop 1.2" in result.output


def test_calc_reads_units_in_values():
    # 000 Ex. 8: 1 GB over 64 workers at 25 GB/s with 10 us latency: 0.080 s
    result = run(
        "calc",
        "collectives.ring_allreduce_seconds",
        "n_bytes=1GB",
        "n_workers=64",
        "bandwidth=25GB/s",
        "latency=10us",
    )
    assert result.exit_code == 0, result.output
    assert "0.0800 s" in result.output


def test_calc_fills_hardware_from_the_catalog():
    # 001 exam Q1: the A100 ridge is 312e12 / 2e12 = 156 FLOP/byte
    result = run("calc", "roofline.ridge_intensity", "--gpu", "A100")
    assert result.exit_code == 0, result.output
    assert "156" in result.output


def test_calc_list_lists_formulas():
    result = run("calc", "--list")
    assert result.exit_code == 0
    assert "transformer.param_count" in result.output


def test_bad_input_is_one_line_naming_the_argument_and_exit_2():
    cases = [
        (["memory.model_state_bytes", "n_params=-5"], "n_params = -5.0: must be a number > 0"),
        (
            [
                "budget.training_seconds",
                "total_flops=1e21",
                "n_gpus=0",
                "peak_flops=1e15",
                "mfu=0.4",
            ],
            "n_gpus = 0",
        ),
        (
            [
                "budget.training_seconds",
                "total_flops=1e21",
                "n_gpus=8",
                "peak_flops=1e15",
                "mfu=1.5",
            ],
            "mfu = 1.5",
        ),
        (["memory.no_such"], "unknown formula 'memory.no_such'"),
        (["memory.model_state_bytes", "n_param=5"], "unknown argument 'n_param'"),
        (["memory.model_state_bytes", "n_params"], "expected key=value"),
        (
            ["collectives.ring_allreduce_seconds", "n_bytes=1 GP", "n_workers=4", "bandwidth=1e9"],
            "unknown unit 'GP'",
        ),
        (["roofline.ridge_intensity", "--gpu", "T4"], "T4 has no bf16"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, ["calc", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_verify_exits_zero_and_reports_the_count():
    result = run("verify", "--points", "2")
    assert result.exit_code == 0, result.output
    assert "derivations verified" in result.output


def test_generate_refuses_without_a_usable_secret(tmp_path, monkeypatch):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,ana@x.edu\n")
    out = tmp_path / "out"
    monkeypatch.delenv("SCALEGRADE_SECRET", raising=False)
    result = run("generate", "tdlsm/hw1", "--roster", str(roster), "--out", str(out))
    assert result.exit_code == 2 and "no course secret: set $SCALEGRADE_SECRET" in result.output
    from generator.secret import DEMO_SECRET

    monkeypatch.setenv("SCALEGRADE_SECRET", DEMO_SECRET.decode())
    result = run("generate", "tdlsm/hw1", "--roster", str(roster), "--out", str(out))
    assert result.exit_code == 2 and "public demo secret" in result.output
    assert not out.exists()


def test_generate_with_a_bad_roster_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEGRADE_SECRET", "x" * 32)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\nana,Ana again,b@x\n")
    out = tmp_path / "out"
    result = run("generate", "tdlsm/hw1", "--roster", str(roster), "--out", str(out))
    assert result.exit_code == 2
    assert "line 3: student_id 'ana' repeats line 2" in result.output
    assert not out.exists()


def test_generate_releases_and_reports(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s" * 40)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\n")
    out = tmp_path / "out"
    args = [
        "generate",
        "tdlsm/hw1",
        "--roster",
        str(roster),
        "--out",
        str(out),
        "--secret-file",
        str(secret),
    ]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "2 students" in result.output and "students sharing numbers" in result.output
    assert (out / "release" / "ana" / "hw1.ipynb").is_file()
    again = run(*args)
    assert again.exit_code == 2 and "pass --force" in again.output
    assert run(*args, "--force").exit_code == 0


def test_grade_with_keys_it_cannot_use_says_so_and_closes_the_sandbox(tmp_path, monkeypatch):
    """The sandbox starts while the keys are read; keys of another assignment, or none,
    are one sentence, and the sandbox already started is closed."""
    from autograder import sandbox as sandbox_module

    closed = []

    class Recorded(sandbox_module.Sandbox):
        def close(self):
            closed.append(self)
            super().close()

    monkeypatch.setattr(sandbox_module, "Sandbox", Recorded)
    secret = tmp_path / "secret.txt"
    secret.write_text("s" * 40)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\n")
    released = run("generate", "tdlsm/hw1", "--roster", str(roster), "--out",
                   str(tmp_path / "hw1"), "--secret-file", str(secret))  # fmt: skip
    assert released.exit_code == 0, released.output
    assert len(closed) == 1  # the release check's (tests/test_selfcheck.py)
    (tmp_path / "subs").mkdir()
    for assignment, keys, says in (
        ("tdlsm/hw2", tmp_path / "hw1" / "keys", "holds the keys of tdlsm/hw1, not tdlsm/hw2"),
        ("tdlsm/hw1", tmp_path / "nowhere", "assignment.json: missing; --keys must be"),
    ):
        done = run("grade", assignment, str(tmp_path / "subs"), "--keys", str(keys),
                   "--out", str(tmp_path / "grades"))  # fmt: skip
        assert done.exit_code == 2 and says in done.output, done.output
    assert len(closed) == 3


def test_unknown_assignment_lists_what_exists():
    result = run("validate", "tdlsm/hw9")
    assert (
        result.exit_code == 2 and "course tdlsm has: " in result.output and "hw1" in result.output
    )


def test_validate_prints_the_table_and_exits_zero():
    result = run("validate", "tdlsm/hw1", "--students", "20")
    assert result.exit_code == 0, result.output
    assert "budgets/model-budget" in result.output and "states_gb" in result.output


def test_bank_lists_questions_and_the_coverage_of_both_notes():
    result = run("bank")
    assert result.exit_code == 0, result.output
    assert "budgets/model-budget" in result.output and "Exercise 1" in result.output
    result = run("bank", "--coverage")
    assert result.exit_code == 0, result.output
    assert "A 3-D layout for 175B" in result.output  # 000 Exercise 13, from notes/000.yaml
    assert "written exam Q2 (6 pts)" in result.output
    assert "FAIL" not in result.output and "checked against" not in result.output


def test_bank_coverage_with_unreadable_notes_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("SCALEGRADE_NOTES", str(tmp_path))  # a folder without the notes
    result = run("bank", "--coverage")
    assert result.exit_code == 2
    assert "cannot read the notes" in result.output and "$SCALEGRADE_NOTES" in result.output


_NO_TORCH = """
import sys
from scalegrade.cli import main
sys.argv = ["scalegrade", *sys.argv[1:]]
try:
    main()
except SystemExit as end:
    status = end.code
heavy = sorted(m for m in ("torch", "autograder.sandbox", "nbclient") if m in sys.modules)
print("IMPORTED", heavy)
sys.exit(status)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["calc", "transformer.param_count", "n_layers=24", "d_model=2048", "vocab=50000"],
        ["verify", "--points", "2"],
        ["validate", "tdlsm/hw1", "--students", "3", "--selfcheck-seeds", "0"],
        [
            "generate",
            "tdlsm/hw1",
            "--roster",
            "{roster}",
            "--out",
            "{out}",
            "--with-solutions",
            "--selfcheck-seeds",
            "0",
        ],
    ],  # fmt: skip
    ids=lambda a: a[0],
)
def test_commands_that_run_no_code_check_never_import_torch(args, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,ana@x.edu\n")
    argv = [a.format(roster=roster, out=tmp_path / "out") for a in args]
    env = {**os.environ, "SCALEGRADE_SECRET": "s" * 32}
    done = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, *argv], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "IMPORTED []" in done.stdout


def test_the_release_check_leaves_torch_to_the_sandbox(tmp_path):
    """validate's release check grades in the sandbox: torch is imported there, never in
    the command's own process."""
    done = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, "validate", "tdlsm/hw1", "--students", "3",
         "--selfcheck-seeds", "1"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "release check of 5 code parts" in done.stdout
    assert "IMPORTED ['autograder.sandbox']" in done.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["late", "tdlsm/hw1"],
        ["marks", "export", "tdlsm/hw1", "--out", "marks.csv"],
        ["regrade", "tdlsm/hw1", "--by", "Ada", "--why", "x"],
    ],
)
def test_the_semester_commands_name_the_gradebook_they_need(command, tmp_path):
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2
    assert "name the gradebook: --grades DIR" in result.output
    result = CliRunner().invoke(main, [*command, "--grades", str(tmp_path)])
    assert result.exit_code == 2 and f"{tmp_path}: no gradebook.sqlite" in result.output
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    result = CliRunner().invoke(main, [*command, "--db", url])
    assert result.exit_code == 2 and "knows no assignment 'tdlsm/hw1'" in result.output


def test_grade_with_gpus_leaves_memory_to_each_jobs_cgroup():
    from scalegrade.cli.common import _limits

    assert _limits({"timeout": 30, "gpus": None}).address_space is True
    gpu = _limits({"timeout": 30, "gpus": "all"})
    assert gpu.address_space is False and gpu.wall_seconds == 30
