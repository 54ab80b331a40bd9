"""The question format: every bank folder loads; a broken folder names file, field and fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from generator import bank
from generator.question import QuestionError, load

BANK = bank.load()
EXAMPLE = BANK.templates / "budgets" / "model-budget"


def test_every_question_of_the_bank_loads():
    questions = BANK.all_questions()
    assert questions, "templates/ holds no question"
    for q in questions:
        assert q.points > 0 and q.spec.source.ref


def _broken(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "topic" / "broken"
    shutil.copytree(EXAMPLE, folder)
    spec = yaml.safe_load((folder / "question.yaml").read_text())
    edit(spec, folder)
    (folder / "question.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def _set(path: tuple, value):
    def edit(spec, _folder):
        node = spec
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _set(("answers", 1, "formula"), "memory.no_such"),
            r"question.yaml: answers.1.formula: unknown formula 'memory.no_such'",
        ),
        (
            _set(("answers", 0, "args", "n_layer"), "n_layers"),
            r"answers.0.args: transformer.param_count has no argument n_layer",
        ),
        (_set(("answers", 1, "args"), {}), r"answers.1.args: missing n_params"),
        (
            _set(("answers", 1, "args", "n_params"), "n_param * 2"),
            r"answers.1.args.n_params: 'n_param \* 2' uses n_param, which is not a parameter",
        ),
        (_set(("answers", 1, "unit"), "GP"), r"answers.1.unit: 'GP' cannot express 'byte'"),
        (_set(("answers", 1, "unit"), "s"), r"answers.1.unit: 's' cannot express 'byte'"),
        (_set(("answers", 0, "id"), "class"), r"answers.0.id: .*Python identifier"),
        (_set(("answers", 1, "id"), "n_params"), r"answers.1.id: 'n_params' is already"),
        (
            _set(("answers", 1, "misconceptions", 0), {"use": "gb_as_gigaflops"}),
            r"misconceptions.0.use: unknown transform 'gb_as_gigaflops'",
        ),
        (
            _set(("answers", 1, "tolerance"), {"rel": 0.01, "abs": 1}),
            r"answers.1.tolerance: .*exactly one of rel, abs, sig",
        ),
        (
            _set(("params", "vocab"), {"choice": [1], "range": [1, 2]}),
            r"params.vocab: .*exactly one of choice, range, gpu, expr",
        ),
        (
            _set(("params", "accel"), {"gpu": ["T4"], "precision": "bf16"}),
            r"params.accel.gpu: T4 has no bf16",
        ),
        (_set(("constraints", 0, "expr"), "import os"), r"constraints.0: 'import os' is not an"),
        (_set(("colour",), "blue"), r"question.yaml: colour: Extra inputs are not permitted"),
    ],
)
def test_broken_folder_errors_name_file_field_and_fix(tmp_path, edit, message):
    folder = _broken(tmp_path, edit)
    with pytest.raises(QuestionError, match=message):
        load(folder)


def test_missing_files_and_bad_jinja_are_named(tmp_path):
    folder = _broken(tmp_path, lambda spec, f: (f / "prompt.md").unlink())
    with pytest.raises(QuestionError, match=r"broken/prompt.md: missing"):
        load(folder)
    folder = _broken(tmp_path / "b", lambda spec, f: (f / "prompt.md").write_text("{% if %}"))
    with pytest.raises(QuestionError, match=r"broken/prompt.md: line 1:"):
        load(folder)
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(QuestionError, match=r"empty/question.yaml: missing"):
        load(folder)
    (folder / "question.yaml").write_text("title: [unclosed")
    with pytest.raises(QuestionError, match=r"not valid YAML"):
        load(folder)


def test_a_misconception_may_set_a_choice_argument_to_a_literal(tmp_path):
    # 001 Ex. 9(b): sampling with σ_t² = β̃_t instead of β_t is a named choice, not a name
    def edit(spec, _folder):
        spec["params"]["s"] = {"choice": [0.5, 2.0]}
        spec.pop("notes_example")
        spec["answers"].append(
            {
                "id": "sample_std",
                "prompt": "std",
                "formula": "diffusion.ddpm_sample_std",
                "args": {"data_std": "s"},
                "misconceptions": [
                    {"name": "β̃", "args": {"sampler_variance": "beta_tilde"}, "feedback": "x"}
                ],
            }
        )

    assert load(_broken(tmp_path, edit)).spec.answers[-1].misconceptions[0].args

    def bad(spec, folder):
        edit(spec, folder)
        spec["answers"][-1]["misconceptions"][0]["args"] = {"no_such": 1}

    with pytest.raises(QuestionError, match=r"misconceptions\.0\.args\.no_such: .* no such arg"):
        load(_broken(tmp_path / "b", bad))
