"""A bank is a folder: courses declared as data, questions found by folder, chosen by path
(--bank, $SCALEGRADE_BANK) or the one ScaleGrade ships; bad banks name the file and fix."""

from __future__ import annotations

import shutil

import pytest
import yaml
from click.testing import CliRunner

from generator import bank
from generator.assignment import AssignmentError
from generator.bank import BankError
from generator.question import QuestionError
from scalegrade.cli import main
from tests.banks import copy_bank

REPOSITORY = bank.load()


def test_the_default_bank_is_the_repositorys_own():
    assert (REPOSITORY.root / "courses.yaml").is_file()
    assert set(REPOSITORY.courses) == {"tdlsm", "dl"}
    tdlsm = REPOSITORY.courses["tdlsm"]
    assert tdlsm.cite_as == "000" and tdlsm.default_tolerance.rel == 0.01
    assert tdlsm.policy.ecf_credit == 0.8
    assert "tdlsm/hw1" in REPOSITORY.assignment_ids()
    assert bank.load() is REPOSITORY  # loaded once per folder


def test_the_environment_chooses_another_bank(tmp_path, monkeypatch):
    mine = copy_bank(tmp_path / "mine", link_templates=True)
    monkeypatch.setenv(bank.BANK_ENV, str(mine.root))
    assert bank.default_root() == mine.root
    assert bank.load().root == mine.root


def test_an_instructors_bank_adds_a_question_by_copying_a_folder(tmp_path):
    mine = copy_bank(tmp_path / "mine")
    shutil.copytree(mine.templates / "budgets" / "model-budget", mine.templates / "mine" / "my-q")
    spec = yaml.safe_load((mine.templates / "mine" / "my-q" / "question.yaml").read_text())
    spec["title"] = "My own budget question"
    (mine.templates / "mine" / "my-q" / "question.yaml").write_text(yaml.safe_dump(spec))
    (mine.assignments / "tdlsm" / "quiz.yaml").write_text(
        "title: Quiz\nkind: homework\nnotebook: quiz\nquestions:\n  - question: mine/my-q\n"
    )
    quiz = mine.assignment("tdlsm/quiz")
    assert [q.id for q in quiz.questions] == ["mine/my-q"]
    assert quiz.questions[0].spec.title == "My own budget question"
    with pytest.raises(AssignmentError, match="no such assignment"):
        REPOSITORY.assignment("tdlsm/quiz")  # the repository's bank is untouched
    result = CliRunner().invoke(
        main, ["validate", "tdlsm/quiz", "--students", "5", "--bank", str(mine.root)]
    )
    assert result.exit_code == 0, result.output
    assert "mine/my-q" in result.output


def test_a_folder_without_courses_is_no_bank(tmp_path):
    with pytest.raises(BankError, match=r"not a question bank \(no courses.yaml\)"):
        bank.Bank(tmp_path)
    result = CliRunner().invoke(main, ["bank", "--bank", str(tmp_path)])
    assert result.exit_code == 2 and "not a question bank" in result.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tdlsm: {cite_as: '000'}\n", r"courses.yaml: tdlsm.title: Field required"),
        (
            "tdlsm: {title: T, cite_as: '000', policy: {ecf_credit: 2}}\n",
            r"tdlsm.policy.ecf_credit: Input should be less than or equal to 1",
        ),
        (
            "tdlsm: {title: T, cite_as: '000', default_tolerance: {rel: 0.1, abs: 1}}\n",
            r"tdlsm.default_tolerance: Value error, give exactly one of rel, abs, sig",
        ),
        ("a: {title: A, cite_as: '0'}\nb: {title: B, cite_as: '0'}\n", "share a cite_as"),
        ("- just a list\n", "must map each course id"),
    ],
)
def test_a_bad_courses_file_names_the_field(tmp_path, text, message):
    (tmp_path / "courses.yaml").write_text(text)
    with pytest.raises(BankError, match=message):
        bank.Bank(tmp_path)


def test_a_question_citing_no_course_of_the_bank_is_refused(tmp_path):
    mine = copy_bank(tmp_path / "mine")
    path = mine.templates / "budgets" / "model-budget" / "question.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["source"]["notes"] = "002"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(QuestionError, match=r"source.notes: '002' is no course's cite_as"):
        mine.question("budgets/model-budget")
    with pytest.raises(QuestionError, match="no such question"):
        mine.question("budgets/nope")


def test_an_assignments_policy_overrides_the_courses_and_is_checked(tmp_path):
    mine = copy_bank(tmp_path / "mine", link_templates=True)
    folder = mine.assignments / "tdlsm"
    (folder / "strict.yaml").write_text(
        "title: S\nkind: homework\nnotebook: s\npolicy: {ecf: false}\n"
        "questions:\n  - question: budgets/model-budget\n"
    )
    strict = mine.assignment("tdlsm/strict")
    assert strict.policy.ecf is False and strict.policy.ecf_credit == 0.8  # the course's
    (folder / "bad.yaml").write_text(
        "title: B\nkind: homework\nnotebook: b\npolicy: {ecf_credit: 1.5}\n"
        "questions:\n  - question: budgets/model-budget\n"
    )
    with pytest.raises(AssignmentError, match=r"bad.yaml: policy.ecf_credit: Input should be"):
        mine.assignment("tdlsm/bad")
    (folder / "typo.yaml").write_text(
        "title: B\nkind: homework\nnotebook: b\npolicy: {ecf_credt: 0.5}\n"
        "questions:\n  - question: budgets/model-budget\n"
    )
    with pytest.raises(AssignmentError, match=r"policy.ecf_credt: Extra inputs are not permitted"):
        mine.assignment("tdlsm/typo")
